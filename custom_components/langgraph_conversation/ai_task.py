"""AI Task entity: text, or JSON data validated against a structure, on the agents' model path.

The task itself runs in agent/one_shot.py: retries before the first word, the fallback
model, activity events and errors as a conversation turn has them. This entity turns Home
Assistant's task into that request and the answer back into a task result.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from typing import Any

import voluptuous as vol

from homeassistant.components import ai_task, conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import llm
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from . import LangGraphConfigEntry
from .activity import ActivityReporter
from .agent.errors import TurnError
from .agent.models import InvalidAnswer, TaskRequest, model_capabilities, run_task
from .const import (
    CONF_ACTIVITY_CONTENTS,
    CONF_MODEL_RETRIES,
    DEFAULT_AI_TASK_TEMPERATURE,
    DEFAULT_MODEL_RETRIES,
    DOMAIN,
    SUBENTRY_AI_TASK,
)
from .entity import SubentryEntity, add_subentry_entities
from .profile import agent_roles
from .tools.schema import sanitize_schema, schema_to_json

try:  # Home Assistant >= 2026.9 describes structures with probatio
    from probatio import Error as _ProbatioError

    _INVALID: tuple[type[Exception], ...] = (vol.Invalid, _ProbatioError, ValueError, TypeError)
except ImportError:  # Home Assistant 2026.2: voluptuous
    _INVALID = (vol.Invalid, ValueError, TypeError)

_LOGGER = logging.getLogger(__name__)

# The entity only awaits the model; Home Assistant may call it concurrently.
PARALLEL_UPDATES = 0


async def async_setup_entry(
    hass: HomeAssistant,
    entry: LangGraphConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """One AI Task entity per ai_task_data subentry."""
    add_subentry_entities(entry, SUBENTRY_AI_TASK, LangGraphAITaskEntity, async_add_entities)


def _data_url(path: Path, mime_type: str) -> str:
    """The file as a base64 data URL (runs in the executor)."""
    return f"data:{mime_type};base64,{base64.b64encode(path.read_bytes()).decode()}"


def _checker(structure: Any) -> Any:
    """The task's structure as the check of one_shot.run_task: data, or InvalidAnswer."""

    def check(data: Any) -> Any:
        try:
            return structure(data)
        except _INVALID as err:
            raise InvalidAnswer(str(err) or type(err).__name__) from err

    return check


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
        options = self.subentry.data
        request = TaskRequest(
            system_prompt=chat_log.content[0].content,
            content=await self._content(task),
            settings=self._settings(),
            roles=agent_roles(runtime.access, options),
            model_retries=options.get(CONF_MODEL_RETRIES, DEFAULT_MODEL_RETRIES),
            schema=self._json_schema(task, chat_log) if task.structure is not None else None,
            request_text=task.instructions,
            label=chat_log.conversation_id,
        )
        reporter = ActivityReporter(
            self.hass,
            chat_log,
            agent_id=self.entity_id,
            # Home Assistant 2026.10+ passes the caller's context to the entity (2026.2
            # does not: the events then get one of their own).
            context=self._context or Context(),
            device_id=None,
            include_contents=options.get(CONF_ACTIVITY_CONTENTS, False),
        )
        try:
            data = await run_task(
                runtime.access,
                runtime.models,
                request,
                hooks=(*runtime.hooks, reporter),
                check=_checker(task.structure) if task.structure is not None else None,
                on_answer=lambda text: self._record(chat_log, text),
            )
        except TurnError as err:
            raise self._model_failure(err) from None
        except InvalidAnswer as err:
            _LOGGER.warning("%s: no valid data for task %s: %s", self.entity_id, task.name, err)
            raise HomeAssistantError(
                translation_domain=DOMAIN,
                translation_key="ai_task_invalid_structure",
                translation_placeholders={"error": str(err)},
            ) from None
        return ai_task.GenDataTaskResult(conversation_id=chat_log.conversation_id, data=data)

    @staticmethod
    def _json_schema(task: ai_task.GenDataTask, chat_log: conversation.ChatLog) -> dict[str, Any]:
        """The structure as JSON schema, converted the way core's AI Task agents do."""
        serializer = (
            chat_log.llm_api.custom_serializer if chat_log.llm_api else llm.selector_serializer
        )
        return sanitize_schema(schema_to_json(task.structure, custom_serializer=serializer))

    async def _content(self, task: ai_task.GenDataTask) -> str | list[str | dict[str, Any]]:
        """The instructions, with images as content blocks; other files are refused, and
        images too when LiteLLM knows the model cannot see."""
        if not task.attachments:
            return task.instructions
        capabilities = await self.hass.async_add_executor_job(
            model_capabilities, self.entry.runtime_data.access.model
        )
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
        return blocks

    def _record(self, chat_log: conversation.ChatLog, text: str) -> None:
        """The answer goes into the chat log, where the debug view shows it."""
        chat_log.async_add_assistant_content_without_tools(
            conversation.AssistantContent(agent_id=self.entity_id, content=text)
        )
