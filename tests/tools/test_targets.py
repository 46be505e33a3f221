"""Which entities a request means: names, aliases, areas, floors, the satellite's room."""

from __future__ import annotations

import pytest

from custom_components.langgraph_conversation.agent.errors import ToolFailure
from custom_components.langgraph_conversation.tools.targets import resolve_targets
from homeassistant.core import HomeAssistant
from homeassistant.helpers import area_registry as ar, device_registry as dr

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
    SENSOR,
    Home,
    tool_context,
)

LIGHT = {"light"}


async def _ids(hass: HomeAssistant, device_id: str | None = None, **kwargs) -> set[str]:
    states = await resolve_targets(tool_context(hass, device_id), domains=LIGHT, **kwargs)
    return {state.entity_id for state in states}


async def _failure(hass: HomeAssistant, device_id: str | None = None, **kwargs) -> dict:
    with pytest.raises(ToolFailure) as caught:
        await resolve_targets(tool_context(hass, device_id), **{"domains": LIGHT, **kwargs})
    return caught.value.data


@pytest.mark.usefixtures("home")
async def test_name_alias_area_floor(hass: HomeAssistant) -> None:
    """Names and aliases pick one light; areas and floors (and their aliases) pick many."""
    assert await _ids(hass, name="kitchen lights") == {KITCHEN}
    assert await _ids(hass, name="Big Light") == {CEILING}
    assert await _ids(hass, name=HALL) == {HALL}  # an entity id works as a name
    assert await _ids(hass, area="Living room") == {CEILING, RGBWW, LIVING_LAMP}
    assert await _ids(hass, floor="Upstairs") == {BED, BEDROOM_LAMP, OFFICE_RGBW, DESK}
    assert await _ids(hass, floor="downstairs") == {
        KITCHEN,
        CEILING,
        RGBWW,
        LIVING_LAMP,
        ENTRANCE,
        HALL,
    }
    assert await _ids(hass, name="Lamp", area="Bedroom") == {BEDROOM_LAMP}
    # Blank strings are what models send for "not given".
    assert await _ids(hass, name="", area="Office", floor=" ") == {OFFICE_RGBW, DESK}


@pytest.mark.usefixtures("home")
async def test_domains_limit_and_any_domain(hass: HomeAssistant) -> None:
    """Only the asked domains match; an empty set means any domain."""
    assert await _failure(hass, name="Kitchen temperature") == {
        "error": "no_match",
        "error_text": "No light named 'Kitchen temperature' was found.",
    }
    states = await resolve_targets(tool_context(hass), name="Kitchen temperature", domains=set())
    assert [state.entity_id for state in states] == [SENSOR]


@pytest.mark.usefixtures("home")
async def test_everything_exposed_without_target(hass: HomeAssistant) -> None:
    """No name, area or floor and no satellite: every exposed light, never the hidden one."""
    found = await _ids(hass)
    assert GARAGE not in found
    assert len(found) == 10


async def test_satellite_room_preferred(hass: HomeAssistant, home: Home) -> None:
    """From a satellite, no target means its room; a named target still goes anywhere."""
    assert await _ids(hass, home.satellite_id) == {KITCHEN}
    assert await _ids(hass, home.satellite_id, name="Bed Light") == {BED}
    assert await _ids(hass, home.satellite_id, area="Office") == {OFFICE_RGBW, DESK}


async def test_satellite_room_without_lights_falls_back(hass: HomeAssistant, home: Home) -> None:
    """A satellite whose room has no such entity reaches the rest of the home."""
    attic = ar.async_get(hass).async_create("Attic")
    dr.async_get(hass).async_update_device(home.satellite_id, area_id=attic.id)
    assert len(await _ids(hass, home.satellite_id)) == 10


async def test_satellite_room_disambiguates_names(hass: HomeAssistant, home: Home) -> None:
    """Two lights called "Lamp": the satellite's room decides, as in Assist."""
    dr.async_get(hass).async_update_device(home.satellite_id, area_id=home.areas["Bedroom"])
    assert await _ids(hass, home.satellite_id, name="Lamp") == {BEDROOM_LAMP}


@pytest.mark.usefixtures("home")
async def test_unexposed_is_not_available(hass: HomeAssistant) -> None:
    """A hidden light is refused as unavailable, by name, entity id or its area."""
    for target in ({"name": "Garage light"}, {"name": GARAGE}, {"area": "Garage"}):
        failure = await _failure(hass, **target)
        assert failure["error"] == "not_exposed"
        assert "available to the assistant (not exposed" in failure["error_text"]
        assert set(failure) == {"error", "error_text"}


@pytest.mark.usefixtures("home")
async def test_shared_name_is_ambiguous(hass: HomeAssistant) -> None:
    """A name two lights share is ambiguous: the candidates come back to ask about."""
    failure = await _failure(hass, name="lamp")
    assert failure["error"] == "ambiguous"
    assert "Lamp in Bedroom" in failure["error_text"]
    assert "Lamp in Living room" in failure["error_text"]
    assert sorted(failure["candidates"], key=lambda c: c["entity_id"]) == [
        {"entity_id": BEDROOM_LAMP, "name": "Lamp", "area": "Bedroom"},
        {"entity_id": LIVING_LAMP, "name": "Lamp", "area": "Living room"},
    ]


@pytest.mark.usefixtures("home")
async def test_single_target_with_several_matches(hass: HomeAssistant) -> None:
    """When one entity is needed, an area with several is ambiguous."""
    failure = await _failure(hass, area="Office", single=True)
    assert failure["error"] == "ambiguous"
    assert {c["entity_id"] for c in failure["candidates"]} == {OFFICE_RGBW, DESK}
    states = await resolve_targets(tool_context(hass), name="Desk lamp", domains=LIGHT, single=True)
    assert [state.entity_id for state in states] == [DESK]


async def test_single_target_in_satellite_room(hass: HomeAssistant, home: Home) -> None:
    """Several in the satellite's room stay ambiguous (not widened to the whole home)."""
    dr.async_get(hass).async_update_device(home.satellite_id, area_id=home.areas["Office"])
    failure = await _failure(hass, home.satellite_id, single=True)
    assert failure["error"] == "ambiguous"
    assert {c["entity_id"] for c in failure["candidates"]} == {OFFICE_RGBW, DESK}


@pytest.mark.usefixtures("home")
async def test_unknown_places_and_names(hass: HomeAssistant) -> None:
    """Unknown areas list the real ones; unknown floors and names say so."""
    failure = await _failure(hass, area="Cellar")
    assert failure == {
        "error": "no_match",
        "error_text": (
            "There is no area 'Cellar'. "
            "Areas: Bedroom, Garage, Hallway, Kitchen, Living room, Office."
        ),
    }
    assert (await _failure(hass, floor="Roof"))["error_text"] == "There is no floor 'Roof'."
    assert (await _failure(hass, name="Disco ball"))["error"] == "no_match"
