"""One AI Task assembled: Home Assistant's task and ChatLog → the one-shot request of
agent/models/one_shot.py, and the check its structured answer must pass.

The AI Task entity runs the request and returns the result; what the request is made of is
gathered here: Home Assistant's AI Task prompt, the instructions with images as content
blocks (other files are refused, and images too when LiteLLM knows the model cannot see),
the subentry's model settings and roles, the structure as JSON schema. An image task
(generate_image) becomes the ImageRequest of agent/models/images.py: the instructions, the
attached images to edit, the subentry's image models under the roles' key rule, its retries
and timeout.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import voluptuous as vol

from homeassistant.components import ai_task, conversation
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import llm

from .agent.models import (
    ImageModels,
    ImageRequest,
    InvalidAnswer,
    ModelAccess,
    ReferenceImage,
    TaskRequest,
    image_models,
    model_capabilities,
)
from .const import (
    CONF_IMAGE_FALLBACK_MODEL,
    CONF_IMAGE_MODEL,
    CONF_MODEL_RETRIES,
    CONF_REQUEST_TIMEOUT,
    DEFAULT_MODEL_RETRIES,
    DOMAIN,
)
from .profile import AI_TASK_DEFAULTS, agent_roles, model_section, model_settings
from .tools.schema import sanitize_schema, schema_to_json

try:  # Home Assistant >= 2026.9 describes structures with probatio
    from probatio import Error as _ProbatioError

    _INVALID: tuple[type[Exception], ...] = (vol.Invalid, _ProbatioError, ValueError, TypeError)
except ImportError:  # Home Assistant 2026.2: voluptuous
    _INVALID = (vol.Invalid, ValueError, TypeError)


def _data_url(path: Path, mime_type: str) -> str:
    """The file as a base64 data URL (runs in the executor)."""
    return f"data:{mime_type};base64,{base64.b64encode(path.read_bytes()).decode()}"


def structure_check(structure: Any) -> Callable[[Any], Any] | None:
    """The task's structure as the check of one_shot.run_task: data, or InvalidAnswer
    (None for a task without a structure)."""
    if structure is None:
        return None

    def check(data: Any) -> Any:
        try:
            return structure(data)
        except _INVALID as err:
            raise InvalidAnswer(str(err) or type(err).__name__) from err

    return check


def json_schema(task: ai_task.GenDataTask, chat_log: conversation.ChatLog) -> dict[str, Any]:
    """The structure as JSON schema, converted the way core's AI Task agents do."""
    serializer = chat_log.llm_api.custom_serializer if chat_log.llm_api else llm.selector_serializer
    return sanitize_schema(schema_to_json(task.structure, custom_serializer=serializer))


async def task_content(
    hass: HomeAssistant, model: str, task: ai_task.GenDataTask
) -> str | list[str | dict[str, Any]]:
    """The instructions, with images as content blocks; other files are refused, and
    images too when LiteLLM knows `model` cannot see."""
    if not task.attachments:
        return task.instructions
    capabilities = await hass.async_add_executor_job(model_capabilities, model)
    blocks: list[str | dict[str, Any]] = [{"type": "text", "text": task.instructions}]
    for attachment in task.attachments:
        name = _image_name(attachment)
        if capabilities.vision is False:
            raise HomeAssistantError(
                translation_domain=DOMAIN,
                translation_key="ai_task_no_vision",
                translation_placeholders={"name": name},
            )
        url = await hass.async_add_executor_job(
            _data_url, Path(attachment.path), attachment.mime_type
        )
        blocks.append({"type": "image_url", "image_url": {"url": url}})
    return blocks


async def assemble_task(
    hass: HomeAssistant,
    access: ModelAccess,
    options: Mapping[str, Any],
    task: ai_task.GenDataTask,
    chat_log: conversation.ChatLog,
) -> TaskRequest:
    """The request of a task for the AI Task subentry of `options` (`access`: its entry's
    model access)."""
    return TaskRequest(
        system_prompt=chat_log.content[0].content,
        content=await task_content(hass, access.model, task),
        settings=model_settings(options, AI_TASK_DEFAULTS),
        roles=agent_roles(access, options),
        model_retries=options.get(CONF_MODEL_RETRIES, DEFAULT_MODEL_RETRIES),
        schema=json_schema(task, chat_log) if task.structure is not None else None,
        request_text=task.instructions,
        label=chat_log.conversation_id,
    )


def task_image_models(access: ModelAccess, options: Mapping[str, Any]) -> ImageModels | None:
    """The image models of the AI Task subentry of `options`; None without an image model
    (the entity then does not offer images)."""
    return image_models(
        access,
        model_section(options, CONF_IMAGE_MODEL),
        model_section(options, CONF_IMAGE_FALLBACK_MODEL),
    )


async def reference_images(
    hass: HomeAssistant, task: ai_task.GenImageTask
) -> tuple[ReferenceImage, ...]:
    """The task's attachments as images to edit; other files are refused."""
    references: list[ReferenceImage] = []
    for attachment in task.attachments or ():
        name = _image_name(attachment)
        data = await hass.async_add_executor_job(Path(attachment.path).read_bytes)
        references.append(ReferenceImage(name, data, attachment.mime_type))
    return tuple(references)


async def assemble_image_task(
    hass: HomeAssistant,
    access: ModelAccess,
    options: Mapping[str, Any],
    task: ai_task.GenImageTask,
    chat_log: conversation.ChatLog,
) -> ImageRequest:
    """The image request of a task for the AI Task subentry of `options`: a new image
    from the instructions, or with attachments, an edit of those images."""
    models = task_image_models(access, options)
    if models is None:  # the entity offers images only with an image model
        raise HomeAssistantError("This AI Task has no image model")
    return ImageRequest(
        prompt=task.instructions,
        models=models,
        references=await reference_images(hass, task),
        retries=int(options.get(CONF_MODEL_RETRIES, DEFAULT_MODEL_RETRIES)),
        timeout=float(options.get(CONF_REQUEST_TIMEOUT, AI_TASK_DEFAULTS[CONF_REQUEST_TIMEOUT])),
        label=chat_log.conversation_id,
    )


def _image_name(attachment: conversation.Attachment) -> str:
    """The file name of an attachment that is an image; any other file is refused."""
    name = Path(attachment.path).name
    if not attachment.mime_type.startswith("image/"):
        raise HomeAssistantError(
            translation_domain=DOMAIN,
            translation_key="ai_task_attachment_type",
            translation_placeholders={"name": name, "mime_type": attachment.mime_type},
        )
    return name
