"""LangGraph Conversation: a LangGraph agent as a Home Assistant conversation agent."""

from __future__ import annotations

import asyncio
from functools import partial
import logging

from homeassistant.config_entries import ConfigEntryState
from homeassistant.const import EVENT_HOMEASSISTANT_STOP, Platform
from homeassistant.core import Event, HomeAssistant
from homeassistant.helpers import config_validation as cv
from homeassistant.helpers.typing import ConfigType

# Nothing here imports the agent's libraries (LiteLLM, LangGraph, the OpenAI SDK): the
# entry's stack loads them in the background once Home Assistant has started (stack.py).
from .agent.models import ModelAccess, provider_of
from .const import (
    CONF_API_BASE,
    CONF_API_KEY,
    CONF_MODEL,
    DOMAIN,
    SUBENTRY_CONVERSATION,
)
from .profile import agent_roles, without_old_ollama_defaults
from .runtime_entry import LangGraphConfigEntry
from .services import async_register_services
from .stack import EntryStack, async_start_stack, library_loaded

_LOGGER = logging.getLogger(__name__)

PLATFORMS: list[Platform] = [Platform.AI_TASK, Platform.CONVERSATION]
CONFIG_SCHEMA = cv.config_entry_only_config_schema(DOMAIN)


async def async_setup(hass: HomeAssistant, config: ConfigType) -> bool:
    """Register the actions; everything else lives in config entries."""
    async_register_services(hass)
    return True


async def async_migrate_entry(hass: HomeAssistant, entry: LangGraphConfigEntry) -> bool:
    """Bring an entry stored by an older version up to date.

    1.1 → 1.2: Ollama agents (native API) drop the temperature, answer length and
    thinking every such agent stored before the defaults became Home Assistant's own
    (profile.without_old_ollama_defaults); values the user chose stay.
    """
    if entry.version > 1:
        return False  # stored by a newer version of the integration
    if entry.minor_version < 2 and provider_of(entry.data[CONF_MODEL]) == "ollama_chat":
        for subentry in entry.subentries.values():
            if subentry.subentry_type != SUBENTRY_CONVERSATION:
                continue
            options = without_old_ollama_defaults(subentry.data)
            if options != subentry.data:
                hass.config_entries.async_update_subentry(entry, subentry, data=options)
    hass.config_entries.async_update_entry(entry, minor_version=2)
    return True


async def async_setup_entry(hass: HomeAssistant, entry: LangGraphConfigEntry) -> bool:
    """Create the entry's agents; their stack is built in the background (stack.py).

    The entities exist at once (Home Assistant lists them, the forms work); a turn that
    arrives before the build has ended waits for it.
    """
    access = ModelAccess(
        model=entry.data[CONF_MODEL],
        api_key=entry.data.get(CONF_API_KEY),
        api_base=entry.data.get(CONF_API_BASE),
    )
    # LiteLLM imports provider modules on its first call: the build warms up the agents'
    # fast, fallback and vision models too (other providers, local models).
    entry.runtime_data = EntryStack(hass, entry, access, _all_accesses(entry, access))
    await hass.config_entries.async_forward_entry_setups(entry, PLATFORMS)
    async_start_stack(hass, entry)
    entry.async_on_unload(entry.add_update_listener(_async_reload))
    entry.async_on_unload(
        hass.bus.async_listen_once(EVENT_HOMEASSISTANT_STOP, partial(_async_stop, hass))
    )
    return True


def _all_accesses(entry: LangGraphConfigEntry, access: ModelAccess) -> list[ModelAccess]:
    """The entry's model and every distinct model its agents use for a role."""
    accesses = [access]
    for subentry in entry.subentries.values():
        roles = agent_roles(access, subentry.data)
        accesses += [
            role
            for role in (roles.fast, roles.fallback, roles.vision)
            if role and role not in accesses
        ]
    return accesses


async def _async_stop(hass: HomeAssistant, event: Event) -> None:
    """Home Assistant stops: running turns of every entry end (or are cancelled after
    their grace), then LiteLLM's clients and threads close so shutdown is quick.

    The one shutdown path: closing the clients first would cut answers still streaming.
    Each entry's listener runs it; ending turns twice and closing twice are harmless.
    """
    await asyncio.gather(
        *(entry.runtime_data.aclose() for entry in hass.config_entries.async_loaded_entries(DOMAIN))
    )
    await _async_release_shared_clients()


async def _async_reload(hass: HomeAssistant, entry: LangGraphConfigEntry) -> None:
    """Agent (subentry), access or storage option changes rebuild everything.

    The storage options (retention, embedding model) are combined with other entries'
    again when the entry sets up (persistence.async_acquire_storage).
    """
    await hass.config_entries.async_reload(entry.entry_id)


async def async_unload_entry(hass: HomeAssistant, entry: LangGraphConfigEntry) -> bool:
    """Unload the agents; the last entry also closes LiteLLM's shared clients."""
    if not await hass.config_entries.async_unload_platforms(entry, PLATFORMS):
        return False
    # Turns still running end (or are cancelled), and memory extraction finishes, while
    # the files are open.
    await entry.runtime_data.aclose()
    await entry.runtime_data.async_release_storage()
    others_loaded = any(
        other.entry_id != entry.entry_id and other.state is ConfigEntryState.LOADED
        for other in hass.config_entries.async_entries(DOMAIN)
    )
    if not others_loaded:
        await _async_release_shared_clients()
    return True


async def _async_release_shared_clients() -> None:
    """Close LiteLLM's shared clients, if this process has loaded LiteLLM at all."""
    if not library_loaded():
        return
    from .agent.models import async_release_shared_clients  # loaded by the stack

    await async_release_shared_clients()
