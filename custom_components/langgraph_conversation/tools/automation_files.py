"""automations.yaml, written the way Home Assistant's automation editor writes it.

The editor (`homeassistant/components/config/automation.py` and `view.py`) keeps the
automations it manages in `<config>/automations.yaml` as one YAML list: it reads the
file, puts each saved automation's keys in its own order (`id`, `alias`, `description`,
`triggers`, `conditions`, `actions`, then the rest), dumps the list with Home
Assistant's YAML dumper, writes the file atomically, then reloads just that automation
(`automation.reload` with its `id`). Deleting drops the item, writes the file and
removes the automation's entity from the entity registry (which takes the entity away).

This module does the same with Home Assistant's public parts only (the file's name from
`homeassistant.config`, `homeassistant.util.yaml`, `write_utf8_file_atomic`, the reload
service, the entity registry), none of the editor's own helpers; it is the one place
that knows the editor's file conventions, and tests/tools/test_automations.py checks
them against the editor's HTTP API on every leg (the same file after a round trip).
File work runs in the executor; one lock per Home Assistant keeps our writes in order.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from homeassistant.config import AUTOMATION_CONFIG_PATH
from homeassistant.const import CONF_ID, SERVICE_RELOAD
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import entity_registry as er
from homeassistant.util.file import write_utf8_file_atomic
from homeassistant.util.yaml import dump, load_yaml

AUTOMATION_DOMAIN = "automation"
# The editor's order of an automation's keys; any other keys follow in their own order.
EDITOR_KEY_ORDER = (
    "alias",
    "description",
    "triggers",
    "trigger",
    "conditions",
    "condition",
    "actions",
    "action",
)
_LOCK_KEY = "langgraph_conversation_automations_lock"


class AutomationFileError(Exception):
    """automations.yaml is not a list the editor could manage (nothing was written)."""


def _lock(hass: HomeAssistant) -> asyncio.Lock:
    lock = hass.data.get(_LOCK_KEY)
    if lock is None:
        lock = hass.data[_LOCK_KEY] = asyncio.Lock()
    return lock


def file_path(hass: HomeAssistant) -> str:
    """Where the editor keeps its automations."""
    return hass.config.path(AUTOMATION_CONFIG_PATH)


def _read(path: str) -> list[dict[str, Any]]:
    if not os.path.isfile(path):
        return []
    data = load_yaml(path)
    if data is None:
        return []
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise AutomationFileError(f"{AUTOMATION_CONFIG_PATH} is not a list of automations")
    return data


def _write(path: str, data: list[dict[str, Any]]) -> None:
    # Dumped before the file is opened: a value that cannot be dumped leaves it as it was.
    contents = dump(data)
    write_utf8_file_atomic(path, contents)


async def read_automations(hass: HomeAssistant) -> list[dict[str, Any]]:
    """The automations the editor manages, as written in the file."""
    async with _lock(hass):
        return await hass.async_add_executor_job(_read, file_path(hass))


def in_editor_order(config_id: str, config: dict[str, Any]) -> dict[str, Any]:
    """One automation as the editor stores it: its id first, then its keys in order."""
    ordered: dict[str, Any] = {CONF_ID: config_id}
    for key in EDITOR_KEY_ORDER:
        if key in config:
            ordered[key] = config[key]
    ordered.update(config)
    ordered[CONF_ID] = config_id
    return ordered


def new_id(taken: set[str]) -> str:
    """An id as the editor makes them (the time in milliseconds), unused in the file."""
    candidate = int(time.time() * 1000)
    while str(candidate) in taken:
        candidate += 1
    return str(candidate)


async def add_automation(hass: HomeAssistant, config: dict[str, Any], context: Context) -> str:
    """Append an automation to the file under a new id and load it; its id."""
    path = file_path(hass)
    async with _lock(hass):
        current = await hass.async_add_executor_job(_read, path)
        config_id = new_id({str(item.get(CONF_ID)) for item in current})
        await hass.async_add_executor_job(
            _write, path, [*current, in_editor_order(config_id, config)]
        )
    await hass.services.async_call(
        AUTOMATION_DOMAIN, SERVICE_RELOAD, {CONF_ID: config_id}, blocking=True, context=context
    )
    return config_id


async def remove_automation(hass: HomeAssistant, config_id: str) -> bool:
    """Drop an automation from the file and its entity from the registry; False if it
    was not in the file (any more)."""
    path = file_path(hass)
    async with _lock(hass):
        current = await hass.async_add_executor_job(_read, path)
        kept = [item for item in current if str(item.get(CONF_ID)) != config_id]
        if len(kept) == len(current):
            return False
        await hass.async_add_executor_job(_write, path, kept)
    registry = er.async_get(hass)
    if entity_id := registry.async_get_entity_id(AUTOMATION_DOMAIN, AUTOMATION_DOMAIN, config_id):
        registry.async_remove(entity_id)
    return True


def automation_entity(hass: HomeAssistant, config_id: str) -> str | None:
    """The entity Home Assistant made of an automation of the file (None: not loaded)."""
    return er.async_get(hass).async_get_entity_id(AUTOMATION_DOMAIN, AUTOMATION_DOMAIN, config_id)
