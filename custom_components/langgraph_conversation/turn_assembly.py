"""One conversation turn assembled: Home Assistant's message and ChatLog → the agent's Turn.

The conversation entity provides Home Assistant's LLM data, runs the turn and returns the
result; what the turn is made of is gathered here, in one place: the request as the model
gets it, the thread (parties.py), the system prompt (Home Assistant's, reworded, its entity
listing dense or compact, its clock moved out, flagged names named again), the tools
(tools/selection.py), what others said in the conversation meanwhile, who asks and from
where, and for an agent that may look through cameras, the model that looks (nothing of it
is done for an agent that may not); for one that may search the web, the model that
searches (web_search_access); for an agent that makes automations, what the asker may do
with them. Whatever is read from the home is read by tools/.
"""

from __future__ import annotations

from collections.abc import Callable
import logging
import re

from homeassistant.components import conversation
from homeassistant.core import HomeAssistant
from homeassistant.util import dt as dt_util

from .activity import ActivityReporter
from .agent.events import TextFlagged
from .agent.guard import Requester, clean_text
from .agent.models import look_at_image, looking_model, search_web, searching_model
from .agent.runtime import AgentRuntime, Turn
from .const import MAX_REQUEST_CHARS
from .parties import thread_request
from .profile import AgentProfile
from .spoken import Phrasebook, language_line
from .tools.assist_wording import shorter_prompt
from .tools.automations import automation_access
from .tools.context import compact_system_prompt, split_clock
from .tools.effects import EffectScope
from .tools.listing import dense_system_prompt
from .tools.names import flagged_entity_names, flagged_speaker_names, names_notice, speaker
from .tools.people import person_of_user
from .tools.registry import AutomationAccess, CameraAccess, ToolContext, WebSearchAccess
from .tools.selection import choose_tools
from .window_issue import WindowIssueReporter

_LOGGER = logging.getLogger(__name__)

# C0 control characters other than tab and newline, and DEL: noise for every model.
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_request(text: str, phrasebook: Phrasebook) -> tuple[str, str | None]:
    """The request as the model gets it, and a notice for the user (in the phrasebook's
    language) if it was cut.

    Invalid Unicode (lone surrogates) is replaced: the model's HTTP client cannot send it.
    Nothing to answer (empty, blank or only control characters) is refused: a model would
    guess at it, and some providers reject an empty message outright.
    """
    text = _CONTROL_CHARACTERS.sub("", clean_text(text))
    notice = None
    if len(text) > MAX_REQUEST_CHARS:
        text = text[:MAX_REQUEST_CHARS]
        limit = phrasebook.number(MAX_REQUEST_CHARS)
        notice = phrasebook.sentence("request_truncated", {"limit": limit})
    if not text.strip():
        raise phrasebook.error("turn_empty_request")
    return text, notice


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


def system_prompt(
    hass: HomeAssistant,
    profile: AgentProfile,
    chat_log: conversation.ChatLog,
    language: str | None = None,
) -> tuple[str, str, list[tuple[TextFlagged, str]]]:
    """Home Assistant's rendered prompt as the model gets it, its clock line, and the
    flagged names the prompt names again.

    The prompt has the compact home context if the agent chose it, else its entity listing
    grouped by area (same facts, fewer tokens); its live-context guidance in shorter words
    either way. Names reach the model through Home Assistant's prompt (and the speaker
    layer), so a flagged one is named again, quoted and marked, after it. A request in
    another language than English asks for answers in it (spoken.language_line).
    """
    names = flagged_entity_names(hass, conversation.DOMAIN) if profile.uses_tools else []
    prompt = shorter_prompt(chat_log.content[0].content)
    if profile.compact_context:
        prompt = compact_system_prompt(hass, prompt, conversation.DOMAIN)
    else:
        prompt = dense_system_prompt(prompt)
    prompt, clock = split_clock(prompt)
    if line := language_line(language):
        prompt = f"{prompt}\n{line}"
    if notice_of_names := names_notice(names):
        prompt = f"{prompt}\n\n{notice_of_names}"
    return prompt, clock, names


def compact_instructions(
    hass: HomeAssistant, profile: AgentProfile, instructions: str
) -> Callable[[], str] | None:
    """The instructions with the compact home context, for a request too long for the
    model's window (made only then); None when they are compact already."""
    if not profile.uses_tools or profile.compact_context:
        return None

    def compact() -> str:
        return compact_system_prompt(hass, instructions, conversation.DOMAIN)

    return compact


async def camera_access(
    runtime: AgentRuntime,
    profile: AgentProfile,
    reporter: ActivityReporter,
    person_id: str | None,
) -> CameraAccess | None:
    """How this turn's camera tool looks: the agent's model that sees images, answering as
    a task does (retries, fallback, error kinds); None when no model of the agent sees.

    Each camera looked at is reported (which one, for whom); the image goes only into the
    looking model's request.
    """
    looker = await looking_model(runtime.access, profile.agent.roles)
    if looker is None:
        return None
    agent = profile.agent

    async def look(image: bytes, content_type: str, question: str) -> str:
        return await look_at_image(
            looker,
            runtime.models,
            image=image,
            content_type=content_type,
            question=question,
            settings=agent.settings,
            retries=agent.model_retries,
        )

    def viewed(entity_id: str) -> None:
        reporter.on_camera_viewed(entity_id, person_id)

    return CameraAccess(look=look, viewed=viewed)


def satellite_of(user_input: conversation.ConversationInput) -> str | None:
    """The satellite a message was spoken at (a satellite without a device in the registry
    still is someone speaking); None for a typed one."""
    return user_input.device_id or getattr(user_input, "satellite_id", None)


async def web_search_access(
    runtime: AgentRuntime, profile: AgentProfile, user_input: conversation.ConversationInput
) -> WebSearchAccess | None:
    """How this turn's web search tool searches: the agent's model that searches, in a
    request of its own (agent/models/web_search.py); None when the agent may not search
    the web (nothing is looked up then) or no model of it searches."""
    if not profile.search_the_web:
        return None
    searcher = await searching_model(runtime.access, profile.agent.roles)
    if searcher is None:
        return None
    agent = profile.agent

    async def search(query: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        answer = await search_web(
            searcher,
            query,
            timeout=agent.settings.request_timeout,
            retries=agent.model_retries,
        )
        return answer.text, tuple((source.title, source.url) for source in answer.sources)

    return WebSearchAccess(search=search, voice=bool(satellite_of(user_input)))


async def automations_of(
    hass: HomeAssistant, profile: AgentProfile, user_id: str | None
) -> AutomationAccess | None:
    """What this turn's asker may do with automations; None (no tool, nothing looked up)
    for an agent that makes none."""
    if not profile.create_automations:
        return None
    return await automation_access(
        hass,
        user_id,
        critical_allowed=profile.automations_critical,
        marked=frozenset(profile.confirm_entities),
    )


async def assemble_turn(
    hass: HomeAssistant,
    runtime: AgentRuntime,
    profile: AgentProfile,
    agent_entity_id: str,
    user_input: conversation.ConversationInput,
    chat_log: conversation.ChatLog,
    request: str,
    effects: EffectScope,
    web_search: WebSearchAccess | None = None,
) -> Turn:
    """What this message brings to a turn of the agent of `profile` (its entity is
    `agent_entity_id`); the turn's tools act under the effect scope's Context, and search
    the web through `web_search` (web_search_access) when the agent may."""
    now = dt_util.utcnow().timestamp()
    prompt, clock, names = system_prompt(hass, profile, chat_log, user_input.language)
    # The thread of this conversation and this party (agent/memory/threads.py).
    thread = await runtime.choose_thread(thread_request(profile, user_input, chat_log), now)
    activity = ActivityReporter(
        hass,
        chat_log,
        agent_id=agent_entity_id,
        context=user_input.context,
        device_id=user_input.device_id,
        include_contents=profile.activity_contents,
    )
    person_id = person_of_user(hass, user_input.context.user_id)
    tools = choose_tools(
        ToolContext(
            hass=hass,
            context=effects.context,
            language=user_input.language,
            device_id=user_input.device_id,
            assistant=conversation.DOMAIN,
            cameras=(
                await camera_access(runtime, profile, activity, person_id)
                if profile.look_through_cameras
                else None
            ),
            web_search=web_search,
            automations=await automations_of(hass, profile, user_input.context.user_id),
        ),
        chat_log.llm_api,
        profile.tool_categories,
        prompt,
        cameras=profile.look_through_cameras,
        web_search=profile.search_the_web,
    )
    _LOGGER.debug("%s: tools left out: %s", profile.name, dict(tools.left_out))
    satellite = satellite_of(user_input)
    return Turn(
        thread_id=thread.thread_id,
        text=request,
        system_prompt=prompt,
        tools=tools.tools,
        # Our own tools may be left out of a request too long for the model's window, and
        # entity search offered then (Home Assistant's API tools stay; agent/graph/window.py).
        optional_tools=tools.optional,
        compact_instructions=compact_instructions(hass, profile, prompt),
        compact_tools=tools.if_listing_dropped,
        # What others said in a conversation id another party used too is theirs.
        earlier=() if thread.shared else earlier_content(chat_log, agent_entity_id),
        hooks=(activity, WindowIssueReporter(hass, profile.agent_id, profile.name)),
        voice=bool(satellite),
        speaker=speaker(hass, user_input.device_id),
        clock=clock,
        effects=effects,
        requester=Requester(
            user_id=user_input.context.user_id,
            device_id=satellite,
            conversation_id=chat_log.conversation_id,
        ),
        person_id=person_id,
        now=now,
        flagged=(
            *flagged_speaker_names(hass, user_input.device_id),
            *(entry for entry, _name in names),
        ),
    )
