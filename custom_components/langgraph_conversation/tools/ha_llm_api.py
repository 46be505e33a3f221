"""Home Assistant LLM API tools (Assist and any other selected API) as LangChain tools.

LangGraph runs these tools, not the ChatLog: the graph owns the tool loop (parallel
calls, round limit, later confirmations), and the ChatLog records each call as an
external tool call. Exposure rules stay Home Assistant's: the Assist API only offers and
acts on entities exposed to the conversation assistant.

Several APIs (Assist, an MCP server's, another integration's) come merged by Home
Assistant into one instance; how it names their tools differs by version (2026.2 and
2026.10 put every tool under its API's name, "assist__HassTurnOn"; 2026.11 only tools
whose names collide, under the API's id). So what is Assist's is read from the tool
itself, never from its name: an intent is a tool that runs an intent (`intent_of`). The
names the model sees are made safe for every provider and distinct from each other and
from ours (`distinct_names`); a call still reaches Home Assistant under its own name.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
import logging
import re
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
import voluptuous as vol

from homeassistant.components.homeassistant import async_should_expose
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import llm

from ..agent.errors import ToolFailure
from ..agent.tool_templates import ToolTemplates, unbound
from .assist_wording import shorter, shorter_parameters
from .effects import api_tool_context
from .media_intents import INTENT_KEY, grouped_media_intents
from .schema import home_has_floors, lean_schema, tool_parameters, without_unmatchable

_LOGGER = logging.getLogger(__name__)
# Assist's tools as built for this home (agent/tool_templates.py).
_ASSIST_TEMPLATES = ToolTemplates()
# Where Home Assistant's MCP client defines its tools (each MCP server's API).
_MCP_CLIENT = "homeassistant.components.mcp."

# Home Assistant's live-context tool, without the integration prefix 2026.8 and later add.
LIVE_CONTEXT_TOOL = "GetLiveContext"
# What every provider accepts as a function name (OpenAI's rule is the strictest).
_NAME_LENGTH = 64
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")


def intent_of(tool: llm.Tool) -> str | None:
    """The intent a tool of Home Assistant's runs ("HassTurnOn"), or None for any other tool.

    Read from the tool under Home Assistant's namespacing wrapper: another API's tool that
    happens to be called "...__HassTurnOn" (a proxied MCP tool, say) is not Assist's.
    """
    tool = _unwrapped(tool)
    if not isinstance(tool, llm.IntentTool):
        return None
    # 2026.8 and later keep the intent apart from the prefixed name; 2026.2 names it plainly.
    return str(getattr(tool, "intent_type", tool.name))


def assist_job(tool: llm.Tool) -> str | None:
    """The job of one of Assist's tools that our tools may leave to it: its intent, or
    LIVE_CONTEXT_TOOL for Home Assistant's own live-context tool; None for any other."""
    if (intent := intent_of(tool)) is not None:
        return intent
    inner = _unwrapped(tool)
    # Home Assistant's class (in helpers on 2026.2, in its homeassistant integration on
    # 2026.8 and later); a proxied tool of that name is some other class.
    if type(inner).__name__ == "GetLiveContextTool" and type(inner).__module__.startswith(
        "homeassistant."
    ):
        return LIVE_CONTEXT_TOOL
    return None


def _is_assists(tool: llm.Tool, api: llm.APIInstance) -> bool:
    """Whether a tool of the turn's API instance is one of Assist's.

    Alone, an instance is Assist's or not. Merged with other APIs, 2026.2 and 2026.10 put
    each tool under its API's name ("assist"); 2026.11 only colliding ones, so a tool left
    plain is told by where its class comes from: Assist's tools are Home Assistant's own
    (its helpers and its integrations' llm platforms), never the MCP client's.
    """
    if not isinstance(api.api, llm.MergedAPI):
        return api.api.id == llm.LLM_API_ASSIST
    if isinstance(tool, llm.NamespacedTool):
        return tool.namespace == llm.LLM_API_ASSIST
    module = type(tool).__module__
    return module.startswith("homeassistant.") and not module.startswith(_MCP_CLIENT)


def _unwrapped(tool: llm.Tool) -> llm.Tool:
    """The tool under Home Assistant's namespacing wrappers (several APIs merged)."""
    while isinstance(tool, llm.NamespacedTool):
        tool = tool.tool
    return tool


def tool_result_data(result: Any) -> tuple[Any, bool]:
    """(data, is_error) of what `APIInstance.async_call_tool` returned on any version.

    2026.10+ returns `llm.ToolResult(data, error)`; 2026.2 returns the data itself, with
    errors as a dict holding an "error" key.
    """
    if hasattr(llm, "ToolResult") and isinstance(result, llm.ToolResult):
        return result.data, bool(result.error)
    return result, isinstance(result, dict) and "error" in result


def _exposed_device_classes(hass: HomeAssistant, assistant: str) -> set[str]:
    """The device classes of the entities exposed to `assistant`."""
    return {
        str(device_class)
        for state in hass.states.async_all()
        if (device_class := state.attributes.get("device_class"))
        and async_should_expose(hass, assistant, state.entity_id)
    }


def _as_langchain_tool(
    hass: HomeAssistant,
    tool: llm.Tool,
    api: llm.APIInstance,
    device_classes: set[str],
    floors: bool,
) -> BaseTool:
    async def call(**arguments: Any) -> Any:
        # A tool of another API that calls a service without its llm_context's Context is
        # still this turn's, for the effect gate (tools/effects.py).
        token = api_tool_context.set(api.llm_context.context)
        try:
            result = await api.async_call_tool(
                llm.ToolInput(tool_name=tool.name, tool_args=arguments)
            )
        except (HomeAssistantError, vol.Invalid) as err:
            raise ToolFailure({"error": type(err).__name__, "error_text": str(err)}) from err
        finally:
            api_tool_context.reset(token)
        data, is_error = tool_result_data(result)
        if is_error:
            raise ToolFailure(data if isinstance(data, dict) else {"error": str(data)})
        return data

    intent = intent_of(tool)

    def build(parameters: dict[str, Any], coroutine: Callable[..., Any]) -> StructuredTool:
        return StructuredTool(
            name=tool.name,
            description=shorter(tool.description) if tool.description else tool.name,
            args_schema=parameters,
            coroutine=coroutine,
            metadata={INTENT_KEY: intent} if intent else {},
        )

    if _is_assists(tool, api):
        # What the model is shown; Home Assistant validates the call against its own
        # schema. The live-context tool filters by several domains at once ("lights and
        # sensors"): its lists stay, where an intent is offered one target as people name it.
        live_context = assist_job(tool) == LIVE_CONTEXT_TOOL
        # Read only: lean_schema builds a new schema of it. Home Assistant's tools come
        # back every turn with the same schema, known by identity (schema.py), so the
        # tool made of it is built once per description, device classes and floors.
        converted = tool_parameters(tool.parameters, api.custom_serializer, shared=True)
        made = _ASSIST_TEMPLATES.bound(
            (tool.name, tool.description, intent, id(converted), frozenset(device_classes), floors),
            converted,
            lambda: build(
                shorter_parameters(
                    without_unmatchable(
                        lean_schema(converted, device_classes, lists_as_one=not live_context),
                        floors,
                    )
                ),
                unbound,
            ),
            call,
        )
    else:
        # Another API's parameters mean what that API says: Assist's matching rules (one
        # target or a list, device classes, floors) do not apply to them.
        made = build(tool_parameters(tool.parameters, api.custom_serializer), call)
    return made


def tools_from_llm_api(
    hass: HomeAssistant, api: llm.APIInstance | None, play_tool: str | None = None
) -> list[BaseTool]:
    """Every tool of the turn's LLM API instance, ready to bind to a chat model.

    `play_tool`: our tool that finds and plays something new, when the turn offers it
    (the grouped media tool's description points there).
    """
    if api is None:
        return []
    device_classes = _exposed_device_classes(hass, api.llm_context.assistant or "conversation")
    floors = home_has_floors(hass)
    return grouped_media_intents(
        [_as_langchain_tool(hass, tool, api, device_classes, floors) for tool in api.tools],
        play_tool,
    )


def _safe_name(name: str) -> str:
    """A name every provider accepts: letters, digits, "_" and "-", starting with a letter
    or "_", at most 64 characters (an MCP tool may be called "files.read", say)."""
    safe = _NOT_IN_NAMES.sub("_", name) or "tool"
    if not (safe[0].isalpha() or safe[0] == "_"):
        safe = f"t_{safe}"
    return safe[:_NAME_LENGTH]


def distinct_names(tools: Sequence[BaseTool], taken: Collection[str]) -> list[BaseTool]:
    """`tools` (Home Assistant's) under names a provider accepts, none used twice and none
    in `taken` (our own tools' names): a second "search" becomes "search_2".

    Home Assistant's merged API keeps names apart in most cases, but not all: two APIs of
    the same name (two MCP servers both called "Files") on 2026.2 and 2026.10, a tool of
    another API named like one of ours, names that differ only in characters a provider
    refuses. A renamed tool still calls Home Assistant under its own name.
    """
    used = set(taken)
    named: list[BaseTool] = []
    for tool in tools:
        base = _safe_name(tool.name)
        name, number = base, 1
        while name in used:
            number += 1
            suffix = f"_{number}"
            name = f"{base[: _NAME_LENGTH - len(suffix)]}{suffix}"
        used.add(name)
        if name != tool.name:
            tool = StructuredTool(
                name=name,
                description=tool.description,
                args_schema=tool.args_schema,
                coroutine=tool.coroutine,  # type: ignore[attr-defined]
                metadata=tool.metadata,
            )
        named.append(tool)
    return named


def registered_apis(hass: HomeAssistant, chosen: Iterable[str]) -> list[str]:
    """The agent's chosen APIs that Home Assistant offers right now, in the chosen order.

    An MCP server that is down leaves its config entry unloaded and its API unregistered;
    Home Assistant refuses a turn naming an unknown API, so without this the agent would
    answer nothing at all instead of going on with Assist (and say why in the log).
    """
    offered = {api.id for api in llm.async_get_apis(hass)}
    chosen = list(chosen)
    if missing := [api_id for api_id in chosen if api_id not in offered]:
        _LOGGER.warning("LLM API(s) not available now, left out of this turn: %s", missing)
    return [api_id for api_id in chosen if api_id in offered]
