"""Only the tools that fit are offered: for each home shape, exactly the set that fits.

A tool needs an exposed entity of its domain; one whose job Home Assistant's intents,
offered in the same request, already do is left out (tools/fits.py says which and why).
Asserted on the tools the fake model server received.
"""

from __future__ import annotations

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.const import CONF_COMPACT_CONTEXT, CONF_LLM_HASS_API
from custom_components.langgraph_conversation.tools.media_intents import MEDIA_ACTIONS, MEDIA_TOOL
from fakes import FakeOpenAIServer
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import llm
from homeassistant.setup import async_setup_component

from ..conftest import agent_entity_id

FIND = "home_find_entities"
GET_STATE = "home_get_state"
LIGHT = "home_light_control"
MEDIA_CONTROL = "home_media_control"
MEDIA_PLAY = "home_media_play"
MEDIA_STATUS = "home_media_status"
WEATHER = "home_weather"
OURS = {FIND, GET_STATE, LIGHT, MEDIA_CONTROL, MEDIA_PLAY, MEDIA_STATUS, WEATHER}

# Home shapes: the exposed entities (domain.object_id, state).
HOMES: dict[str, list[tuple[str, str]]] = {
    "nothing exposed": [],
    "lights and sensors, no weather, no media": [
        ("light.kitchen", "on"),
        ("sensor.hall_temperature", "21"),
        ("switch.fan", "off"),
    ],
    "weather only": [("weather.home", "sunny")],
    "media only": [("media_player.tv", "playing")],
    "everything": [
        ("light.kitchen", "on"),
        ("media_player.tv", "playing"),
        ("weather.home", "sunny"),
        ("sensor.hall_temperature", "21"),
    ],
}

# Without Home Assistant's API: what each home's domains call for.
WITHOUT_API = {
    "nothing exposed": set(),
    "lights and sensors, no weather, no media": {FIND, GET_STATE, LIGHT},
    "weather only": {FIND, GET_STATE, WEATHER},
    "media only": {FIND, GET_STATE, MEDIA_CONTROL, MEDIA_PLAY, MEDIA_STATUS},
    "everything": OURS,
}
# With Assist: only what Assist's intents cannot do stays (media search and play, the
# weather tool for its forecast). Entity search is left out: Assist's prompt lists every
# exposed entity.
WITH_API = {
    "nothing exposed": set(),
    "lights and sensors, no weather, no media": set(),
    "weather only": {WEATHER},
    "media only": {MEDIA_PLAY},
    "everything": {MEDIA_PLAY, WEATHER},
}


async def _offered(
    hass: HomeAssistant, entry: MockConfigEntry, server: FakeOpenAIServer, home: str
) -> tuple[set[str], set[str]]:
    """(our tools, Home Assistant's tool names) offered in a turn in this home."""
    for entity_id in hass.states.async_entity_ids():
        hass.states.async_remove(entity_id)
    for entity_id, state in HOMES[home]:
        hass.states.async_set(entity_id, state, {"friendly_name": entity_id.split(".")[1]})
        async_expose_entity(hass, conversation.DOMAIN, entity_id, True)
    server.add_text("Fine.")
    await conversation.async_converse(
        hass, "Hi", None, Context(), agent_id=agent_entity_id(hass, entry)
    )
    names = {tool["function"]["name"] for tool in server.requests[-1].get("tools") or []}
    return names & OURS, {name.rsplit("__", 1)[-1] for name in names - OURS}


async def _setup_domains(hass: HomeAssistant) -> None:
    """The integrations whose intents Assist offers for these domains."""
    for domain in ("light", "media_player", "weather"):
        assert await async_setup_component(hass, domain, {})


@pytest.mark.parametrize("agent_overrides", [{CONF_LLM_HASS_API: []}])
async def test_without_home_assistants_api_the_domains_decide(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """No weather tool without a weather entity, no media tool without a player, nothing
    to search in a home with nothing exposed."""
    await _setup_domains(hass)
    for home, expected in WITHOUT_API.items():
        ours, _ = await _offered(hass, setup_integration, openai_server, home)
        assert ours == expected, home


@pytest.mark.parametrize("agent_overrides", [{CONF_LLM_HASS_API: [llm.LLM_API_ASSIST]}])
async def test_with_assist_no_tool_duplicates_an_intent(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Next to Assist's intents only what they cannot do is offered; Assist's media
    intents as one tool."""
    await _setup_domains(hass)
    for home, expected in WITH_API.items():
        ours, theirs = await _offered(hass, setup_integration, openai_server, home)
        assert ours == expected, (home, sorted(theirs))
        if LIGHT not in ours and "light" in home:
            assert {"HassTurnOn", "HassTurnOff", "HassLightSet"} <= theirs
        # Assist's media intents come as one tool (tools/media_intents.py), with a player.
        assert not theirs & set(MEDIA_ACTIONS), (home, sorted(theirs))
        if home in ("media only", "everything"):
            assert MEDIA_TOOL.rsplit("__", 1)[-1] in theirs, (home, sorted(theirs))


@pytest.mark.parametrize(
    "agent_overrides", [{CONF_LLM_HASS_API: [llm.LLM_API_ASSIST], CONF_COMPACT_CONTEXT: True}]
)
async def test_compact_context_brings_entity_search(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The compact context replaces the listing, so the model searches the home instead."""
    await _setup_domains(hass)
    for home, expected in WITH_API.items():
        ours, theirs = await _offered(hass, setup_integration, openai_server, home)
        if home != "nothing exposed":
            expected = expected | {FIND}
        assert ours == expected, (home, sorted(theirs))
