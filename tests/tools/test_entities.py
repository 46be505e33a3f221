"""Entity search, one entity's state, the compact home summary, and every spec's schema."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.tools import BaseTool
import litellm
import pytest

from custom_components.langgraph_conversation.agent.errors import ToolFailure
from custom_components.langgraph_conversation.tools import entities, lights
from custom_components.langgraph_conversation.tools.entities import SPECS, home_summary
from custom_components.langgraph_conversation.tools.schema import sanitize_schema
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import (
    area_registry as ar,
    entity_registry as er,
    floor_registry as fr,
    llm,
)
from homeassistant.setup import async_setup_component

from .conftest import (
    ASSISTANT,
    BED,
    BEDROOM_LAMP,
    CEILING,
    DESK,
    GARAGE,
    KITCHEN,
    LIVING_LAMP,
    SENSOR,
    Home,
    bind,
    finished_calls,
    run_agent,
    set_aliases,
)


@pytest.fixture
def tools(hass: HomeAssistant, home: Home) -> dict[str, BaseTool]:
    """The entity tools as a chat-panel turn gets them."""
    return bind(hass, SPECS)


async def _find(tools: dict[str, BaseTool], **arguments: Any) -> list[str]:
    result = await tools["home_find_entities"].ainvoke(arguments)
    return [entity["entity_id"] for entity in result["entities"]]


@pytest.mark.parametrize("spec", [*entities.SPECS, *lights.SPECS], ids=lambda spec: spec.name)
def test_specs_are_provider_safe(spec: Any) -> None:
    """Each schema passes the sanitizer unchanged; and categories as designed."""
    assert sanitize_schema(spec.parameters) == spec.parameters
    assert spec.parameters["type"] == "object"
    assert spec.category in {"entities", "lights"}
    assert spec.name.startswith("home_")


async def test_find_ranks_exact_before_alias_before_substring(
    tools: dict[str, BaseTool],
) -> None:
    """Exact names first, then aliases, then names that merely contain the words."""
    found = await _find(tools, query="lamp")
    assert set(found[:2]) == {BEDROOM_LAMP, LIVING_LAMP}  # exactly "Lamp"
    assert found[2] == DESK  # "Desk lamp" contains it
    assert (await _find(tools, query="Big light"))[0] == CEILING  # alias


async def test_find_by_area_floor_kind_and_typo(tools: dict[str, BaseTool]) -> None:
    """A room, a floor, a kind of thing, all words, and misspellings all find entities."""
    assert set(await _find(tools, query="bedroom")) == {BED, BEDROOM_LAMP}
    assert set(await _find(tools, query="upstairs")) == {
        BED,
        BEDROOM_LAMP,
        DESK,
        "light.office_rgbw_lights",
    }
    assert set(await _find(tools, query="kitchen light")) == {KITCHEN}
    assert (await _find(tools, query="kitchn lihgts"))[0] == KITCHEN
    assert (await _find(tools, query="temprature"))[0] == SENSOR
    assert len(await _find(tools, query="lights", limit=50)) == 10


async def test_find_filters_and_limits(tools: dict[str, BaseTool]) -> None:
    """Domain and area narrow the search; the count tells how many matched in all."""
    result = await tools["home_find_entities"].ainvoke({"domain": "light", "limit": 3})
    assert result["count"] == 10
    assert len(result["entities"]) == 3
    assert set(await _find(tools, domain="light", area="Office")) == {
        DESK,
        "light.office_rgbw_lights",
    }
    assert await _find(tools, query="temperature", domain="light") == []


async def test_find_describes_entities(tools: dict[str, BaseTool]) -> None:
    """Results carry area, floor, aliases and the attributes people ask about."""
    result = await tools["home_find_entities"].ainvoke({"query": "kitchen"})
    by_id = {entity["entity_id"]: entity for entity in result["entities"]}
    assert by_id[SENSOR] == {
        "entity_id": SENSOR,
        "name": "Kitchen temperature",
        "domain": "sensor",
        "state": "21.5",
        "area": "Kitchen",
        "floor": "Ground floor",
        "unit_of_measurement": "°C",
        "device_class": "temperature",
    }
    assert by_id[KITCHEN]["brightness_pct"] == 71
    ceiling = (await tools["home_find_entities"].ainvoke({"query": "big light"}))["entities"][0]
    assert ceiling["aliases"] == ["big light"]


async def test_find_never_shows_unexposed(tools: dict[str, BaseTool]) -> None:
    """The hidden garage light is found by no query."""
    for query in ("garage", "Garage light", GARAGE):
        result = await tools["home_find_entities"].ainvoke({"query": query})
        assert GARAGE not in {entity["entity_id"] for entity in result["entities"]}
    assert (await tools["home_find_entities"].ainvoke({"query": "garage"}))["count"] == 0


async def test_get_state(tools: dict[str, BaseTool]) -> None:
    """One entity by name, alias or entity id: state, place and attributes."""
    state = await tools["home_get_state"].ainvoke({"name": "Kitchen temperature"})
    assert state["state"] == "21.5"
    assert state["area"] == "Kitchen"
    assert state["attributes"] == {"unit_of_measurement": "°C", "device_class": "temperature"}
    assert "unit_of_measurement" not in state  # attributes are not repeated at the top
    assert "last_changed" in state
    by_alias = await tools["home_get_state"].ainvoke({"name": "big light"})
    assert by_alias["entity_id"] == CEILING
    assert by_alias["attributes"]["color_mode"] == "color_temp"
    assert by_alias["brightness_pct"] == 71
    assert (await tools["home_get_state"].ainvoke({"name": KITCHEN}))["state"] == "on"
    by_area = await tools["home_get_state"].ainvoke({"name": "Lamp", "area": "Bedroom"})
    assert by_area["entity_id"] == BEDROOM_LAMP


async def test_get_state_refusals(tools: dict[str, BaseTool]) -> None:
    """Unexposed entities are refused without their state; shared names ask back."""
    for name in ("Garage light", GARAGE):
        with pytest.raises(ToolFailure) as caught:
            await tools["home_get_state"].ainvoke({"name": name})
        assert caught.value.data["error"] == "not_exposed"
        assert set(caught.value.data) == {"error", "error_text"}
    with pytest.raises(ToolFailure) as caught:
        await tools["home_get_state"].ainvoke({"name": "Lamp"})
    assert caught.value.data["error"] == "ambiguous"
    with pytest.raises(ToolFailure) as caught:
        await tools["home_get_state"].ainvoke({"name": " "})
    assert caught.value.data["error"] == "invalid_arguments"


async def test_entity_tools_through_the_agent(
    hass: HomeAssistant, home: Home, openai_server: FakeOpenAIServer
) -> None:
    """The model searches, reads a state and is refused a hidden one, via the runtime."""
    openai_server.add_tool_calls([ToolCall("home_find_entities", {"query": "temprature"})])
    openai_server.add_tool_calls(
        [
            ToolCall("home_get_state", {"name": "Kitchen temperature"}),
            ToolCall("home_get_state", {"name": "Garage light"}),
        ]
    )
    openai_server.add_text("It is 21.5 °C in the kitchen.")
    events = await run_agent(openai_server, bind(hass, SPECS), "How warm is the kitchen?")

    found, kitchen, garage = finished_calls(events)
    assert found.result["entities"][0]["entity_id"] == SENSOR
    assert kitchen.result["state"] == "21.5"
    assert garage.is_error
    assert garage.result["error"] == "not_exposed"
    # What the model read: the sensor's state, and for the hidden light only the refusal.
    kitchen_message, garage_message = openai_server.requests[-1]["messages"][-2:]
    assert json.loads(kitchen_message["content"])["state"] == "21.5"
    assert json.loads(garage_message["content"]) == {
        "error": "not_exposed",
        "error_text": (
            "No entity named 'Garage light' is available to the assistant (not exposed to it)."
        ),
    }


@pytest.mark.usefixtures("home")
def test_summary_of_the_test_home(hass: HomeAssistant) -> None:
    """Floors in order, areas with counts per kind; the hidden garage is left out."""
    assert home_summary(hass, ASSISTANT) == (
        "Ground floor — Hallway: 2 lights; Kitchen: light, sensor; Living room: 3 lights\n"
        "Upstairs — Bedroom: 2 lights; Office: 2 lights"
    )


async def test_summary_without_places(hass: HomeAssistant) -> None:
    """Entities outside any area are counted at the end; an empty home says so."""
    assert await async_setup_component(hass, "homeassistant", {})
    assert home_summary(hass, ASSISTANT) == "No entities are exposed to the assistant."
    for object_id in ("a", "b"):
        hass.states.async_set(f"switch.{object_id}", "off")
        async_expose_entity(hass, ASSISTANT, f"switch.{object_id}", True)
    assert home_summary(hass, ASSISTANT) == "No area: 2 switches"


# A generated home: (domain, how many, name, extra state attributes).
_GENERATED_KINDS = (
    ("light", 40, "Light", {"brightness": 128, "supported_color_modes": ["brightness"]}),
    ("switch", 15, "Plug", {}),
    ("sensor", 20, "Temperature", {"unit_of_measurement": "°C", "device_class": "temperature"}),
    ("cover", 10, "Blind", {"current_position": 40}),
    ("media_player", 5, "Speaker", {"volume_level": 0.3}),
    ("binary_sensor", 5, "Window", {"device_class": "window"}),
    ("climate", 5, "Thermostat", {"current_temperature": 20.5, "temperature": 21}),
)
_GENERATED_AREAS = (
    "Kitchen",
    "Living room",
    "Dining room",
    "Hallway",
    "Bedroom",
    "Kids room",
    "Office",
    "Bathroom",
    "Garage",
    "Garden",
)


def _generate_home(hass: HomeAssistant) -> int:
    """100 exposed entities over 10 areas on 3 floors, every third with two aliases."""
    floors = fr.async_get(hass)
    floor_ids = [
        floors.async_create(name, level=i).floor_id
        for i, name in enumerate(("Ground floor", "First floor", "Outside"))
    ]
    areas = ar.async_get(hass)
    area_ids = [
        areas.async_create(name, floor_id=floor_ids[i * 3 // len(_GENERATED_AREAS)]).id
        for i, name in enumerate(_GENERATED_AREAS)
    ]
    registry = er.async_get(hass)
    count = 0
    for domain, amount, label, attributes in _GENERATED_KINDS:
        for number in range(amount):
            area = _GENERATED_AREAS[count % len(_GENERATED_AREAS)]
            name = f"{area} {label} {number + 1}"
            entry = registry.async_get_or_create(
                domain, "test", f"{domain}_{number}", original_name=name
            )
            registry.async_update_entity(entry.entity_id, area_id=area_ids[count % len(area_ids)])
            if count % 3 == 0:
                set_aliases(hass, entry.entity_id, f"{label} {count}", f"my {label.lower()}")
            hass.states.async_set(entry.entity_id, "on", {"friendly_name": name, **attributes})
            async_expose_entity(hass, ASSISTANT, entry.entity_id, True)
            count += 1
    return count


async def test_summary_is_smaller_than_assists_entity_listing(hass: HomeAssistant) -> None:
    """For 100 exposed entities the compact summary costs fewer tokens than Assist's prompt."""
    for component in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, component, {})
    assert _generate_home(hass) == 100
    api = await llm.async_get_api(
        hass,
        llm.LLM_API_ASSIST,
        llm.LLMContext(
            platform="test",
            context=Context(),
            language="en",
            assistant=conversation.DOMAIN,
            device_id=None,
        ),
    )
    summary = home_summary(hass, ASSISTANT)
    full_tokens = litellm.token_counter(model="gpt-4o", text=api.api_prompt)
    compact_tokens = litellm.token_counter(model="gpt-4o", text=summary)
    print(f"100 exposed entities: Assist API prompt {full_tokens} tokens, summary {compact_tokens}")
    assert "Kitchen: " in summary
    assert compact_tokens < full_tokens
