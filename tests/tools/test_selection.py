"""Only the tools that fit are offered: for each home shape, exactly the set that fits.

A tool needs an exposed entity of its domain; one whose job Home Assistant's intents,
offered in the same request, already do is left out (tools/selection.py says which and why).
Asserted on the tools the fake model server received.
"""

from __future__ import annotations

from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.const import (
    CONF_COMPACT_CONTEXT,
    CONF_LLM_HASS_API,
    CONF_TOOL_CATEGORIES,
)
from custom_components.langgraph_conversation.tools.media_intents import MEDIA_ACTIONS, MEDIA_TOOL
from custom_components.langgraph_conversation.tools.registry import ToolContext
from custom_components.langgraph_conversation.tools.selection import (
    LeftOut,
    choose_tools,
)
from fakes import FakeOpenAIServer
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import llm
from homeassistant.setup import async_setup_component

from ..conftest import agent_entity_id
from ..helpers import assist_api

FIND = "home_find_entities"
GET_STATE = "home_get_state"
LIGHT = "home_light_control"
MEDIA_CONTROL = "home_media_control"
MEDIA_PLAY = "home_media_play"
MEDIA_STATUS = "home_media_status"
WEATHER = "home_weather"
HISTORY = "home_history"
CAMERA = "home_camera_look"
WEB_SEARCH = "home_web_search"
AUTOMATION_TOOLS = ("home_automation_create", "home_automation_list", "home_automation_delete")
MEMORY = "memory"
OURS = {FIND, GET_STATE, LIGHT, MEDIA_CONTROL, MEDIA_PLAY, MEDIA_STATUS, WEATHER, HISTORY}

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
    "everything": OURS - {HISTORY},  # history needs the recorder, which these homes lack
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


# What each tool of ours is for, as the reasons below read it: its category, the domain
# it needs an exposed entity of (None: any), and whether Assist's intents do all it does.
PURPOSE: dict[str, tuple[str, str | None, bool]] = {
    FIND: ("entities", None, False),
    GET_STATE: ("entities", None, True),
    LIGHT: ("lights", "light", True),
    MEDIA_CONTROL: ("media", "media_player", True),
    MEDIA_PLAY: ("media", "media_player", False),
    MEDIA_STATUS: ("media", "media_player", True),
    WEATHER: ("weather", "weather", False),
    HISTORY: ("history", None, False),
}
ALL_CATEGORIES = ("entities", "lights", "media", "weather", "history")
# The integration each tool reads through: none of these homes loads the recorder, so
# the history tool is left out wherever it is chosen (tests/tools/test_history.py offers it).
NEEDS = {HISTORY: "recorder"}


def _expected_reasons(
    home: str, categories: tuple[str, ...], assist: bool, listed: bool
) -> dict[str, LeftOut]:
    """Why each tool of ours stays out of a turn in `home`, by the rules in
    tools/selection.py's docstring (the first reason that holds)."""
    domains = {entity_id.partition(".")[0] for entity_id, _ in HOMES[home]}
    reasons: dict[str, LeftOut] = {}
    for name, (category, domain, assist_does_it) in PURPOSE.items():
        if category not in categories:
            reasons[name] = LeftOut.NOT_CHOSEN
        elif name in NEEDS:
            reasons[name] = LeftOut.NOT_LOADED
        elif not (domain in domains if domain else domains):
            reasons[name] = LeftOut.NOTHING_EXPOSED
        elif assist and assist_does_it:
            reasons[name] = LeftOut.INTENTS_DO_IT
        elif listed and name == FIND:
            reasons[name] = LeftOut.LISTING_IN_PROMPT
    # The camera tool is no category: off unless the agent may look through cameras
    # (tests/tools/test_cameras.py has its other reasons).
    reasons[CAMERA] = LeftOut.CAMERAS_NOT_ALLOWED
    # Nor is web search: off unless the agent may search the web
    # (tests/tools/test_web_search.py has its other reasons).
    reasons[WEB_SEARCH] = LeftOut.WEB_SEARCH_NOT_ALLOWED
    # The automation tools neither: off unless the agent's owner turned them on
    # (tests/tools/test_automations.py).
    for name in AUTOMATION_TOOLS:
        reasons[name] = LeftOut.AUTOMATIONS_NOT_ALLOWED
    return reasons


# Agents that differ in what decides: Home Assistant's API, our categories, the compact
# context. Every home shape is tried with each.
AGENTS = [
    pytest.param(
        {
            CONF_LLM_HASS_API: [llm.LLM_API_ASSIST] if assist else [],
            CONF_TOOL_CATEGORIES: list(categories),
            CONF_COMPACT_CONTEXT: compact,
        },
        id=f"{'assist' if assist else 'no_api'}-{'+'.join(categories) or 'none'}"
        + ("-compact" if compact else ""),
    )
    for assist in (False, True)
    for categories in (ALL_CATEGORIES, ("media", "weather"), ())
    for compact in (False, True)
    if assist or not compact
]


@pytest.mark.parametrize("agent_overrides", AGENTS)
async def test_each_tool_of_ours_is_sent_or_left_out_for_its_reason(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    agent_overrides: dict[str, Any],
) -> None:
    """For every home shape and agent: the tools a real turn sends are the choice's, and
    each tool of ours that is not sent is left out for the reason the rules give."""
    assist = bool(agent_overrides[CONF_LLM_HASS_API])
    categories = tuple(agent_overrides[CONF_TOOL_CATEGORIES])
    # The prompt carries Assist's entity listing unless the compact context replaced it.
    listed = assist and not agent_overrides[CONF_COMPACT_CONTEXT]
    await _setup_domains(hass)
    for home in HOMES:
        ours, theirs = await _offered(hass, setup_integration, openai_server, home)
        api = await assist_api(hass) if assist else None
        choice = choose_tools(
            ToolContext(hass=hass, context=Context(), language="en"),
            api,
            categories,
            api.api_prompt if api is not None and listed else "",
        )
        expected = _expected_reasons(home, categories, assist, listed)
        assert dict(choice.left_out) == expected, home
        assert ours == set(PURPOSE) - set(expected) == choice.optional, home
        assert {tool.name for tool in choice.if_listing_dropped} == {
            name for name, reason in expected.items() if reason is LeftOut.LISTING_IN_PROMPT
        }, home
        # Home Assistant's tools as the turn sent them: converted, media intents as one
        # (the runtime adds its memory tool: this agent keeps memories).
        assert {tool.name.rsplit("__", 1)[-1] for tool in choice.api_tools} == theirs - {MEMORY}, (
            home
        )
        assert [tool.name for tool in choice.tools] == [
            *(tool.name for tool in choice.api_tools),
            *(tool.name for tool in choice.own_tools),
        ]
