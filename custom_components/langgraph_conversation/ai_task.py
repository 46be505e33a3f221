"""AI Task entity: text, or JSON data validated against a structure, on the agents' model path;
and images, when the subentry has an image model.

The task itself runs in agent/models/one_shot.py: retries before the first word, the fallback
model, activity events and errors as a conversation turn has them. This entity assembles
Home Assistant's task into that request (task_assembly.py), runs it and turns the answer
into a task result. An image task runs in agent/models/images.py by the same rules; Home
Assistant's AI Task stores the image in its media source and returns its URL.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from homeassistant.components import ai_task, conversation
from homeassistant.config_entries import ConfigSubentry
from homeassistant.core import Context, HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback
from homeassistant.helpers.httpx_client import get_async_client

from .const import CONF_ACTIVITY_CONTENTS, DOMAIN, SUBENTRY_AI_TASK
from .entity import SubentryEntity, add_subentry_entities
from .profile import offers_images
from .runtime_entry import LangGraphConfigEntry

if TYPE_CHECKING:
    from .activity import ActivityReporter

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


class LangGraphAITaskEntity(SubentryEntity, ai_task.AITaskEntity):
    """Generates data with the entry's model: text, or JSON matching a structure; and
    images with the subentry's image model."""

    def __init__(self, entry: LangGraphConfigEntry, subentry: ConfigSubentry) -> None:
        """Images only with an image model. Read once from the subentry: a changed
        subentry reloads the entry, and the entity is created anew."""
        super().__init__(entry, subentry)
        features = (
            ai_task.AITaskEntityFeature.GENERATE_DATA
            | ai_task.AITaskEntityFeature.SUPPORT_ATTACHMENTS
        )
        if offers_images(entry.runtime_data.access, subentry.data):
            features |= ai_task.AITaskEntityFeature.GENERATE_IMAGE
        self._attr_supported_features = features

    async def _async_generate_data(
        self,
        task: ai_task.GenDataTask,
        chat_log: conversation.ChatLog,
    ) -> ai_task.GenDataTaskResult:
        """Run the task: one model call, plus one retry when structured data is invalid."""
        # A task before the entry's stack is built waits for it (stack.py).
        runtime = await self.entry.runtime_data.async_runtime()
        # Loaded with the stack: these imports only look them up.
        from .agent.models import InvalidAnswer, run_task
        from .task_assembly import assemble_task, structure_check

        options = self.subentry.data
        request = await assemble_task(self.hass, runtime.access, options, task, chat_log)
        reporter = self._reporter(chat_log)
        with self._failure_told():
            try:
                data = await run_task(
                    runtime.access,
                    runtime.models,
                    request,
                    hooks=(*runtime.hooks, reporter),
                    check=structure_check(task.structure),
                    on_answer=lambda text: self._record(chat_log, text),
                )
            except InvalidAnswer as err:
                _LOGGER.warning("%s: no valid data for task %s: %s", self.entity_id, task.name, err)
                raise HomeAssistantError(
                    translation_domain=DOMAIN,
                    translation_key="ai_task_invalid_structure",
                    translation_placeholders={"error": str(err)},
                ) from None
        return ai_task.GenDataTaskResult(conversation_id=chat_log.conversation_id, data=data)

    async def _async_generate_image(
        self,
        task: ai_task.GenImageTask,
        chat_log: conversation.ChatLog,
    ) -> ai_task.GenImageTaskResult:
        """Make the image with the image model (its retries, then its fallback)."""
        runtime = await self.entry.runtime_data.async_runtime()
        # Loaded with the stack: these imports only look them up.
        from .agent.models import generate_image
        from .task_assembly import assemble_image_task

        request = await assemble_image_task(
            self.hass, runtime.access, self.subentry.data, task, chat_log
        )
        with self._failure_told():
            image = await generate_image(
                request,
                http_client=get_async_client(self.hass),
                hooks=(*runtime.hooks, self._reporter(chat_log)),
            )
        if image.revised_prompt:
            self._record(chat_log, image.revised_prompt)
        return ai_task.GenImageTaskResult(
            image_data=image.data,
            conversation_id=chat_log.conversation_id,
            mime_type=image.mime_type,
            width=image.width,
            height=image.height,
            model=image.model,
            revised_prompt=image.revised_prompt,
        )

    def _reporter(self, chat_log: conversation.ChatLog) -> ActivityReporter:
        """The activity reporter of one task, as a turn's."""
        from .activity import ActivityReporter  # loaded with the stack

        return ActivityReporter(
            self.hass,
            chat_log,
            agent_id=self.entity_id,
            # Home Assistant 2026.10+ passes the caller's context to the entity (2026.2
            # does not: the events then get one of their own).
            context=self._context or Context(),
            device_id=None,
            include_contents=self.subentry.data.get(CONF_ACTIVITY_CONTENTS, False),
        )

    def _record(self, chat_log: conversation.ChatLog, text: str) -> None:
        """The answer goes into the chat log, where the debug view shows it."""
        chat_log.async_add_assistant_content_without_tools(
            conversation.AssistantContent(agent_id=self.entity_id, content=text)
        )
