"""What every entity of ours shares: one entity and one service device per subentry, and the
one loop that runs an agent's turn into Home Assistant's ChatLog (events → ChatLog deltas,
a failed turn or task → the sentence the user reads)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
import logging
from typing import Any

from homeassistant.components import conversation
from homeassistant.config_entries import ConfigSubentry
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import device_registry as dr, llm
from homeassistant.helpers.entity import Entity
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from .agent.errors import ModelErrorKind, TurnError
from .agent.events import (
    AgentEvent,
    ConfirmationRequested,
    MessageStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallsRequested,
)
from .const import CONF_MODEL, DOMAIN
from .runtime_entry import LangGraphConfigEntry
from .spoken import Phrasebook

_LOGGER = logging.getLogger(__name__)


def tool_result_delta(done: ToolCallFinished) -> dict[str, Any]:
    """A ChatLog tool-result delta on every Home Assistant version.

    2026.10+ reads a typed `llm.ToolResult` under "result" (and reports the plain
    "tool_result" key as deprecated); 2026.2 knows only "tool_result".
    """
    data = done.result if isinstance(done.result, dict) else {"result": done.result}
    delta: dict[str, Any] = {
        "role": "tool_result",
        "tool_call_id": done.call.id,
        "tool_name": done.call.name,
    }
    if hasattr(llm, "ToolResult"):
        delta["result"] = llm.ToolResult(data=data, error=done.is_error)
    else:
        delta["tool_result"] = data
    return delta


async def chat_log_deltas(
    events: AsyncIterator[AgentEvent], phrasebook: Phrasebook, notice: str | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Translate agent events into ChatLog deltas, as they happen.

    A `notice` (the request was cut) opens the first assistant message; the confirmation
    question is asked in the phrasebook's language.
    """
    async for event in events:
        match event:
            case ConfirmationRequested(actions=actions):
                yield {"content": phrasebook.question(actions)}
            case MessageStarted():
                yield {"role": "assistant"}
                if notice:
                    yield {"content": f"{notice} "}
                    notice = None
            case TextDelta(text=text):
                yield {"content": text}
            case ToolCallsRequested(calls=calls):
                # External: LangGraph already runs these; the ChatLog only records them.
                yield {
                    "tool_calls": [
                        llm.ToolInput(
                            tool_name=call.name, tool_args=call.args, id=call.id, external=True
                        )
                        for call in calls
                    ]
                }
            case ToolCallFinished():
                yield tool_result_delta(event)


def add_subentry_entities(
    entry: LangGraphConfigEntry,
    subentry_type: str,
    factory: Callable[[LangGraphConfigEntry, ConfigSubentry], Entity],
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """One entity per subentry of `subentry_type`, attached to that subentry."""
    for subentry in entry.subentries.values():
        if subentry.subentry_type == subentry_type:
            async_add_entities([factory(entry, subentry)], config_subentry_id=subentry.subentry_id)


class SubentryEntity:
    """Mixin: named after its device, which stands for the subentry (agent, AI Task)."""

    _attr_has_entity_name = True
    _attr_name = None
    # Set by Home Assistant's Entity, which every subclass also is.
    hass: HomeAssistant
    entity_id: str

    def __init__(self, entry: LangGraphConfigEntry, subentry: ConfigSubentry) -> None:
        """Bind the entity to its subentry."""
        self.entry = entry
        self.subentry = subentry
        self._attr_unique_id = subentry.subentry_id
        self._attr_device_info = dr.DeviceInfo(
            identifiers={(DOMAIN, subentry.subentry_id)},
            name=subentry.title,
            manufacturer="LangGraph Conversation",
            model=entry.data.get(CONF_MODEL),
            entry_type=dr.DeviceEntryType.SERVICE,
        )

    async def _stream_into(
        self,
        chat_log: conversation.ChatLog,
        events: AsyncIterator[AgentEvent],
        phrasebook: Phrasebook,
        notice: str | None = None,
    ) -> None:
        """Write a turn's events into the ChatLog as they happen (`notice` opens the first
        answer); a failed turn becomes the sentence the user hears, in the phrasebook's
        language."""
        with self._failure_told(phrasebook):
            async for _content in chat_log.async_add_delta_content_stream(
                self.entity_id, chat_log_deltas(events, phrasebook, notice)
            ):
                pass

    @contextmanager
    def _failure_told(self, phrasebook: Phrasebook | None = None) -> Iterator[None]:
        """A turn or task that fails inside fails as the sentence the user reads: in the
        phrasebook's language, or (a task, which nobody hears) Home Assistant's."""
        try:
            yield
        except TurnError as err:
            raise self._model_failure(err, phrasebook) from None

    def _model_failure(self, err: TurnError, phrasebook: Phrasebook | None) -> HomeAssistantError:
        """A failed turn or task as the sentence the user reads, logged once.

        A refused key also starts re-authentication, so the user can give a new one.
        """
        _LOGGER.warning("%s could not answer (%s): %s", self.entity_id, err.kind, err.detail)
        if err.kind == ModelErrorKind.AUTH:
            self.entry.async_start_reauth(self.hass)
        if phrasebook is not None:
            return phrasebook.error(f"turn_{err.kind}")
        return HomeAssistantError(translation_domain=DOMAIN, translation_key=f"turn_{err.kind}")
