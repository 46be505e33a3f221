"""The integration's SQLite files, opened once per Home Assistant and shared by its entries.

Memories are about people, not models: every entry (an OpenAI one, an Ollama one) reads
and writes the same `memory.db`. One file has one connection, so the files are opened by
the first entry that sets up, shared, and closed when the last entry unloads or Home
Assistant stops (aiosqlite's threads would otherwise hold up the shutdown).

A file that cannot be opened does not stop the agents: they answer without it, and a
repair issue says what is wrong. Nothing stored is ever deleted to recover.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
import logging
from pathlib import Path
import sqlite3

from homeassistant.config_entries import ConfigEntry
from homeassistant.const import EVENT_HOMEASSISTANT_STOP
from homeassistant.core import Event, HomeAssistant
from homeassistant.helpers import issue_registry as ir
from homeassistant.util.hass_dict import HassKey

from .const import DOMAIN, MEMORY_FILE
from .storage.store import SqliteStore

_LOGGER = logging.getLogger(__name__)

MEMORY_ISSUE = "memory_unavailable"


@dataclass
class SharedStorage:
    """Open storage and the entries using it."""

    memory: SqliteStore | None = None
    entries: set[str] = field(default_factory=set)

    async def async_close(self) -> None:
        """Close every file (idempotent)."""
        memory, self.memory = self.memory, None
        if memory is not None:
            await memory.aclose()


DATA_STORAGE: HassKey[SharedStorage] = HassKey(f"{DOMAIN}_storage")
DATA_STORAGE_LOCK: HassKey[asyncio.Lock] = HassKey(f"{DOMAIN}_storage_lock")


async def _async_open_memory(hass: HomeAssistant) -> SqliteStore | None:
    path = Path(hass.config.path(DOMAIN, MEMORY_FILE))
    try:
        store = await SqliteStore.open(path)
    except (OSError, sqlite3.Error) as err:
        _LOGGER.error("Long-term memory is unavailable (%s): %s", path, err)
        ir.async_create_issue(
            hass,
            DOMAIN,
            MEMORY_ISSUE,
            is_fixable=False,
            severity=ir.IssueSeverity.ERROR,
            translation_key=MEMORY_ISSUE,
            translation_placeholders={"path": str(path), "error": str(err)},
        )
        return None
    ir.async_delete_issue(hass, DOMAIN, MEMORY_ISSUE)
    return store


async def async_acquire_storage(hass: HomeAssistant, entry: ConfigEntry) -> SharedStorage:
    """The shared storage, opened on first use; `entry` holds it until released."""
    async with hass.data.setdefault(DATA_STORAGE_LOCK, asyncio.Lock()):
        shared = hass.data.get(DATA_STORAGE)
        if shared is None:
            shared = hass.data[DATA_STORAGE] = SharedStorage(memory=await _async_open_memory(hass))

            async def close_at_stop(event: Event) -> None:
                await shared.async_close()

            hass.bus.async_listen_once(EVENT_HOMEASSISTANT_STOP, close_at_stop)
        shared.entries.add(entry.entry_id)
        return shared


async def async_release_storage(hass: HomeAssistant, entry: ConfigEntry) -> None:
    """`entry` no longer uses the storage; the last one closes it."""
    async with hass.data.setdefault(DATA_STORAGE_LOCK, asyncio.Lock()):
        shared = hass.data.get(DATA_STORAGE)
        if shared is None:
            return
        shared.entries.discard(entry.entry_id)
        if not shared.entries:
            hass.data.pop(DATA_STORAGE)
            await shared.async_close()
