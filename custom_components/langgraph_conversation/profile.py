"""An agent's profile: its subentry's options read once, every default in one place.

The conversation entity gets its profile when it is created. A changed subentry reloads
the whole entry (the entry's update listener in __init__.py), which creates the entity,
and with it the profile, again; so a profile never goes stale.

`AGENT_DEFAULTS` is what an option missing from a subentry means (`agent_defaults`: on
Ollama's native API, temperature and answer length are the model's own). The profile reads
nothing else, and the agent form (config_flow.py) takes its defaults from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from homeassistant.config_entries import ConfigSubentry
from homeassistant.core import HomeAssistant
from homeassistant.helpers import llm
from homeassistant.util import slugify

from .agent.graph import AgentKind
from .agent.knowledge import KnowledgeSource
from .agent.models import ModelAccess, ModelSettings, RoleAccesses, provider_of, role_access
from .agent.runtime import AgentSettings
from .const import (
    CONF_ACTIVITY_CONTENTS,
    CONF_AGENT_KIND,
    CONF_API_BASE,
    CONF_API_KEY,
    CONF_AUTOMATIONS,
    CONF_AUTOMATIONS_CRITICAL,
    CONF_BASE_PROMPT,
    CONF_CAMERAS,
    CONF_COMPACT_CONTEXT,
    CONF_CONFIRM_ENTITIES,
    CONF_CONTEXT_WINDOW,
    CONF_CONTINUE_MINUTES,
    CONF_CONTINUE_TEXT,
    CONF_FALLBACK_MODEL,
    CONF_FAST_MODEL,
    CONF_HISTORY_BUDGET,
    CONF_IMAGE_MODEL,
    CONF_KEEP_ALIVE,
    CONF_LEARN_MEMORIES,
    CONF_LLM_HASS_API,
    CONF_MAX_TOKENS,
    CONF_MAX_TOOL_ROUNDS,
    CONF_MEMORY,
    CONF_MODEL,
    CONF_MODEL_RETRIES,
    CONF_PROMPT,
    CONF_REQUEST_TIMEOUT,
    CONF_SAFETY_CHECK,
    CONF_SEARCH_KNOWLEDGE,
    CONF_TEMPERATURE,
    CONF_THINK,
    CONF_TOOL_CATEGORIES,
    CONF_VISION_MODEL,
    CONF_WEB_SEARCH,
    CONF_WEB_SEARCH_MODEL,
    DEFAULT_AGENT_KIND,
    DEFAULT_AI_TASK_TEMPERATURE,
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_CONTINUE_MINUTES,
    DEFAULT_CONTINUE_TEXT,
    DEFAULT_HISTORY_BUDGET,
    DEFAULT_KEEP_ALIVE,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MAX_TOOL_ROUNDS,
    DEFAULT_MODEL_RETRIES,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_TEMPERATURE,
    DEFAULT_THINK,
    DEFAULT_TOOL_CATEGORIES,
    DOMAIN,
    KNOWLEDGE_DIR,
    MEMORY_RECALL_LIMIT,
    THINK_DEFAULT,
    THINK_OFF,
    THINK_ON,
)

# What each agent option means when the subentry does not have it. A list the user
# emptied in the form is dropped from the stored options, so a missing list means "none
# chosen" (no Home Assistant API, none of our tool categories), never "all".
AGENT_DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType(
    {
        # Home Assistant puts its own instructions in place of an empty prompt too.
        CONF_PROMPT: llm.DEFAULT_INSTRUCTIONS_PROMPT,
        CONF_AGENT_KIND: DEFAULT_AGENT_KIND,
        # None: the kind's own base prompt.
        CONF_BASE_PROMPT: None,
        CONF_SEARCH_KNOWLEDGE: False,
        CONF_LLM_HASS_API: (),
        CONF_TOOL_CATEGORIES: (),
        CONF_CONFIRM_ENTITIES: (),
        CONF_SAFETY_CHECK: False,
        CONF_COMPACT_CONTEXT: False,
        CONF_MEMORY: True,
        CONF_LEARN_MEMORIES: False,
        CONF_CONTINUE_MINUTES: DEFAULT_CONTINUE_MINUTES,
        CONF_CONTINUE_TEXT: DEFAULT_CONTINUE_TEXT,
        CONF_HISTORY_BUDGET: DEFAULT_HISTORY_BUDGET,
        CONF_TEMPERATURE: DEFAULT_TEMPERATURE,
        CONF_MAX_TOKENS: DEFAULT_MAX_TOKENS,
        CONF_MAX_TOOL_ROUNDS: DEFAULT_MAX_TOOL_ROUNDS,
        CONF_MODEL_RETRIES: DEFAULT_MODEL_RETRIES,
        CONF_CONTEXT_WINDOW: DEFAULT_CONTEXT_WINDOW,
        CONF_KEEP_ALIVE: DEFAULT_KEEP_ALIVE,
        CONF_THINK: DEFAULT_THINK,
        # None: the main model does the fast role, and there is no fallback.
        CONF_FAST_MODEL: None,
        CONF_FALLBACK_MODEL: None,
        CONF_ACTIVITY_CONTENTS: False,
        CONF_REQUEST_TIMEOUT: DEFAULT_REQUEST_TIMEOUT,
        # Camera questions: off unless the owner turns them on; None: the agent's own
        # model looks, when it sees images (agent/models/vision.py).
        CONF_CAMERAS: False,
        CONF_VISION_MODEL: None,
        # Web search: off unless the owner turns it on; None: the agent's own model
        # searches, when it can (agent/models/web_search.py).
        CONF_WEB_SEARCH: False,
        CONF_WEB_SEARCH_MODEL: None,
        # Automations by voice: off unless the owner turns them on; critical actions in
        # them only with the second, explicit option (tools/automations.py).
        CONF_AUTOMATIONS: False,
        CONF_AUTOMATIONS_CRITICAL: False,
    }
)

# Options shown only for Ollama's native API (`ollama_chat/` models).
OLLAMA_OPTIONS: Final = (CONF_CONTEXT_WINDOW, CONF_KEEP_ALIVE, CONF_THINK)

# On Ollama's native API, as Home Assistant's own Ollama agent: temperature and answer
# length are the model's own (its Modelfile's) unless the user sets them; nothing is sent.
# Other providers keep AGENT_DEFAULTS: cloud APIs bill every token of an unbounded answer.
OLLAMA_AGENT_DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType(
    {**AGENT_DEFAULTS, CONF_TEMPERATURE: None, CONF_MAX_TOKENS: None}
)

# An AI Task's model settings: a lower temperature (data generation wants consistent,
# schema-following answers), and thinking as the model decides (its form has no choice).
AI_TASK_DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType(
    {**AGENT_DEFAULTS, CONF_TEMPERATURE: DEFAULT_AI_TASK_TEMPERATURE, CONF_THINK: THINK_DEFAULT}
)

# What the form and the first agent stored for every Ollama agent up to the entry's minor
# version 1, whether chosen or not: an agent holding exactly these gets today's defaults
# (`without_old_ollama_defaults`).
_OLD_OLLAMA_DEFAULTS: Final = {
    CONF_TEMPERATURE: 0.7,
    CONF_MAX_TOKENS: 1024,
    CONF_THINK: THINK_DEFAULT,
}

# The options a new agent starts with (the first agent of an entry, and the suggestions
# of the "add agent" form): the defaults, with Home Assistant's Assist API and all of our
# tool categories chosen. Without the options whose default depends on the provider: an
# agent stores them only when the user sets them.
NEW_AGENT_OPTIONS: Final[Mapping[str, Any]] = MappingProxyType(
    {
        **{
            key: value
            for key, value in AGENT_DEFAULTS.items()
            if key not in OLLAMA_OPTIONS
            and value not in (None, ())
            and OLLAMA_AGENT_DEFAULTS[key] == value
        },
        CONF_LLM_HASS_API: [llm.LLM_API_ASSIST],
        CONF_TOOL_CATEGORIES: list(DEFAULT_TOOL_CATEGORIES),
    }
)

# The thinking option as Ollama's `think` field (None: not sent, the model decides).
_THINK = {THINK_ON: True, THINK_OFF: False}


def agent_defaults(model: str) -> Mapping[str, Any]:
    """What an option missing from an agent of an entry with this model means."""
    return OLLAMA_AGENT_DEFAULTS if provider_of(model) == "ollama_chat" else AGENT_DEFAULTS


def without_old_ollama_defaults(options: Mapping[str, Any]) -> dict[str, Any]:
    """An Ollama agent's stored options without the values every such agent stored before
    the defaults became Home Assistant's (thinking off, temperature and answer length the
    model's own), so upgrading users get those; any other value is the user's choice."""
    return {
        key: value
        for key, value in options.items()
        if key not in _OLD_OLLAMA_DEFAULTS or value != _OLD_OLLAMA_DEFAULTS[key]
    }


def option(options: Mapping[str, Any], key: str) -> Any:
    """One agent option as stored, or its default."""
    return options.get(key, AGENT_DEFAULTS[key])


def agent_kind(options: Mapping[str, Any]) -> AgentKind:
    """The agent's kind; options from before kinds existed are assistants."""
    try:
        return AgentKind(option(options, CONF_AGENT_KIND))
    except ValueError:
        return AgentKind.ASSISTANT


def agent_roles(main: ModelAccess, options: Mapping[str, Any]) -> RoleAccesses:
    """The fast, fallback, vision and web search models an agent chose (form sections), under the
    key rule."""

    def chosen(key: str) -> ModelAccess | None:
        section = option(options, key) or {}
        return role_access(
            main, section.get(CONF_MODEL), section.get(CONF_API_KEY), section.get(CONF_API_BASE)
        )

    return RoleAccesses(
        fast=chosen(CONF_FAST_MODEL),
        fallback=chosen(CONF_FALLBACK_MODEL),
        vision=chosen(CONF_VISION_MODEL),
        search=chosen(CONF_WEB_SEARCH_MODEL),
    )


def model_section(
    options: Mapping[str, Any], key: str
) -> tuple[str | None, str | None, str | None]:
    """A model section of an AI Task subentry as (model, key, base URL)."""
    section = options.get(key)
    if not isinstance(section, Mapping):
        return None, None, None
    return section.get(CONF_MODEL), section.get(CONF_API_KEY), section.get(CONF_API_BASE)


def offers_images(access: ModelAccess, options: Mapping[str, Any]) -> bool:
    """Whether an AI Task subentry chose an image model: its entity then offers images
    (the image models themselves are task_assembly.task_image_models's)."""
    return role_access(access, *model_section(options, CONF_IMAGE_MODEL)) is not None


def knowledge_source(hass: HomeAssistant, subentry: ConfigSubentry) -> KnowledgeSource:
    """The agent's documents: knowledge/<its name as a slug>/ under our config folder."""
    folder = slugify(subentry.title) or subentry.subentry_id
    return KnowledgeSource(
        Path(hass.config.path(DOMAIN, KNOWLEDGE_DIR, folder)), subentry.subentry_id
    )


def model_settings(
    options: Mapping[str, Any], defaults: Mapping[str, Any] = AGENT_DEFAULTS
) -> ModelSettings:
    """The model settings a subentry chose; `defaults` says what a missing option means
    (`agent_defaults` for the entry's model, or AI_TASK_DEFAULTS)."""

    def chosen(key: str) -> Any:
        return options.get(key, defaults[key])

    return ModelSettings(
        temperature=chosen(CONF_TEMPERATURE),
        max_tokens=chosen(CONF_MAX_TOKENS),
        request_timeout=chosen(CONF_REQUEST_TIMEOUT),
        # Used by Ollama's native API only (agent/models/ollama_chat.py); agents
        # saved before these options existed get the defaults.
        context_window=int(chosen(CONF_CONTEXT_WINDOW)),
        keep_alive=int(chosen(CONF_KEEP_ALIVE)),
        think=_THINK.get(chosen(CONF_THINK)),
    )


def _names(value: Any) -> tuple[str, ...]:
    """A multiple choice as stored (a list; one id as a plain string in old options)."""
    if isinstance(value, str):
        return (value,)
    return tuple(value or ())


@dataclass(frozen=True, slots=True)
class AgentProfile:
    """One conversation agent as its subentry configures it, read once.

    `agent` is what the runtime needs for every turn; the rest is Home Assistant's side
    of a turn. A kind without tools (chatbot, rag) has no tool choices here at all.
    """

    # The subentry id: threads, documents and repair issues are keyed by it.
    agent_id: str
    name: str
    agent: AgentSettings
    # The user's instructions, a template Home Assistant renders for every turn (empty:
    # Home Assistant's own).
    instructions: str | None
    # Home Assistant LLM APIs whose tools (and entity listing) the agent gets.
    llm_hass_apis: tuple[str, ...]
    # Categories of our own tools (tools/), offered where the home has what they serve.
    tool_categories: tuple[str, ...]
    # The user's own additions to the entities whose effects wait for a yes.
    confirm_entities: tuple[str, ...]
    # The entity listing of the instructions in compact form.
    compact_context: bool
    # Whether activity events and traces carry the words of requests and answers.
    activity_contents: bool
    # "Continue recent": minutes within which a satellite's new conversation continues
    # its previous one, and whether text clients' conversations do too (agent/memory/threads.py).
    continue_minutes: int
    continue_text: bool
    # Whether the agent may look through the cameras exposed to it (tools/cameras.py).
    look_through_cameras: bool = False
    # Whether the agent may search the web (tools/web_search.py).
    search_the_web: bool = False
    # Whether the agent may create automations (for administrators, after their yes),
    # and whether those may include critical actions (tools/automations.py).
    create_automations: bool = False
    automations_critical: bool = False

    @property
    def uses_tools(self) -> bool:
        """Only the assistant kind acts with tools."""
        return self.agent.kind.uses_tools

    @property
    def controls_home(self) -> bool:
        """Whether the agent has any tools to act on the home with."""
        return bool(self.llm_hass_apis or self.tool_categories)


def agent_profile(hass: HomeAssistant, subentry: ConfigSubentry, main: ModelAccess) -> AgentProfile:
    """The profile of an agent subentry; `main` is its entry's model access (the fast
    and fallback models may borrow its key, agent/models/roles.py)."""
    options = subentry.data
    kind = agent_kind(options)
    uses_tools = kind.uses_tools
    return AgentProfile(
        agent_id=subentry.subentry_id,
        name=subentry.title,
        agent=AgentSettings(
            settings=model_settings(options, agent_defaults(main.model)),
            max_tool_rounds=option(options, CONF_MAX_TOOL_ROUNDS),
            kind=kind,
            base_prompt=option(options, CONF_BASE_PROMPT),
            roles=agent_roles(main, options),
            model_retries=option(options, CONF_MODEL_RETRIES),
            # A budget of 0 keeps the whole history.
            history_budget=option(options, CONF_HISTORY_BUDGET) or None,
            memory=bool(option(options, CONF_MEMORY)),
            memory_recall_limit=MEMORY_RECALL_LIMIT,
            learn_memories=bool(option(options, CONF_LEARN_MEMORIES)),
            knowledge=knowledge_source(hass, subentry),
            search_knowledge=bool(option(options, CONF_SEARCH_KNOWLEDGE)),
            safety_check=bool(option(options, CONF_SAFETY_CHECK)),
        ),
        instructions=option(options, CONF_PROMPT),
        llm_hass_apis=_names(option(options, CONF_LLM_HASS_API)) if uses_tools else (),
        tool_categories=_names(option(options, CONF_TOOL_CATEGORIES)) if uses_tools else (),
        confirm_entities=_names(option(options, CONF_CONFIRM_ENTITIES)),
        compact_context=uses_tools and bool(option(options, CONF_COMPACT_CONTEXT)),
        activity_contents=bool(option(options, CONF_ACTIVITY_CONTENTS)),
        continue_minutes=option(options, CONF_CONTINUE_MINUTES),
        continue_text=bool(option(options, CONF_CONTINUE_TEXT)),
        look_through_cameras=uses_tools and bool(option(options, CONF_CAMERAS)),
        search_the_web=uses_tools and bool(option(options, CONF_WEB_SEARCH)),
        create_automations=uses_tools and bool(option(options, CONF_AUTOMATIONS)),
        automations_critical=bool(option(options, CONF_AUTOMATIONS_CRITICAL)),
    )
