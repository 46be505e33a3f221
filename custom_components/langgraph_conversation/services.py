"""Actions for memories and conversations (registered once, in async_setup).

Memories: a signed-in user manages their own (those of their person and of their user id,
agent/memory/memories.py) and the household's; another person's
memories, and clearing the household's, need an administrator. Automations and scripts
run without a user and may do everything, like Home Assistant's own admin actions.
Conversations hold what people said, so exporting or clearing one needs an administrator.
A conversation id is resolved exactly as a turn resolves it (agent/memory/threads.py): the
thread of that conversation for the caller (their user, no device), or for the device
and/or user the call names, following the same links.
Reading an agent's documents again (reindex_knowledge) needs an administrator too, and so
does copying all conversations and memories between storages (migrate_storage).

A `user_id` must name a Home Assistant user, or one whose memories are still stored (a
removed user's, so they can still be listed and cleared): anything else (a name, a typo,
a template that rendered wrong, "a.b") is a mistake, reported as such rather than answered
with an empty list or saved where no one will ever read it. Texts are cleaned of invalid
Unicode, which SQLite cannot store.

Rating an answer (rate_answer) is for the person who got it: anyone rates the answers of
their own conversations; naming another device or user needs an administrator.

The actions are registered here, light; what they do is in service_actions.py, which
imports the agent's libraries and is loaded with the entries' stacks (stack.py).

An action waits only for the entries it works on, whose stacks are built in the background
(stack.py): one on an agent's conversation or documents for that agent's entry, and fails
with a sentence naming the entry when its build failed; one on the shared storage
(memories, the storage copy), or on every agent's documents, for every loaded entry, going
on without an entry whose build failed (its turns and the log say so).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
import logging
from typing import Any

import voluptuous as vol

from homeassistant.core import HomeAssistant, ServiceCall, ServiceResponse, SupportsResponse
from homeassistant.helpers import config_validation as cv
from homeassistant.helpers.importlib import async_import_module

from .agent.memory import RATINGS
from .const import DOMAIN, MIGRATION_DIRECTIONS
from .stack import StackFailed, async_load_modules

_LOGGER = logging.getLogger(__name__)

ATTR_USER_ID = "user_id"
ATTR_HOUSEHOLD = "household"
ATTR_TEXT = "text"
ATTR_MEMORY_ID = "memory_id"
ATTR_AGENT = "agent"
ATTR_CONVERSATION_ID = "conversation_id"
ATTR_DEVICE_ID = "device_id"
ATTR_RATING = "rating"
ATTR_TURN = "turn"
ATTR_COMMENT = "comment"
ATTR_DIRECTION = "direction"

_WHOSE = {
    vol.Optional(ATTR_USER_ID): cv.string,
    vol.Optional(ATTR_HOUSEHOLD, default=False): cv.boolean,
}
_THREAD = {
    vol.Required(ATTR_AGENT): cv.entity_id,
    vol.Required(ATTR_CONVERSATION_ID): cv.string,
    # Whose conversation: a voice satellite's, another user's (default: the caller's).
    vol.Optional(ATTR_DEVICE_ID): cv.string,
    vol.Optional(ATTR_USER_ID): cv.string,
}


def async_register_services(hass: HomeAssistant) -> None:
    """Register the integration's actions."""

    def bind(name: str) -> Callable[[ServiceCall], Awaitable[ServiceResponse]]:
        async def run(call: ServiceCall) -> ServiceResponse:
            if name in _ON_THE_STORAGE:
                await _async_storage_opened(hass)
            actions = await _async_actions(hass)
            handler: Callable[[HomeAssistant, ServiceCall], Awaitable[ServiceResponse]]
            handler = getattr(actions, name)
            return await handler(hass, call)

        return run

    register = hass.services.async_register
    register(
        DOMAIN, "list_memories", bind("list_memories"), vol.Schema(_WHOSE), SupportsResponse.ONLY
    )
    register(
        DOMAIN,
        "add_memory",
        bind("add_memory"),
        vol.Schema(
            {vol.Required(ATTR_TEXT): vol.All(cv.string, vol.Length(min=1, max=500)), **_WHOSE}
        ),
        SupportsResponse.OPTIONAL,
    )
    register(
        DOMAIN,
        "delete_memory",
        bind("delete_memory"),
        vol.Schema({vol.Required(ATTR_MEMORY_ID): cv.string, **_WHOSE}),
    )
    register(
        DOMAIN,
        "clear_memories",
        bind("clear_memories"),
        vol.Schema(_WHOSE),
        SupportsResponse.OPTIONAL,
    )
    register(
        DOMAIN, "export_thread", bind("export_thread"), vol.Schema(_THREAD), SupportsResponse.ONLY
    )
    register(DOMAIN, "clear_thread", bind("clear_thread"), vol.Schema(_THREAD))
    register(
        DOMAIN,
        "rate_answer",
        bind("rate_answer"),
        vol.Schema(
            {
                **_THREAD,
                vol.Required(ATTR_RATING): vol.In(RATINGS),
                vol.Optional(ATTR_TURN, default="last"): vol.Any(
                    "last", vol.All(vol.Coerce(int), vol.Range(min=1))
                ),
                vol.Optional(ATTR_COMMENT): vol.All(cv.string, vol.Length(max=1000)),
            }
        ),
        SupportsResponse.OPTIONAL,
    )
    register(
        DOMAIN,
        "migrate_storage",
        bind("migrate_storage"),
        vol.Schema({vol.Required(ATTR_DIRECTION): vol.In(MIGRATION_DIRECTIONS)}),
        SupportsResponse.OPTIONAL,
    )
    register(
        DOMAIN,
        "reindex_knowledge",
        bind("reindex_knowledge"),
        vol.Schema({vol.Optional(ATTR_AGENT): cv.entity_id}),
        SupportsResponse.OPTIONAL,
    )


# The actions on the shared storage, which the entries' builds open (persistence.py); the
# others find the entries they work on themselves (service_actions.py).
_ON_THE_STORAGE = frozenset(
    {"list_memories", "add_memory", "delete_memory", "clear_memories", "migrate_storage"}
)


async def _async_storage_opened(hass: HomeAssistant) -> None:
    """Wait for the loaded entries' builds (an automation at Home Assistant's start comes
    before them), which open the shared storage: one whose build failed is left out, and
    only when every one failed is the action refused, with the failure's sentence."""
    stacks = [entry.runtime_data for entry in hass.config_entries.async_loaded_entries(DOMAIN)]
    built = await asyncio.gather(*(stack.async_built() for stack in stacks))
    if stacks and not any(built):
        raise StackFailed(translation_domain=DOMAIN, translation_key="stack_failed")


async def _async_actions(hass: HomeAssistant) -> Any:
    """The actions' module (service_actions.py), which imports the agent's libraries:
    loaded in the executor with the stack's modules (stack.py), unless a build did."""
    try:
        # The actions call no model: an Ollama setup's actions leave LiteLLM unloaded.
        await async_load_modules(hass, litellm=False)
    except Exception as err:
        # The entries' builds load the same modules: they fail (and say so) alike.
        _LOGGER.exception("Loading the agent's libraries for an action failed")
        raise StackFailed(translation_domain=DOMAIN, translation_key="stack_failed") from err
    return await async_import_module(hass, f"{__package__}.service_actions")
