"""The conversation entity: provide Home Assistant's LLM data, run the agent's turn into the
ChatLog, return Home Assistant's result.

The turn is assembled in turn_assembly.py; the loop that runs it into the ChatLog is
entity.py's, shared with the AI Task entity.
"""

from __future__ import annotations

from dataclasses import replace
import logging
from typing import Literal

from homeassistant.components import conversation
from homeassistant.config_entries import ConfigSubentry
from homeassistant.const import MATCH_ALL
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers.entity import Entity
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from .const import DOMAIN, SUBENTRY_CONVERSATION
from .entity import SubentryEntity, add_subentry_entities
from .profile import AgentProfile, agent_profile
from .runtime_entry import LangGraphConfigEntry
from .spoken import async_phrasebook
from .window_issue import clear_window_issue

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
        stack = self.entry.runtime_data
        if (
            self.subentry.subentry_id not in self.entry.subentries
            and knowledge is not None
            and stack.built
        ):
            await stack.runtime.forget_knowledge(knowledge)

    @property
    def supported_languages(self) -> list[str] | Literal["*"]:
        """Any language the model speaks."""
        return MATCH_ALL

    async def async_added_to_hass(self) -> None:
        """Set up again (new options, a restart): an earlier window issue may be solved."""
        await super().async_added_to_hass()
        clear_window_issue(self.hass, self.subentry.subentry_id)

    async def _async_handle_message(
        self,
        user_input: conversation.ConversationInput,
        chat_log: conversation.ChatLog,
    ) -> conversation.ConversationResult:
        """Run one turn of the agent and stream it into the ChatLog."""
        # A turn before the entry's stack is built waits for it: the imports and LiteLLM's
        # first-call warm-up stay in the executor, and run once (stack.py).
        runtime = await self.entry.runtime_data.async_runtime()
        # Loaded with the stack: these imports only look them up.
        from .tools.effects import EffectGate
        from .tools.ha_llm_api import registered_apis
        from .tools.web_search import with_sources
        from .turn_assembly import assemble_turn, clean_request, web_search_access

        # The turn's tools act under a Context of their own (the person's user id, so the
        # logbook still says who): the effect gate holds exactly this turn's effects.
        turn_context = Context(user_id=user_input.context.user_id, parent_id=user_input.context.id)
        try:
            # The chatbot and rag kinds bind no tools: Home Assistant renders their
            # instructions without an API (so also without the API's entity listing).
            await chat_log.async_provide_llm_data(
                replace(user_input.as_llm_context(DOMAIN), context=turn_context),
                registered_apis(self.hass, self.profile.llm_hass_apis),
                self.profile.instructions,
                user_input.extra_system_prompt,
            )
        except conversation.ConverseError as err:
            return err.as_conversation_result()
        # Our own sentences (the question, a failure, a notice) in the request's language.
        phrasebook = await async_phrasebook(
            self.hass, user_input.language, self.profile.confirm_entities
        )
        request, notice = clean_request(user_input.text, phrasebook)
        effects = EffectGate.of(self.hass).open_scope(
            turn_context, self.profile.confirm_entities, phrasebook
        )
        try:
            # Web search (#27): the turn's searches, and their sources under a text answer.
            web = await web_search_access(runtime, self.profile, user_input)
            turn = await assemble_turn(
                self.hass,
                runtime,
                self.profile,
                self.entity_id,
                user_input,
                chat_log,
                request,
                effects,
                web,
            )
            events = runtime.run_turn(self.profile.agent, turn)
            if web is not None:
                events = with_sources(
                    events,
                    web,
                    lambda links: phrasebook.sentence("web_sources", {"sources": links}),
                )
            await self._stream_into(chat_log, events, phrasebook, notice)
        finally:
            # Whatever this turn's tools started and still calls now is refused.
            effects.close()
        return with_notice(
            conversation.async_get_result_from_chat_log(user_input, chat_log), notice
        )
