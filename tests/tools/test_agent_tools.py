"""Our own tools reach agents by category; the compact context shrinks the prompt."""

from __future__ import annotations

import json

import litellm
import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service

from custom_components.langgraph_conversation.const import (
    CONF_COMPACT_CONTEXT,
    CONF_LLM_HASS_API,
    CONF_TOOL_CATEGORIES,
)
from custom_components.langgraph_conversation.tools.assist_wording import (
    COMPACT_EXISTENCE,
    EXISTENCE,
)
from custom_components.langgraph_conversation.tools.context import COMPACT_INTRO, entity_listing
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import (
    area_registry as ar,
    config_validation as cv,
    entity_registry as er,
)

from ..conftest import agent_entity_id
from ..helpers import messages_of, text_of


def _tool_names(request: dict) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


def _add_home(hass: HomeAssistant, count: int) -> None:
    """`count` exposed lights spread over five areas."""
    areas = [ar.async_get(hass).async_create(f"Room {n}") for n in range(5)]
    registry = er.async_get(hass)
    for n in range(count):
        entry = registry.async_get_or_create(
            "light",
            "test",
            f"light_{n}",
            suggested_object_id=f"lamp_{n}",
            original_name=f"Lamp {n}",
        )
        registry.async_update_entity(entry.entity_id, area_id=areas[n % 5].id)
        hass.states.async_set(entry.entity_id, "off", {"friendly_name": f"Lamp {n}"})
        async_expose_entity(hass, conversation.DOMAIN, entry.entity_id, True)


async def test_default_agent_offers_our_tools_next_to_assist(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The default agent binds Home Assistant's tools and those of ours that fit, without
    name clashes (tests/tools/test_selection.py has every home shape); no entity search next to the
    entity listing in Home Assistant's prompt."""
    _add_home(hass, 3)
    await conversation.async_converse(
        hass, "Hi", None, Context(), agent_id=agent_entity_id(hass, setup_integration)
    )
    names = _tool_names(openai_server.requests[0])
    ours = {n for n in names if n.startswith("home_")}
    assert "home_find_entities" not in ours
    assert any(n.endswith("HassTurnOn") for n in names)
    assert len(names) == len(openai_server.requests[0]["tools"])


@pytest.mark.parametrize(
    "agent_overrides", [{CONF_TOOL_CATEGORIES: ["weather"], CONF_LLM_HASS_API: []}]
)
async def test_categories_limit_tools(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Only the chosen categories are offered."""
    _add_home(hass, 3)
    hass.states.async_set("weather.home", "sunny", {"friendly_name": "Home"})
    async_expose_entity(hass, conversation.DOMAIN, "weather.home", True)
    await conversation.async_converse(
        hass, "Hi", None, Context(), agent_id=agent_entity_id(hass, setup_integration)
    )
    ours = {n for n in _tool_names(openai_server.requests[0]) if n.startswith("home_")}
    assert ours == {"home_weather"}


# Without Home Assistant's API: home_get_state is left out next to its GetLiveContext.
@pytest.mark.parametrize("agent_overrides", [{CONF_LLM_HASS_API: []}])
async def test_home_tool_through_the_agent(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A call to one of our tools runs against Home Assistant and its result goes back."""
    _add_home(hass, 3)
    openai_server.add_tool_calls([ToolCall("home_get_state", {"name": "Lamp 1"})])
    openai_server.add_text("Lamp 1 is off.")
    result = await conversation.async_converse(
        hass, "Is lamp 1 on?", None, Context(), agent_id=agent_entity_id(hass, setup_integration)
    )
    assert result.response.speech["plain"]["speech"] == "Lamp 1 is off."
    state = json.loads(text_of(messages_of(openai_server.requests[1], "tool")[0]))
    assert state["entity_id"] == "light.lamp_1"
    assert state["state"] == "off"


# With Home Assistant's API the model turns a light on through Assist's HassTurnOn; without
# it, through our own light tool. Both kinds of tool are built once and copied per turn.
@pytest.mark.parametrize(
    ("agent_overrides", "tool", "arguments"),
    [
        ({}, "HassTurnOn", {"name": "Lamp {n}", "domain": ["light"]}),
        ({CONF_LLM_HASS_API: []}, "home_light_control", {"action": "turn_on", "name": "Lamp {n}"}),
    ],
)
async def test_each_turn_s_tools_act_for_that_turn_s_person(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    tool: str,
    arguments: dict,
) -> None:
    """Tools offered turn after turn are the same tools, each bound to its own turn: the
    light each person asked for is switched in that person's name (Home Assistant's
    service calls say who), never in the name of whoever asked before."""
    _add_home(hass, 3)
    calls = async_mock_service(hass, "light", "turn_on")
    agent_id = agent_entity_id(hass, setup_integration)
    people = [await hass.auth.async_create_user(f"Person {n}") for n in range(3)]
    # Home Assistant's name for its intent tool differs between versions.
    await conversation.async_converse(hass, "Hi", None, Context(), agent_id=agent_id)
    tool = next(name for name in _tool_names(openai_server.requests[0]) if name.endswith(tool))
    for n, person in enumerate(people):
        asked = {
            key: value.format(n=n) if isinstance(value, str) else value
            for key, value in arguments.items()
        }
        openai_server.add_tool_calls([ToolCall(tool, asked)])
        openai_server.add_text(f"Lamp {n} is on.")
        result = await conversation.async_converse(
            hass, f"Turn on lamp {n}", None, Context(user_id=person.id), agent_id=agent_id
        )
        assert result.response.speech["plain"]["speech"] == f"Lamp {n} is on."
    await hass.async_block_till_done()
    assert [(cv.ensure_list(call.data["entity_id"]), call.context.user_id) for call in calls] == [
        ([f"light.lamp_{n}"], person.id) for n, person in enumerate(people)
    ]


@pytest.mark.parametrize("agent_overrides", [{CONF_COMPACT_CONTEXT: True}])
async def test_compact_context_replaces_the_entity_listing(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The prompt holds a summary by area instead of every entity, and costs less."""
    _add_home(hass, 40)
    agent_id = agent_entity_id(hass, setup_integration)
    await conversation.async_converse(hass, "Hi", None, Context(), agent_id=agent_id)
    compact = text_of(messages_of(openai_server.requests[0], "system")[0])
    assert "Room 0: 8 lights" in compact
    assert "Lamp 17" not in compact
    # The model finds names by searching instead of reading the listing.
    assert "home_find_entities" in _tool_names(openai_server.requests[0])

    hass.config_entries.async_update_subentry(
        setup_integration,
        next(iter(setup_integration.subentries.values())),
        data={
            **next(iter(setup_integration.subentries.values())).data,
            CONF_COMPACT_CONTEXT: False,
        },
    )
    await hass.async_block_till_done()
    await conversation.async_converse(hass, "Hi", None, Context(), agent_id=agent_id)
    full = text_of(messages_of(openai_server.requests[1], "system")[0])
    assert "Lamp 17" in full
    assert "home_find_entities" not in _tool_names(openai_server.requests[1])
    compact_tokens = litellm.token_counter(model="gpt-4o", text=compact)
    full_tokens = litellm.token_counter(model="gpt-4o", text=full)
    print(f"system prompt tokens, 40 lights: full {full_tokens}, compact {compact_tokens}")
    # The full listing is already grouped by area (tools/listing.py); the summary still
    # says less than every name.
    assert compact_tokens < full_tokens
    # Only the listing was replaced, and the existence rule that pointed at it now points
    # at the entity search: every other line of this version's prompt (how to lock and
    # unlock, when to ask for an area, the live-context guidance) is kept, in order.
    listing = entity_listing(full)
    assert listing.startswith("Static Context:")
    assert "Lamp 17" in listing
    summary_lines = [line for line in COMPACT_INTRO.splitlines() if "{summary}" not in line]
    kept = [
        line
        for line in compact.splitlines()
        if line not in summary_lines and not line.startswith("The home, by area")
    ]
    assert EXISTENCE in full
    assert EXISTENCE not in compact
    assert kept == full.replace(listing, "").replace(EXISTENCE, COMPACT_EXISTENCE).splitlines()
