"""AI Task entity: one model call per task, text or JSON data validated against a structure."""

from __future__ import annotations

import base64
from dataclasses import dataclass
import json
import logging
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
import litellm
import voluptuous as vol

from homeassistant.components import ai_task, conversation
from homeassistant.config_entries import ConfigEntry
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import llm
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from .agent.model import ModelAccess, ModelErrorKind, to_model_error
from .const import (
    DEFAULT_AI_TASK_TEMPERATURE,
    DOMAIN,
    SUBENTRY_AI_TASK,
)
from .entity import SubentryEntity, add_subentry_entities
from .tools.schema import sanitize_schema, schema_to_json

try:  # Home Assistant >= 2026.9 describes structures with probatio
    from probatio import Error as _ProbatioError

    _INVALID: tuple[type[Exception], ...] = (vol.Invalid, _ProbatioError, ValueError, TypeError)
except ImportError:  # Home Assistant 2026.2: voluptuous
    _INVALID = (vol.Invalid, ValueError, TypeError)

_LOGGER = logging.getLogger(__name__)

# The entity only awaits the model; Home Assistant may call it concurrently.
PARALLEL_UPDATES = 0

# Attempts at a structured answer: the first, and one retry told what was wrong.
STRUCTURE_ATTEMPTS = 2
_ERROR_DETAIL_CHARS = 300

_JSON_INSTRUCTIONS = (
    "Answer with only one JSON object, no other text and no code fences. "
    "It must match this JSON schema:\n{schema}"
)
_RETRY_INSTRUCTIONS = (
    "That answer was not valid: {error}. Answer again with only the JSON object, "
    "matching the JSON schema given before."
)


async def async_setup_entry(
    hass: HomeAssistant,
    entry: ConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """One AI Task entity per ai_task_data subentry."""
    add_subentry_entities(entry, SUBENTRY_AI_TASK, LangGraphAITaskEntity, async_add_entities)


@dataclass(frozen=True, slots=True)
class _Capabilities:
    """What LiteLLM knows of the model; None when it does not know."""

    vision: bool | None
    json_mode: bool


def _capabilities(access: ModelAccess) -> _Capabilities:
    """Look the model up in LiteLLM's model map (in the executor: it may read files)."""
    vision: bool | None = None
    try:
        info = litellm.get_model_info(model=access.model)
    except Exception:  # noqa: BLE001  unknown models (self-hosted ones) raise
        info = None
    if info is not None and info.get("supports_vision") is not None:
        vision = bool(info["supports_vision"])
    provider, _, name = access.model.partition("/")
    try:
        params = litellm.get_supported_openai_params(
            model=name or provider, custom_llm_provider=provider
        )
    except Exception:  # noqa: BLE001  an unknown provider: ask for nothing special
        params = None
    return _Capabilities(vision=vision, json_mode="response_format" in (params or ()))


def _data_url(path: Path, mime_type: str) -> str:
    """The file as a base64 data URL (runs in the executor)."""
    return f"data:{mime_type};base64,{base64.b64encode(path.read_bytes()).decode()}"


def parse_json_answer(text: str) -> Any:
    """The JSON in a model's answer, tolerating code fences and words around an object."""
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0].strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:
            return json.loads(text[start : end + 1])
        raise


class LangGraphAITaskEntity(SubentryEntity, ai_task.AITaskEntity):
    """Generates data with the entry's model: text, or JSON matching a structure."""

    default_temperature = DEFAULT_AI_TASK_TEMPERATURE
    _attr_supported_features = (
        ai_task.AITaskEntityFeature.GENERATE_DATA | ai_task.AITaskEntityFeature.SUPPORT_ATTACHMENTS
    )

    async def _async_generate_data(
        self,
        task: ai_task.GenDataTask,
        chat_log: conversation.ChatLog,
    ) -> ai_task.GenDataTaskResult:
        """Run the task: one model call, plus one retry when structured data is invalid."""
        runtime = self.entry.runtime_data
        capabilities = await self.hass.async_add_executor_job(_capabilities, runtime.access)
        system_prompt = chat_log.content[0].content
        if task.structure is not None:
            schema = self._json_schema(task, chat_log)
            system_prompt = (
                f"{system_prompt}\n\n{_JSON_INSTRUCTIONS.format(schema=json.dumps(schema))}"
            )
        messages: list[BaseMessage] = [
            SystemMessage(content=system_prompt),
            await self._human_message(task, capabilities),
        ]
        model: Any = runtime.chat_model(self._settings())

        if task.structure is None:
            text = await self._ask(model, messages)
            if not text.strip():
                raise HomeAssistantError(
                    translation_domain=DOMAIN, translation_key="turn_empty_answer"
                )
            self._record(chat_log, text)
            return ai_task.GenDataTaskResult(conversation_id=chat_log.conversation_id, data=text)

        if capabilities.json_mode:
            model = model.bind(response_format={"type": "json_object"})
        error = ""
        for attempt in range(STRUCTURE_ATTEMPTS):
            text = await self._ask(model, messages)
            self._record(chat_log, text)
            try:
                data = task.structure(parse_json_answer(text))
            except (json.JSONDecodeError, *_INVALID) as err:
                error = str(err)[:_ERROR_DETAIL_CHARS] or type(err).__name__
                _LOGGER.debug(
                    "%s: answer %d for task %s is invalid: %s",
                    self.entity_id,
                    attempt + 1,
                    task.name,
                    error,
                )
                messages += [
                    AIMessage(content=text),
                    HumanMessage(content=_RETRY_INSTRUCTIONS.format(error=error)),
                ]
                continue
            return ai_task.GenDataTaskResult(conversation_id=chat_log.conversation_id, data=data)
        _LOGGER.warning("%s: no valid data for task %s: %s", self.entity_id, task.name, error)
        raise HomeAssistantError(
            translation_domain=DOMAIN,
            translation_key="ai_task_invalid_structure",
            translation_placeholders={"error": error},
        )

    @staticmethod
    def _json_schema(task: ai_task.GenDataTask, chat_log: conversation.ChatLog) -> dict[str, Any]:
        """The structure as JSON schema, converted the way core's AI Task agents do."""
        serializer = (
            chat_log.llm_api.custom_serializer if chat_log.llm_api else llm.selector_serializer
        )
        return sanitize_schema(schema_to_json(task.structure, custom_serializer=serializer))

    async def _human_message(
        self, task: ai_task.GenDataTask, capabilities: _Capabilities
    ) -> HumanMessage:
        """The instructions, with images as content blocks; other files are refused."""
        if not task.attachments:
            return HumanMessage(content=task.instructions)
        blocks: list[str | dict[str, Any]] = [{"type": "text", "text": task.instructions}]
        for attachment in task.attachments:
            name = Path(attachment.path).name
            if not attachment.mime_type.startswith("image/"):
                raise HomeAssistantError(
                    translation_domain=DOMAIN,
                    translation_key="ai_task_attachment_type",
                    translation_placeholders={"name": name, "mime_type": attachment.mime_type},
                )
            if capabilities.vision is False:
                raise HomeAssistantError(
                    translation_domain=DOMAIN,
                    translation_key="ai_task_no_vision",
                    translation_placeholders={"name": name},
                )
            url = await self.hass.async_add_executor_job(
                _data_url, Path(attachment.path), attachment.mime_type
            )
            blocks.append({"type": "image_url", "image_url": {"url": url}})
        return HumanMessage(content=blocks)

    async def _ask(self, model: Any, messages: list[BaseMessage]) -> str:
        """One model call; failures become the conversation agent's translated errors."""
        runtime = self.entry.runtime_data
        try:
            answer = await model.ainvoke(messages)
        except Exception as err:  # noqa: BLE001  every failure becomes a typed ModelError
            error = to_model_error(err, runtime.access)
            _LOGGER.warning(
                "%s could not answer (%s): %s", self.entity_id, error.kind, error.detail
            )
            if error.kind == ModelErrorKind.AUTH:
                self.entry.async_start_reauth(self.hass)
            raise HomeAssistantError(
                translation_domain=DOMAIN, translation_key=f"turn_{error.kind}"
            ) from None
        return str(answer.text)

    def _record(self, chat_log: conversation.ChatLog, text: str) -> None:
        """The answer goes into the chat log, where the debug view shows it."""
        chat_log.async_add_assistant_content_without_tools(
            conversation.AssistantContent(agent_id=self.entity_id, content=text)
        )
