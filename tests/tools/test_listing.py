"""The entity listing grouped by area: every fact of Home Assistant's listing, fewer tokens,
every instruction around it as Home Assistant wrote it."""

from __future__ import annotations

from pytest_homeassistant_custom_component.common import MockConfigEntry
import yaml

from custom_components.langgraph_conversation.tools.context import entity_listing
from custom_components.langgraph_conversation.tools.listing import (
    LEGEND,
    NO_AREA,
    dense_system_prompt,
)
from fakes import FakeOpenAIServer
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import area_registry as ar, entity_registry as er

from ..conftest import agent_entity_id
from ..helpers import assist_api, messages_of, text_of


def _add(hass: HomeAssistant, domain: str, name: str, area_id: str | None, aliases=()) -> str:
    registry = er.async_get(hass)
    object_id = name.lower().replace(" ", "_")
    entry = registry.async_get_or_create(
        domain, "test", object_id, suggested_object_id=object_id, original_name=name
    )
    registry.async_update_entity(entry.entity_id, area_id=area_id)
    if aliases:
        # 2026.10+ keeps the entity's own name among its aliases by a marker; 2026.2
        # lists the name before the aliases itself.
        computed = getattr(er, "COMPUTED_NAME", None)
        registry.async_update_entity(
            entry.entity_id,
            aliases=[computed, *aliases] if computed is not None else set(aliases),
        )
    hass.states.async_set(entry.entity_id, "off", {"friendly_name": name})
    async_expose_entity(hass, conversation.DOMAIN, entry.entity_id, True)
    return entry.entity_id


def _home(hass: HomeAssistant) -> None:
    areas = ar.async_get(hass)
    kitchen = areas.async_create("Kitchen", aliases={"Cooking area"}).id
    office = areas.async_create("Office").id
    _add(hass, "light", "Kitchen Light", kitchen, aliases=("the lamp",))
    _add(hass, "sensor", "Kitchen Temperature", kitchen)
    _add(hass, "switch", "Office Socket", office)
    _add(hass, "light", "Office Light", office)
    hass.states.async_set("weather.home", "sunny", {"friendly_name": "Home"})
    async_expose_entity(hass, conversation.DOMAIN, "weather.home", True)


async def _assist_prompt(hass: HomeAssistant) -> str:
    return (await assist_api(hass)).api_prompt


async def test_dense_listing_says_every_fact_of_home_assistants(hass: HomeAssistant) -> None:
    """Each entity's names (aliases included), domain and areas (area aliases included),
    as Home Assistant wrote them, on its area's line; nothing else of the prompt changes."""
    await _setup_assist(hass)
    _home(hass)
    prompt = await _assist_prompt(hass)
    listing = entity_listing(prompt)
    entities = yaml.safe_load(listing.partition("\n")[2])
    assert len(entities) == 5

    dense = dense_system_prompt(prompt)
    dense_listing = entity_listing(dense)
    # Still found as the listing (the window's trimming and the compact context replace it).
    assert dense_listing
    assert dense.replace(dense_listing, "") == prompt.replace(listing, "")
    # Home Assistant's header, and the legend that says the brackets hold the domain.
    assert dense_listing.splitlines()[0] == f"{listing.splitlines()[0]} {LEGEND}"
    lines = dense_listing.splitlines()[1:]
    assert lines == [
        "- Kitchen, Cooking area: Kitchen Light, the lamp (light); Kitchen Temperature (sensor)",
        "- Office: Office Light (light); Office Socket (switch)",
        f"- {NO_AREA}: Home (weather)",
    ]
    for entity in entities:
        line = next(line for line in lines if f"{entity['names']} ({entity['domain']})" in line)
        assert line.startswith(f"- {entity.get('areas', NO_AREA)}: ")


async def test_listing_the_dense_layout_cannot_say_stays_as_home_assistant_wrote_it(
    hass: HomeAssistant,
) -> None:
    """A name holding the layout's separators keeps Home Assistant's YAML listing."""
    await _setup_assist(hass)
    _home(hass)
    _add(hass, "light", "Lamp (old; broken)", None)
    prompt = await _assist_prompt(hass)
    assert dense_system_prompt(prompt) == prompt
    assert dense_system_prompt("No listing here.") == "No listing here."


async def test_the_request_carries_the_dense_listing(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """What reaches the model: the listing by area, Home Assistant's instructions kept."""
    _home(hass)
    await conversation.async_converse(
        hass, "Hi", None, Context(), agent_id=agent_entity_id(hass, setup_integration)
    )
    system = text_of(messages_of(openai_server.requests[0], "system")[0])
    assert "- Office: Office Light (light); Office Socket (switch)" in system
    assert "names: " not in system
    # How to lock and unlock, from Home Assistant's own prompt.
    assert "HassTurnOn to lock" in system


async def _setup_assist(hass: HomeAssistant) -> None:
    from homeassistant.setup import async_setup_component

    assert await async_setup_component(hass, "homeassistant", {})
    assert await async_setup_component(hass, "conversation", {})
