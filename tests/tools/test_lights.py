"""home_light_control on real light entities: every feature, per-light refusals, targeting."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool
import pytest

from custom_components.langgraph_conversation.agent.errors import ToolFailure
from custom_components.langgraph_conversation.tools.lights import SPECS
from custom_components.langgraph_conversation.tools.registry import as_langchain_tools
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.const import EVENT_CALL_SERVICE
from homeassistant.core import Event, HomeAssistant, callback

from .conftest import (
    BED,
    BEDROOM_LAMP,
    CEILING,
    DESK,
    ENTRANCE,
    GARAGE,
    HALL,
    KITCHEN,
    LIVING_LAMP,
    OFFICE_RGBW,
    RGBWW,
    Home,
    bind,
    finished_calls,
    run_agent,
    tool_context,
)


@pytest.fixture
def light_tool(hass: HomeAssistant, home: Home) -> BaseTool:
    """The light tool as a chat-panel turn gets it."""
    return bind(hass, SPECS)["home_light_control"]


def _state(hass: HomeAssistant, entity_id: str) -> str:
    state = hass.states.get(entity_id)
    assert state is not None
    return state.state


def _attribute(hass: HomeAssistant, entity_id: str, name: str) -> Any:
    state = hass.states.get(entity_id)
    assert state is not None
    return state.attributes.get(name)


async def _failure(tool: BaseTool, arguments: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(ToolFailure) as caught:
        await tool.ainvoke(arguments)
    return caught.value.data


async def test_on_off_toggle_by_name(hass: HomeAssistant, light_tool: BaseTool) -> None:
    """Switching by name; the result says each light's new state."""
    result = await light_tool.ainvoke({"action": "turn_on", "name": "Hall light"})
    assert result == {"lights": [{"entity_id": HALL, "name": "Hall light", "state": "on"}]}
    await light_tool.ainvoke({"action": "toggle", "name": "Hall light"})
    assert _state(hass, HALL) == "off"
    result = await light_tool.ainvoke({"action": "turn_off", "name": "Kitchen Lights"})
    assert result["lights"] == [{"entity_id": KITCHEN, "name": "Kitchen Lights", "state": "off"}]


async def test_brightness_absolute_and_relative(hass: HomeAssistant, light_tool: BaseTool) -> None:
    """Percent sets brightness; steps move it from where it is (demo lights start at 180)."""
    result = await light_tool.ainvoke(
        {"action": "turn_on", "name": "Ceiling Lights", "brightness_step_pct": 20}
    )
    assert _attribute(hass, CEILING, "brightness") == 232  # 71 % + 20 points
    assert result["lights"][0]["brightness_pct"] == 91
    await light_tool.ainvoke(
        {"action": "turn_on", "name": "Ceiling Lights", "brightness_step_pct": -50}
    )
    assert _attribute(hass, CEILING, "brightness") == 105
    result = await light_tool.ainvoke(
        {"action": "turn_on", "name": "Desk lamp", "brightness_pct": 40}
    )
    assert _attribute(hass, DESK, "brightness") == 102
    assert result["lights"] == [
        {"entity_id": DESK, "name": "Desk lamp", "state": "on", "brightness_pct": 40}
    ]


async def test_colour_by_name_and_rgb(hass: HomeAssistant, light_tool: BaseTool) -> None:
    """CSS colour names and RGB reach hs, rgbw and rgbww lights alike."""
    result = await light_tool.ainvoke(
        {"action": "turn_on", "name": "Kitchen Lights", "color_name": "red"}
    )
    assert _attribute(hass, KITCHEN, "rgb_color") == (255, 0, 0)
    assert result["lights"][0]["rgb_color"] == [255, 0, 0]
    await light_tool.ainvoke({"action": "turn_on", "name": "Bed Light", "color_name": "blue"})
    assert _attribute(hass, BED, "color_mode") == "hs"
    assert _attribute(hass, BED, "rgb_color") == (0, 0, 255)
    await light_tool.ainvoke(
        {"action": "turn_on", "name": "Office RGBW Lights", "rgb_color": [0, 255, 0]}
    )
    assert _attribute(hass, OFFICE_RGBW, "rgbw_color") == (0, 255, 0, 0)
    await light_tool.ainvoke(
        {"action": "turn_on", "name": "Living Room RGBWW Lights", "color_name": "blue"}
    )
    assert _attribute(hass, RGBWW, "rgb_color") == (0, 0, 255)


async def test_colour_temperature(hass: HomeAssistant, light_tool: BaseTool) -> None:
    """Kelvin on a colour-temperature light; the result reports it."""
    result = await light_tool.ainvoke(
        {"action": "turn_on", "name": "Kitchen Lights", "color_temp_kelvin": 3000}
    )
    assert _attribute(hass, KITCHEN, "color_mode") == "color_temp"
    assert _attribute(hass, KITCHEN, "color_temp_kelvin") == 3000
    assert result["lights"][0]["color_temp_kelvin"] == 3000


@pytest.mark.usefixtures("home")
async def test_transition_and_context_reach_the_service(hass: HomeAssistant) -> None:
    """Fade time goes into one service call, run with the turn's context (for the logbook)."""
    calls: list[Event] = []

    @callback
    def record(event: Event) -> None:
        calls.append(event)

    hass.bus.async_listen(EVENT_CALL_SERVICE, record)
    turn = tool_context(hass)
    (tool,) = as_langchain_tools(SPECS, turn)
    await tool.ainvoke({"action": "turn_on", "area": "Bedroom", "transition": 5})
    await hass.async_block_till_done()
    assert [call.data["service"] for call in calls] == ["turn_on"]
    assert calls[0].data["service_data"]["transition"] == 5
    assert sorted(calls[0].data["service_data"]["entity_id"]) == [BED, BEDROOM_LAMP]
    for light in (BED, BEDROOM_LAMP):
        state = hass.states.get(light)
        assert state is not None
        assert state.state == "on"
        assert state.context.id == turn.context.id


async def test_unsupported_colour_refused_per_light(
    hass: HomeAssistant, light_tool: BaseTool
) -> None:
    """An on/off light in the area is refused by name; the colour light still changes."""
    result = await light_tool.ainvoke({"action": "turn_on", "area": "Hallway", "color_name": "red"})
    assert result == {
        "lights": [
            {
                "entity_id": ENTRANCE,
                "name": "Entrance Color + White Lights",
                "state": "on",
                "brightness_pct": 71,
                "rgb_color": [255, 0, 0],
            }
        ],
        "refused": ["Hall light cannot change colour"],
    }
    assert _state(hass, HALL) == "off"


async def test_partly_supported_settings(hass: HomeAssistant, light_tool: BaseTool) -> None:
    """A dimmable light asked for brightness and colour gets the brightness."""
    result = await light_tool.ainvoke(
        {"action": "turn_on", "area": "Office", "brightness_pct": 50, "color_name": "orange"}
    )
    assert result["refused"] == ["Desk lamp cannot change colour"]
    assert _attribute(hass, DESK, "brightness") == 128
    assert _attribute(hass, OFFICE_RGBW, "brightness") == 128
    assert _attribute(hass, OFFICE_RGBW, "rgb_color") == (255, 165, 0)


async def test_nothing_supported_fails_without_change(
    hass: HomeAssistant, light_tool: BaseTool
) -> None:
    """Only lights that cannot do it: a failure naming each, and no light changes."""
    failure = await _failure(
        light_tool, {"action": "turn_on", "name": "Hall light", "color_temp_kelvin": 2700}
    )
    assert failure == {
        "error": "unsupported",
        "error_text": "Hall light cannot change colour temperature.",
    }
    failure = await _failure(
        light_tool, {"action": "turn_on", "name": "Hall light", "brightness_step_pct": 10}
    )
    assert failure["error_text"] == "Hall light cannot be dimmed."
    assert _state(hass, HALL) == "off"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"action": "dim"}, "action must be one of turn_on, turn_off, toggle"),
        (
            {"action": "turn_off", "brightness_pct": 10},
            "brightness and colour can only be set with action turn_on",
        ),
        (
            {"action": "turn_on", "brightness_pct": 10, "brightness_step_pct": 10},
            "give either brightness_pct or brightness_step_pct, not both",
        ),
        (
            {"action": "turn_on", "color_name": "red", "color_temp_kelvin": 3000},
            "give one of color_name, rgb_color or color_temp_kelvin",
        ),
        (
            {"action": "turn_on", "color_name": "blurple"},
            "'blurple' is not a known colour name; use a CSS colour name or rgb_color",
        ),
        (
            {"action": "turn_on", "rgb_color": [300, 0, 0]},
            "rgb_color must be three integers from 0 to 255",
        ),
    ],
)
async def test_invalid_arguments_change_nothing(
    hass: HomeAssistant, light_tool: BaseTool, arguments: dict[str, Any], message: str
) -> None:
    """Invalid requests are explained before any light is touched."""
    before = {state.entity_id: state.state for state in hass.states.async_all("light")}
    failure = await _failure(light_tool, {"name": "Kitchen Lights", **arguments})
    assert failure == {"error": "invalid_arguments", "error_text": message}
    assert before == {state.entity_id: state.state for state in hass.states.async_all("light")}


async def test_area_floor_and_alias(hass: HomeAssistant, light_tool: BaseTool) -> None:
    """Areas and floors switch many lights; an alias switches its light."""
    result = await light_tool.ainvoke({"action": "turn_on", "floor": "Upstairs"})
    assert {light["entity_id"] for light in result["lights"]} == {
        BED,
        BEDROOM_LAMP,
        OFFICE_RGBW,
        DESK,
    }
    assert all(_state(hass, light) == "on" for light in (BED, BEDROOM_LAMP, DESK))
    await light_tool.ainvoke({"action": "turn_off", "area": "Living room"})
    assert {_state(hass, light) for light in (CEILING, RGBWW, LIVING_LAMP)} == {"off"}
    assert _state(hass, KITCHEN) == "on"
    await light_tool.ainvoke({"action": "turn_on", "name": "big light"})
    assert _state(hass, CEILING) == "on"


async def test_satellite_room(hass: HomeAssistant, home: Home) -> None:
    """'Turn off the lights' from the kitchen satellite turns off the kitchen's only."""
    tool = bind(hass, SPECS, home.satellite_id)["home_light_control"]
    await tool.ainvoke({"action": "turn_off"})
    assert _state(hass, KITCHEN) == "off"
    assert _state(hass, CEILING) == "on"


async def test_unexposed_and_ambiguous_change_nothing(
    hass: HomeAssistant, light_tool: BaseTool
) -> None:
    """A hidden light is not available; a shared name asks back; nothing switches."""
    failure = await _failure(light_tool, {"action": "turn_on", "name": "Garage light"})
    assert failure["error"] == "not_exposed"
    assert _state(hass, GARAGE) == "off"
    failure = await _failure(light_tool, {"action": "turn_on", "name": "Lamp"})
    assert failure["error"] == "ambiguous"
    assert {c["area"] for c in failure["candidates"]} == {"Bedroom", "Living room"}
    assert _state(hass, BEDROOM_LAMP) == _state(hass, LIVING_LAMP) == "off"


async def test_through_the_agent(
    hass: HomeAssistant, home: Home, openai_server: FakeOpenAIServer
) -> None:
    """The model calls the tool through the agent runtime; the lights really change."""
    openai_server.add_tool_calls(
        [
            ToolCall(
                "home_light_control",
                {"action": "turn_on", "area": "Hallway", "color_name": "purple"},
            ),
            ToolCall("home_light_control", {"action": "turn_on", "name": "Garage light"}),
        ]
    )
    openai_server.add_text("The entrance is purple; the hall light cannot change colour.")
    events = await run_agent(openai_server, bind(hass, SPECS), "Make the hallway purple")

    # An hs light keeps hue and saturation; purple (128, 0, 128) reads back at full value.
    assert _attribute(hass, ENTRANCE, "rgb_color") == (255, 0, 255)
    assert _state(hass, HALL) == "off"
    assert _state(hass, GARAGE) == "off"
    colour, garage = finished_calls(events)
    assert not colour.is_error
    assert colour.result["refused"] == ["Hall light cannot change colour"]
    assert garage.is_error
    assert garage.result["error"] == "not_exposed"
    # The model saw both results, the refusal included.
    tool_messages = [m for m in openai_server.requests[1]["messages"] if m["role"] == "tool"]
    assert "Hall light cannot change colour" in tool_messages[0]["content"]
    assert "not_exposed" in tool_messages[1]["content"]
