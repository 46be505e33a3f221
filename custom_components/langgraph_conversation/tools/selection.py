"""Which tools one turn gets, and why each tool of ours it does not get is left out.

Home Assistant's LLM API tools (Assist and any other API the agent chose) always come,
converted for the model (ha_llm_api.py: lean schemas, Assist's media intents as one tool);
Home Assistant decides what they reach. Our own tools come from the categories the agent
chose (profile.py: only the assistant kind chooses any), where they fit. Which of ours stay
next to Assist's own, and why:

home_find_entities      kept: search by words, typos, aliases, areas and floors; Assist
                        can only list everything (GetLiveContext) or act on exact names.
                        Left out while Home Assistant's prompt carries the entity listing
                        (the model reads names, aliases and areas there): offered with the
                        compact context, without the API, or when the window's trimming
                        replaces the listing (agent/graph/window.py)
home_get_state          left out when GetLiveContext is offered (it reads states too)
home_history            kept: Assist sees only the present. Left out where Home
                        Assistant's recorder is not loaded (there is no history to read)
home_light_control      left out when HassTurnOn, HassTurnOff and HassLightSet are offered
home_media_control      left out when Assist's pause, resume, next, previous and volume
                        intents are offered
home_media_play         kept: searches a player's library and plays the best match
home_media_status       left out when GetLiveContext is offered (it shows players' states)
home_weather            kept: Assist has no forecast (the same tool says the weather now,
                        one tool costing fewer tokens than two)
home_camera_look        not a category: offered only when the agent may look through
                        cameras (its own option, off by default) and a model of the
                        agent sees images (the turn's ToolContext.cameras); Assist cannot
                        look at all
home_web_search         not a category: offered only when the agent may search the web
                        (its own option, off by default) and a model of the agent
                        searches (the turn's ToolContext.web_search); Assist has no web
                        search
home_automation_create, not a category: offered only when the agent's owner turned
home_automation_list,   automations by voice on (its own option, off by default: no
home_automation_delete  tool and no token otherwise) and Home Assistant's automation
                        integration is loaded; who may create or delete is decided per
                        asker (the turn's ToolContext.automations)

Each is also left out when no exposed entity of its domain exists: a weather tool in a
home without a weather entity only costs tokens and invites a wrong call, and two tools
for one job make small models hesitate and cost tokens every turn.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from langchain_core.tools import BaseTool

from homeassistant.components.homeassistant import async_should_expose
from homeassistant.core import HomeAssistant
from homeassistant.helpers import llm

from .all_tools import TOOLS
from .automations import SPECS as AUTOMATION_SPECS
from .cameras import SPECS as CAMERA_SPECS
from .context import entity_listing
from .ha_llm_api import assist_job, distinct_names, tools_from_llm_api
from .media import PLAY_TOOL
from .registry import ToolContext, ToolSpec, as_langchain_tools
from .schema import home_has_floors
from .web_search import SPECS as WEB_SEARCH_SPECS

# Our tools that only help when the prompt carries no entity listing (what the listing
# already tells the model).
LISTING_COVERS = frozenset({"home_find_entities"})


class LeftOut(StrEnum):
    """Why one of our tools is not in a turn's request."""

    # The agent did not choose the tool's category.
    NOT_CHOSEN = "category_not_chosen"
    # An integration the tool reads through is not loaded (the recorder, for history).
    NOT_LOADED = "integration_not_loaded"
    # No entity of the tool's domains (of any domain, for a tool without) is exposed.
    NOTHING_EXPOSED = "nothing_exposed"
    # The turn's API offers every one of Home Assistant's intents that do its job.
    INTENTS_DO_IT = "intents_do_it"
    # The prompt's entity listing already tells what it would find; offered only if the
    # window's trimming replaces the listing (ToolChoice.if_listing_dropped).
    LISTING_IN_PROMPT = "listing_in_prompt"
    # The agent's owner did not let it look through cameras (the camera tool only).
    CAMERAS_NOT_ALLOWED = "cameras_not_allowed"
    # No model of the agent sees images (the camera tool only).
    NO_VISION_MODEL = "no_vision_model"
    # Web search (#27): the agent's owner did not let it search the web.
    WEB_SEARCH_NOT_ALLOWED = "web_search_not_allowed"
    # No model of the agent searches the web (LiteLLM's map; the web search tool only).
    NO_SEARCH_MODEL = "no_search_model"
    # The agent's owner did not turn automations by voice on (the automation tools only).
    AUTOMATIONS_NOT_ALLOWED = "automations_not_allowed"


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """The tools of one turn, and why each other tool of ours is not among them."""

    # Home Assistant's API tools, in every request of the turn.
    api_tools: tuple[BaseTool, ...]
    # Ours that fit; a request too long for the model's window may leave them out.
    own_tools: tuple[BaseTool, ...]
    # Ours offered only when the window's trimming replaces the prompt's entity listing.
    if_listing_dropped: tuple[BaseTool, ...]
    # Every other tool of ours, by name: why it is not in the request.
    left_out: Mapping[str, LeftOut]

    @property
    def tools(self) -> list[BaseTool]:
        """What the turn's requests offer from the start."""
        return [*self.api_tools, *self.own_tools]

    @property
    def optional(self) -> frozenset[str]:
        """The names of the tools a too-long request may go without."""
        return frozenset(tool.name for tool in self.own_tools)


def choose_tools(
    tool_context: ToolContext,
    api: llm.APIInstance | None,
    categories: Iterable[str],
    system_prompt: str,
    *,
    cameras: bool = False,
    web_search: bool = False,
) -> ToolChoice:
    """The tools of a turn of `tool_context`'s assistant: all of the turn's API tools, and
    those of our chosen categories that fit this home, this API and this prompt; the camera
    tool when the agent may look through cameras (`cameras`) and has a model that sees; the
    web search tool when it may search the web (`web_search`) and has a model that searches."""
    hass = tool_context.hass
    chosen = set(categories)
    exposed = _exposed_domains(hass, tool_context.assistant)
    offered = _offered_intents(api)
    listed = bool(entity_listing(system_prompt))
    left_out: dict[str, LeftOut] = {}
    fitting: list[ToolSpec] = []
    for spec in TOOLS.specs(TOOLS.categories):
        reason = _reason_to_leave_out(spec, chosen, hass.config.components, exposed, offered)
        if reason is None and listed and spec.name in LISTING_COVERS:
            reason = LeftOut.LISTING_IN_PROMPT
        if reason is not None:
            left_out[spec.name] = reason
        if reason in (None, LeftOut.LISTING_IN_PROMPT):
            fitting.append(spec)
    for spec in CAMERA_SPECS:
        if (reason := _camera_reason(tool_context, cameras, exposed)) is None:
            fitting.append(spec)
        else:
            left_out[spec.name] = reason
    for spec in WEB_SEARCH_SPECS:
        if not web_search:
            left_out[spec.name] = LeftOut.WEB_SEARCH_NOT_ALLOWED
        elif tool_context.web_search is None:
            left_out[spec.name] = LeftOut.NO_SEARCH_MODEL
        else:
            fitting.append(spec)
    for spec in AUTOMATION_SPECS:
        if tool_context.automations is None:
            left_out[spec.name] = LeftOut.AUTOMATIONS_NOT_ALLOWED
        elif "automation" not in hass.config.components:
            left_out[spec.name] = LeftOut.NOT_LOADED
        else:
            fitting.append(spec)
    bound = as_langchain_tools(fitting, tool_context, floors=home_has_floors(hass))
    own_tools = tuple(tool for tool in bound if tool.name not in left_out)
    play_tool = PLAY_TOOL if any(tool.name == PLAY_TOOL for tool in own_tools) else None
    # Several APIs' tools, and ours, never reach the model under one name.
    api_tools = distinct_names(tools_from_llm_api(hass, api, play_tool), {t.name for t in bound})
    return ToolChoice(
        api_tools=tuple(api_tools),
        own_tools=own_tools,
        if_listing_dropped=tuple(tool for tool in bound if tool.name in left_out),
        left_out=left_out,
    )


def _reason_to_leave_out(
    spec: ToolSpec,
    chosen: set[str],
    loaded: Collection[str],
    exposed: set[str],
    offered: set[str],
) -> LeftOut | None:
    """Why the tool does not fit this agent, home and API (None: it fits)."""
    if spec.category not in chosen:
        return LeftOut.NOT_CHOSEN
    if not all(name in loaded for name in spec.integrations):
        return LeftOut.NOT_LOADED
    if not (exposed & spec.domains if spec.domains else exposed):
        return LeftOut.NOTHING_EXPOSED
    if spec.covered_by and spec.covered_by <= offered:
        return LeftOut.INTENTS_DO_IT
    return None


def _camera_reason(tool_context: ToolContext, allowed: bool, exposed: set[str]) -> LeftOut | None:
    """Why the camera tool does not fit this agent and home (None: it fits)."""
    if not allowed:
        return LeftOut.CAMERAS_NOT_ALLOWED
    if "camera" not in exposed:
        return LeftOut.NOTHING_EXPOSED
    if tool_context.cameras is None:
        return LeftOut.NO_VISION_MODEL
    return None


def _exposed_domains(hass: HomeAssistant, assistant: str) -> set[str]:
    """The domains with at least one entity exposed to `assistant`."""
    found: set[str] = set()
    for entity_id in hass.states.async_entity_ids():
        domain = entity_id.partition(".")[0]
        if domain not in found and async_should_expose(hass, assistant, entity_id):
            found.add(domain)
    return found


def _offered_intents(api: llm.APIInstance | None) -> set[str]:
    """The jobs of Assist's tools (their intents, the live context), whatever Home
    Assistant prefixed their names with ("intent__HassTurnOn" on 2026.10,
    "assist__HassTurnOn" merged with another API on 2026.2): another API's tool named like
    one does not do Assist's job."""
    if api is None:
        return set()
    return {job for tool in api.tools if (job := assist_job(tool)) is not None}
