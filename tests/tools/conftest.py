"""A small real home for the tool tests: demo lights, plain lights, floors, areas, aliases.

The demo integration's lights cover the colour modes (hs + colour temperature, rgbw, rgbww,
hs + white); it has no on/off-only or dimmable-only light, so a tiny test platform adds
those, plus two lights that share a name. All are real `light` entities: services go
through Home Assistant's light component and the states change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from unittest.mock import patch

from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
import pytest
from pytest_homeassistant_custom_component.common import (
    MockConfigEntry,
    MockPlatform,
    mock_platform,
)

from custom_components.langgraph_conversation.agent.events import AgentEvent, ToolCallFinished
from custom_components.langgraph_conversation.agent.models import ModelAccess, ModelSettings
from custom_components.langgraph_conversation.agent.runtime import AgentRuntime, AgentSettings, Turn
from custom_components.langgraph_conversation.tools.registry import (
    ToolContext,
    ToolSpec,
    as_langchain_tools,
)
from fakes import FakeOpenAIServer
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.components.light import ATTR_BRIGHTNESS, ColorMode, LightEntity
from homeassistant.const import Platform
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import (
    area_registry as ar,
    device_registry as dr,
    entity_registry as er,
    floor_registry as fr,
)
from homeassistant.setup import async_setup_component

ASSISTANT = "conversation"

# Demo lights (names come from their devices).
KITCHEN = "light.kitchen_lights"  # hs + colour temperature
CEILING = "light.ceiling_lights"  # hs + colour temperature; alias "big light"
RGBWW = "light.living_room_rgbww_lights"
BED = "light.bed_light"  # hs + colour temperature
OFFICE_RGBW = "light.office_rgbw_lights"
ENTRANCE = "light.entrance_color_white_lights"  # hs + white
# Plain lights from the test platform.
HALL = "light.hall_light"  # on/off only
DESK = "light.desk_lamp"  # brightness only
GARAGE = "light.garage_light"  # on/off only, NOT exposed
BEDROOM_LAMP = "light.lamp"  # "Lamp", brightness only
LIVING_LAMP = "light.lamp_2"  # also "Lamp"
SENSOR = "sensor.kitchen_temperature"


class PlainLight(LightEntity):
    """A light with only the colour modes it is given."""

    _attr_should_poll = False

    def __init__(self, name: str, unique_id: str, mode: ColorMode) -> None:
        """A light that is off, with one colour mode (onoff or brightness)."""
        self._attr_name = name
        self._attr_unique_id = unique_id
        self._attr_supported_color_modes = {mode}
        self._attr_color_mode = mode
        self._attr_is_on = False
        self._attr_brightness = 255 if mode == ColorMode.BRIGHTNESS else None

    async def async_turn_on(self, **kwargs: Any) -> None:
        """Turn on, at the brightness asked for if any."""
        self._attr_is_on = True
        if ATTR_BRIGHTNESS in kwargs:
            self._attr_brightness = kwargs[ATTR_BRIGHTNESS]
        self.async_write_ha_state()

    async def async_turn_off(self, **kwargs: Any) -> None:
        """Turn off."""
        self._attr_is_on = False
        self.async_write_ha_state()


PLAIN_LIGHTS = (
    ("Hall light", "hall", ColorMode.ONOFF),
    ("Desk lamp", "desk", ColorMode.BRIGHTNESS),
    ("Garage light", "garage", ColorMode.ONOFF),
    ("Lamp", "lamp_bedroom", ColorMode.BRIGHTNESS),
    ("Lamp", "lamp_living", ColorMode.BRIGHTNESS),
)


@dataclass(frozen=True, slots=True)
class Home:
    """Ids of the test home's registries the tests refer to."""

    areas: dict[str, str]  # area name → area id
    satellite_id: str  # a device in the kitchen


def set_aliases(hass: HomeAssistant, entity_id: str, *aliases: str) -> None:
    """Give an entity aliases, keeping its own name matchable on every version.

    Up to 2026.8 aliases are a set of strings; from 2026.9 an ordered list in which a
    COMPUTED_NAME marker stands for the entity's own name.
    """
    computed_name = getattr(er, "COMPUTED_NAME", None)
    value: Any = [computed_name, *aliases] if computed_name is not None else set(aliases)
    er.async_get(hass).async_update_entity(entity_id, aliases=value)


def place(hass: HomeAssistant, entity_id: str, area_id: str) -> None:
    """Put an entity in an area: through its device if it has one.

    From 2026.9 an entity named after its device (the demo lights) may not have an area
    of its own.
    """
    entry = er.async_get(hass).async_get(entity_id)
    assert entry is not None
    if entry.device_id:
        dr.async_get(hass).async_update_device(entry.device_id, area_id=area_id)
    else:
        er.async_get(hass).async_update_entity(entity_id, area_id=area_id)


async def _setup_lights(hass: HomeAssistant) -> None:
    async def setup_platform(
        hass: HomeAssistant, config: Any, add_entities: Any, info: Any
    ) -> None:
        add_entities([PlainLight(name, uid, mode) for name, uid, mode in PLAIN_LIGHTS])

    # The plain lights come first: once `light` is set up, YAML platforms are not read.
    mock_platform(hass, "test.light", MockPlatform(async_setup_platform=setup_platform))
    assert await async_setup_component(hass, "light", {"light": {"platform": "test"}})
    # Only the demo's lights: its thirty other platforms (cameras, speech...) are not needed.
    with patch(
        "homeassistant.components.demo.COMPONENTS_WITH_CONFIG_ENTRY_DEMO_PLATFORM",
        [Platform.LIGHT],
    ):
        assert await async_setup_component(hass, "demo", {})
        await hass.async_block_till_done()


def _setup_places(hass: HomeAssistant) -> dict[str, str]:
    floors = fr.async_get(hass)
    ground = floors.async_create("Ground floor", aliases={"downstairs"}, level=0)
    upstairs = floors.async_create("Upstairs", level=1)
    area_registry = ar.async_get(hass)
    layout = {
        "Kitchen": ground.floor_id,
        "Living room": ground.floor_id,
        "Hallway": ground.floor_id,
        "Bedroom": upstairs.floor_id,
        "Office": upstairs.floor_id,
        "Garage": None,
    }
    return {
        name: area_registry.async_create(name, floor_id=floor_id).id
        for name, floor_id in layout.items()
    }


@pytest.fixture
async def home(hass: HomeAssistant) -> Home:
    """The test home, with every light exposed except the garage light."""
    assert await async_setup_component(hass, "homeassistant", {})
    await _setup_lights(hass)
    areas = _setup_places(hass)
    entities = er.async_get(hass)
    placement = {
        KITCHEN: "Kitchen",
        CEILING: "Living room",
        RGBWW: "Living room",
        LIVING_LAMP: "Living room",
        ENTRANCE: "Hallway",
        HALL: "Hallway",
        BED: "Bedroom",
        BEDROOM_LAMP: "Bedroom",
        OFFICE_RGBW: "Office",
        DESK: "Office",
        GARAGE: "Garage",
    }
    for entity_id, area in placement.items():
        place(hass, entity_id, areas[area])
    set_aliases(hass, CEILING, "big light")

    sensor = entities.async_get_or_create(
        "sensor",
        "test",
        "kitchen_temperature",
        suggested_object_id="kitchen_temperature",
        original_name="Kitchen temperature",
    )
    entities.async_update_entity(sensor.entity_id, area_id=areas["Kitchen"])
    hass.states.async_set(
        SENSOR,
        "21.5",
        {
            "friendly_name": "Kitchen temperature",
            "unit_of_measurement": "°C",
            "device_class": "temperature",
        },
    )
    for entity_id in (*placement, SENSOR):
        async_expose_entity(hass, ASSISTANT, entity_id, entity_id != GARAGE)

    satellite_entry = MockConfigEntry(domain="test")
    satellite_entry.add_to_hass(hass)
    satellite = dr.async_get(hass).async_get_or_create(
        config_entry_id=satellite_entry.entry_id,
        identifiers={("test", "kitchen_satellite")},
        name="Kitchen satellite",
    )
    dr.async_get(hass).async_update_device(satellite.id, area_id=areas["Kitchen"])
    await hass.async_block_till_done()
    return Home(areas=areas, satellite_id=satellite.id)


def tool_context(hass: HomeAssistant, device_id: str | None = None) -> ToolContext:
    """The context of a turn from the chat panel (or from a satellite, given its device)."""
    return ToolContext(
        hass=hass, context=Context(), language="en", device_id=device_id, assistant=ASSISTANT
    )


def bind(
    hass: HomeAssistant, specs: list[ToolSpec], device_id: str | None = None
) -> dict[str, BaseTool]:
    """The specs as the LangChain tools an agent gets, by name."""
    return {tool.name: tool for tool in as_langchain_tools(specs, tool_context(hass, device_id))}


async def run_agent(
    server: FakeOpenAIServer, tools: dict[str, BaseTool], text: str
) -> list[AgentEvent]:
    """One turn of the real agent runtime with these tools, against the fake model server."""
    runtime = AgentRuntime(
        ModelAccess("openai/gpt-test", server.api_key, server.api_base), InMemorySaver()
    )
    agent = AgentSettings(settings=ModelSettings(), max_tool_rounds=3)
    turn = Turn(
        thread_id="tools-test",
        text=text,
        system_prompt="You control a home.",
        tools=list(tools.values()),
    )
    return [event async for event in runtime.run_turn(agent, turn)]


def finished_calls(events: list[AgentEvent]) -> list[ToolCallFinished]:
    """The tool calls a turn ran, with their results."""
    return [event for event in events if isinstance(event, ToolCallFinished)]
