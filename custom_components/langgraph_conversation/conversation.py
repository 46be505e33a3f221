"""The conversation entity: Home Assistant's ChatLog ⇄ the agent runtime (a thin adapter)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace
import logging
import re
from typing import Any, Literal

from homeassistant.components import conversation
from homeassistant.config_entries import ConfigSubentry
from homeassistant.const import MATCH_ALL
from homeassistant.core import Context, HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import area_registry as ar, device_registry as dr, llm
from homeassistant.helpers.entity import Entity
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback
from homeassistant.helpers.translation import async_get_exception_message
from homeassistant.util import dt as dt_util

from . import LangGraphConfigEntry
from .activity import ActivityReporter
from .agent.errors import TurnError
from .agent.events import (
    AgentEvent,
    ConfirmationRequested,
    MessageStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallsRequested,
)
from .agent.graph import speaker_layer
from .agent.guard import Requester, clean_text
from .agent.runtime import Turn
from .const import DOMAIN, MAX_REQUEST_CHARS, SUBENTRY_CONVERSATION
from .entity import SubentryEntity, add_subentry_entities
from .parties import thread_request
from .profile import AgentProfile, agent_profile
from .tools import TOOLS
from .tools.assist_wording import shorter_prompt
from .tools.context import compact_system_prompt, entity_listing, split_clock
from .tools.effects import EffectGate, EffectScope
from .tools.fits import LISTING_COVERS, exposed_domains, offered_intents
from .tools.ha_llm_api import tools_from_llm_api
from .tools.listing import dense_system_prompt
from .tools.names import flagged_entity_names, flagged_speaker_names, names_notice
from .tools.people import person_of_user
from .tools.registry import ToolContext, as_langchain_tools
from .window_issue import WindowIssueReporter, clear_window_issue

_LOGGER = logging.getLogger(__name__)

# The entity only awaits the runtime; Home Assistant may call it concurrently.
PARALLEL_UPDATES = 0


async def async_setup_entry(
    hass: HomeAssistant,
    entry: LangGraphConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """One conversation entity per agent subentry, with the agent's profile."""
    access = entry.runtime_data.access

    def entity(entry: LangGraphConfigEntry, subentry: ConfigSubentry) -> Entity:
        return LangGraphConversationEntity(entry, subentry, agent_profile(hass, subentry, access))

    add_subentry_entities(entry, SUBENTRY_CONVERSATION, entity, async_add_entities)


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


def earlier_content(chat_log: conversation.ChatLog, agent_id: str) -> tuple[tuple[str, str], ...]:
    """What the ChatLog gained since this agent last spoke, before the current request.

    Another agent may have handled some requests of the same conversation (Home
    Assistant's local command handling, for instance) or an automation may have made an
    announcement. Those turns are not in our thread; they are folded in as plain text.
    """
    content = chat_log.content
    # Index 0 is the system prompt and the last element the current request. Without
    # a contribution of ours yet, everything in between is someone else's.
    start = 1
    for index in range(len(content) - 2, 0, -1):
        if getattr(content[index], "agent_id", None) == agent_id:
            start = index + 1
            break
    folded: list[tuple[str, str]] = []
    pending_request: str | None = None
    for item in content[start:-1]:
        if isinstance(item, conversation.UserContent):
            # A request nobody answered (one of our failed turns) stays out, as it
            # was removed from our thread on purpose.
            pending_request = clean_text(item.content)
        elif isinstance(item, conversation.AssistantContent) and item.content:
            if pending_request is not None:
                folded.append(("user", pending_request))
                pending_request = None
            folded.append(("assistant", clean_text(item.content)))
    return tuple(folded)


def speaker(hass: HomeAssistant, device_id: str | None) -> str:
    """The prompt layer saying which device, in which area, the person speaks through."""
    device = dr.async_get(hass).async_get(device_id) if device_id else None
    if device is None:
        return ""
    area = ar.async_get(hass).async_get_area(device.area_id) if device.area_id else None
    return speaker_layer(device.name_by_user or device.name, area.name if area else None)


def confirmation_question(actions: tuple[str, ...]) -> str:
    """The question that asks the user to confirm critical actions, in HA's language."""
    return async_get_exception_message(
        DOMAIN, "confirm_actions", {"actions": " and ".join(actions)}
    )


# C0 control characters other than tab and newline, and DEL: noise for every model.
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_request(text: str) -> tuple[str, str | None]:
    """The request as the model gets it, and a notice for the user if it was cut.

    Invalid Unicode (lone surrogates) is replaced: the model's HTTP client cannot send it.
    """
    text = _CONTROL_CHARACTERS.sub("", clean_text(text))
    if len(text) <= MAX_REQUEST_CHARS:
        return text, None
    notice = async_get_exception_message(
        DOMAIN, "request_truncated", {"limit": f"{MAX_REQUEST_CHARS:,}"}
    )
    # Home Assistant drops an exception message's final full stop; this one is spoken.
    return text[:MAX_REQUEST_CHARS], f"{notice.rstrip('.')}."


def with_notice(
    result: conversation.ConversationResult, notice: str | None
) -> conversation.ConversationResult:
    """The final answer opens with our notice, whatever the model did in between.

    The notice is streamed with the turn's first message; when the model called a tool
    first, the final answer is a later message, and Home Assistant's result (intent-end,
    the API response, non-streaming speech) holds only that one.
    """
    speech = result.response.speech.get("plain", {}).get("speech", "")
    if notice and not speech.startswith(notice):
        result.response.async_set_speech(f"{notice} {speech}".strip())
    return result


async def chat_log_deltas(
    events: AsyncIterator[AgentEvent], notice: str | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Translate agent events into ChatLog deltas, as they happen.

    A `notice` (the request was cut) opens the first assistant message.
    """
    async for event in events:
        match event:
            case ConfirmationRequested(actions=actions):
                yield {"content": confirmation_question(actions)}
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


class LangGraphConversationEntity(SubentryEntity, conversation.ConversationEntity):
    """A conversation agent backed by a LangGraph graph."""

    _attr_supports_streaming = True

    def __init__(
        self, entry: LangGraphConfigEntry, subentry: ConfigSubentry, profile: AgentProfile
    ) -> None:
        """Bind the entity to its agent subentry, read once into `profile`."""
        super().__init__(entry, subentry)
        self.profile = profile
        if profile.controls_home:
            self._attr_supported_features = conversation.ConversationEntityFeature.CONTROL

    async def async_will_remove_from_hass(self) -> None:
        """A deleted agent takes its documents' index along (its folder stays)."""
        await super().async_will_remove_from_hass()
        knowledge = self.profile.agent.knowledge
        if self.subentry.subentry_id not in self.entry.subentries and knowledge is not None:
            await self.entry.runtime_data.forget_knowledge(knowledge)

    @property
    def supported_languages(self) -> list[str] | Literal["*"]:
        """Any language the model speaks."""
        return MATCH_ALL

    async def async_added_to_hass(self) -> None:
        """Set up again (new options, a restart): an earlier window issue may be solved."""
        await super().async_added_to_hass()
        clear_window_issue(self.hass, self.subentry.subentry_id)

    def _system_prompt(self, chat_log: conversation.ChatLog) -> str:
        """Home Assistant's rendered prompt, with the compact home context if chosen, else
        with its entity listing grouped by area (same facts, fewer tokens); its
        live-context guidance in shorter words either way."""
        prompt = shorter_prompt(chat_log.content[0].content)
        if self.profile.compact_context:
            return compact_system_prompt(self.hass, prompt, conversation.DOMAIN)
        return dense_system_prompt(prompt)

    def _compact_instructions(self, instructions: str) -> Callable[[], str] | None:
        """The instructions with the compact home context, for a request too long for
        the model's window (made only then); None when they are compact already."""
        if not self.profile.uses_tools or self.profile.compact_context:
            return None

        def compact() -> str:
            return compact_system_prompt(self.hass, instructions, conversation.DOMAIN)

        return compact

    async def _async_handle_message(
        self,
        user_input: conversation.ConversationInput,
        chat_log: conversation.ChatLog,
    ) -> conversation.ConversationResult:
        """Run one turn of the agent and stream it into the ChatLog."""
        # The turn's tools act under a Context of their own (the person's user id, so the
        # logbook still says who): the effect gate holds exactly this turn's effects.
        turn_context = Context(user_id=user_input.context.user_id, parent_id=user_input.context.id)
        try:
            # The chatbot and rag kinds bind no tools: Home Assistant renders their
            # instructions without an API (so also without the API's entity listing).
            await chat_log.async_provide_llm_data(
                replace(user_input.as_llm_context(DOMAIN), context=turn_context),
                list(self.profile.llm_hass_apis),
                self.profile.instructions,
                user_input.extra_system_prompt,
            )
        except conversation.ConverseError as err:
            return err.as_conversation_result()
        request, notice = clean_request(user_input.text)
        if not request.strip():
            # Nothing to answer (empty, blank or only control characters): a model would
            # guess at it, and some providers reject an empty message outright.
            raise HomeAssistantError(
                translation_domain=DOMAIN, translation_key="turn_empty_request"
            )
        effects = EffectGate.of(self.hass).open_scope(turn_context, self.profile.confirm_entities)
        try:
            turn = await self._turn(user_input, chat_log, turn_context, request, effects)
            await self._stream(turn, chat_log, notice)
        finally:
            # Whatever this turn's tools started and still calls now is refused.
            effects.close()
        return with_notice(
            conversation.async_get_result_from_chat_log(user_input, chat_log), notice
        )

    async def _turn(
        self,
        user_input: conversation.ConversationInput,
        chat_log: conversation.ChatLog,
        turn_context: Context,
        request: str,
        effects: EffectScope,
    ) -> Turn:
        """What this message brings to the agent's turn (the agent is `self.profile`)."""
        hass = self.hass
        now = dt_util.utcnow().timestamp()
        # Names reach the model through Home Assistant's prompt and the speaker layer.
        names = flagged_entity_names(hass, conversation.DOMAIN) if self.profile.uses_tools else []
        system_prompt, clock = split_clock(self._system_prompt(chat_log))
        if notice_of_names := names_notice(names):
            system_prompt = f"{system_prompt}\n\n{notice_of_names}"
        # The thread of this conversation and this party (agent/threads.py).
        thread = await self.entry.runtime_data.choose_thread(
            thread_request(self.profile, user_input, chat_log), now
        )
        # The agent's own tools may be left out of a request too long for the model's
        # window; Home Assistant's Assist API tools stay (agent/window.py).
        own_tools = as_langchain_tools(
            TOOLS.fitting(
                self.profile.tool_categories,
                exposed_domains(hass, conversation.DOMAIN),
                offered_intents(chat_log.llm_api),
            ),
            ToolContext(
                hass=hass,
                context=turn_context,
                language=user_input.language,
                device_id=user_input.device_id,
                assistant=conversation.DOMAIN,
            ),
        )
        # Entity search is offered when the prompt lists no entities (compact context, no
        # API), else only if the window's trimming replaces the listing (agent/window.py).
        listed = bool(entity_listing(system_prompt))
        searching = [t for t in own_tools if listed and t.name in LISTING_COVERS]
        own_tools = [t for t in own_tools if t not in searching]
        # A satellite without a device in the registry still is someone speaking.
        satellite = user_input.device_id or getattr(user_input, "satellite_id", None)
        return Turn(
            thread_id=thread.thread_id,
            text=request,
            system_prompt=system_prompt,
            tools=[*tools_from_llm_api(hass, chat_log.llm_api), *own_tools],
            optional_tools=frozenset(tool.name for tool in own_tools),
            compact_instructions=self._compact_instructions(system_prompt),
            compact_tools=tuple(searching),
            # What others said in a conversation id another party used too is theirs.
            earlier=() if thread.shared else earlier_content(chat_log, self.entity_id),
            hooks=(
                ActivityReporter(
                    hass,
                    chat_log,
                    agent_id=self.entity_id,
                    context=user_input.context,
                    device_id=user_input.device_id,
                    include_contents=self.profile.activity_contents,
                ),
                WindowIssueReporter(hass, self.profile.agent_id, self.profile.name),
            ),
            voice=bool(satellite),
            speaker=speaker(hass, user_input.device_id),
            clock=clock,
            effects=effects,
            requester=Requester(
                user_id=user_input.context.user_id,
                device_id=satellite,
                conversation_id=chat_log.conversation_id,
            ),
            person_id=person_of_user(hass, user_input.context.user_id),
            now=now,
            flagged=(
                *flagged_speaker_names(hass, user_input.device_id),
                *(entry for entry, _name in names),
            ),
        )

    async def _stream(self, turn: Turn, chat_log: conversation.ChatLog, notice: str | None) -> None:
        """Run the turn into the ChatLog; a failed turn becomes a translated error."""
        runtime = self.entry.runtime_data
        try:
            async for _content in chat_log.async_add_delta_content_stream(
                self.entity_id, chat_log_deltas(runtime.run_turn(self.profile.agent, turn), notice)
            ):
                pass
        except TurnError as err:
            raise self._model_failure(err) from None
