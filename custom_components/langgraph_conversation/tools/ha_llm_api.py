"""Home Assistant LLM API tools (Assist and any other selected API) as LangChain tools.

LangGraph runs these tools, not the ChatLog: the graph owns the tool loop (parallel
calls, round limit, later confirmations), and the ChatLog records each call as an
external tool call. Exposure rules stay Home Assistant's: the Assist API only offers and
acts on entities exposed to the conversation assistant.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
import voluptuous as vol

from homeassistant.components.homeassistant import async_should_expose
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import llm

from ..agent.errors import ToolFailure
from .assist_wording import shorter, shorter_parameters
from .media_intents import grouped_media_intents
from .schema import home_has_floors, lean_schema, tool_parameters, without_unmatchable

# Home Assistant's live-context tool, without the integration prefix 2026.8 and later add.
LIVE_CONTEXT_TOOL = "GetLiveContext"


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
    # What the model is shown; Home Assistant validates the call against its own schema.
    # The live-context tool filters by several domains at once ("lights and sensors"):
    # its lists stay, where an intent is offered one target as people name it.
    converted = tool_parameters(tool.parameters, api.custom_serializer)
    live_context = tool.name.rpartition("__")[2] == LIVE_CONTEXT_TOOL
    lean = lean_schema(converted, device_classes, lists_as_one=not live_context)
    parameters = shorter_parameters(without_unmatchable(lean, floors))

    async def call(**arguments: Any) -> Any:
        try:
            result = await api.async_call_tool(
                llm.ToolInput(tool_name=tool.name, tool_args=arguments)
            )
        except (HomeAssistantError, vol.Invalid) as err:
            raise ToolFailure({"error": type(err).__name__, "error_text": str(err)}) from err
        data, is_error = tool_result_data(result)
        if is_error:
            raise ToolFailure(data if isinstance(data, dict) else {"error": str(data)})
        return data

    return StructuredTool(
        name=tool.name,
        description=shorter(tool.description) if tool.description else tool.name,
        args_schema=parameters,
        coroutine=call,
    )


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
