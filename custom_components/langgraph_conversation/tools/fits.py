"""What a turn's home and API hold, for choosing the tools that fit (registry.fitting).

Which of our tools stay next to Assist's own, and why:

home_find_entities      kept: search by words, typos, aliases, areas and floors; Assist
                        can only list everything (GetLiveContext) or act on exact names.
                        Left out while Home Assistant's prompt carries the entity listing
                        (the model reads names, aliases and areas there): offered with the
                        compact context, without the API, or when the window's trimming
                        replaces the listing (agent/window.py)
home_get_state          left out when GetLiveContext is offered (it reads states too)
home_light_control      left out when HassTurnOn, HassTurnOff and HassLightSet are offered
home_media_control      left out when Assist's pause, resume, next, previous and volume
                        intents are offered
home_media_play         kept: searches a player's library and plays the best match
home_media_status       left out when GetLiveContext is offered (it shows players' states)
home_weather            kept: Assist has no forecast (the same tool says the weather now,
                        one tool costing fewer tokens than two)

Each is also left out when no exposed entity of its domain exists.
"""

from __future__ import annotations

from homeassistant.components.homeassistant import async_should_expose
from homeassistant.core import HomeAssistant
from homeassistant.helpers import llm

# Our tools that only help when the prompt carries no entity listing (LISTING_COVERS:
# what the listing already tells the model).
LISTING_COVERS = frozenset({"home_find_entities"})


def exposed_domains(hass: HomeAssistant, assistant: str) -> set[str]:
    """The domains with at least one entity exposed to `assistant`."""
    found: set[str] = set()
    for entity_id in hass.states.async_entity_ids():
        domain = entity_id.partition(".")[0]
        if domain not in found and async_should_expose(hass, assistant, entity_id):
            found.add(domain)
    return found


def exposed_device_classes(hass: HomeAssistant, assistant: str) -> set[str]:
    """The device classes of the entities exposed to `assistant`."""
    return {
        str(device_class)
        for state in hass.states.async_all()
        if (device_class := state.attributes.get("device_class"))
        and async_should_expose(hass, assistant, state.entity_id)
    }


def offered_intents(api: llm.APIInstance | None) -> set[str]:
    """The names of the API's tools without an integration prefix ("intent__HassTurnOn"
    on 2026.10 and later is "HassTurnOn", as it is on 2026.2)."""
    if api is None:
        return set()
    return {tool.name.rsplit("__", 1)[-1] for tool in api.tools}
