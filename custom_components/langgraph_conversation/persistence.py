"""The integration's SQLite files, opened once per Home Assistant and shared by its entries.

Memories are about people, not models: every entry (an OpenAI one, an Ollama one) reads
and writes the same `memory.db`; conversations (LangGraph threads, keyed by agent and
conversation id) live in `threads.db`. One file has one connection, so the files are opened by
the first entry that sets up, shared, and closed when the last entry unloads or Home
Assistant stops (aiosqlite's threads would otherwise hold up the shutdown).

A file that cannot be opened does not stop the agents: they answer without it, and a
repair issue says what is wrong. Nothing stored is ever deleted to recover.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
import logging
from pathlib import Path
import sqlite3

from homeassistant.config_entries import ConfigEntry
from homeassistant.const import EVENT_HOMEASSISTANT_STOP
from homeassistant.core import CALLBACK_TYPE, Event, HomeAssistant, callback
from homeassistant.helpers import issue_registry as ir
from homeassistant.helpers.event import async_track_time_interval
from homeassistant.util import dt as dt_util
from homeassistant.util.hass_dict import HassKey

from .const import (
    CHECKPOINTS_KEPT_PER_THREAD,
    DOMAIN,
    MEMORY_FILE,
    THREAD_IDLE_DAYS,
    THREADS_FILE,
)
from .storage.checkpointer import SqliteCheckpointSaver
from .storage.store import SqliteStore

_LOGGER = logging.getLogger(__name__)

MEMORY_ISSUE = "memory_unavailable"
THREADS_ISSUE = "threads_unavailable"
# How often threads idle for longer than THREAD_IDLE_DAYS are deleted.
_EXPIRY_INTERVAL = timedelta(hours=6)


@dataclass
class SharedStorage:
    """Open storage and the entries using it."""

    memory: SqliteStore | None = None
    threads: SqliteCheckpointSaver | None = None
    entries: set[str] = field(default_factory=set)
    _cancel_expiry: CALLBACK_TYPE | None = None

    async def async_expire_threads(self) -> int:
        """Delete threads nobody used for THREAD_IDLE_DAYS; how many went."""
        if self.threads is None:
            return 0
        cutoff = dt_util.utcnow() - timedelta(days=THREAD_IDLE_DAYS)
        try:
            removed = await self.threads.adelete_threads_idle_since(cutoff)
        except sqlite3.Error as err:
            _LOGGER.warning("Could not delete idle conversations: %s", err)
            return 0
        if removed:
            _LOGGER.info("Deleted %d conversations idle for %d days", removed, THREAD_IDLE_DAYS)
        return removed

    async def async_close(self) -> None:
        """Close every file (idempotent)."""
        if self._cancel_expiry is not None:
            self._cancel_expiry()
            self._cancel_expiry = None
        memory, self.memory = self.memory, None
        threads, self.threads = self.threads, None
        if memory is not None:
            await memory.aclose()
        if threads is not None:
            await threads.aclose()


DATA_STORAGE: HassKey[SharedStorage] = HassKey(f"{DOMAIN}_storage")
DATA_STORAGE_LOCK: HassKey[asyncio.Lock] = HassKey(f"{DOMAIN}_storage_lock")


async def _async_open[T](
    hass: HomeAssistant, file_name: str, issue: str, opener: Callable[[Path], Awaitable[T]]
) -> T | None:
    """Open one file; on failure log once, raise a repair issue and carry on without it."""
    path = Path(hass.config.path(DOMAIN, file_name))
    try:
        opened = await opener(path)
    except (OSError, sqlite3.Error) as err:
        _LOGGER.error("%s is unavailable, continuing without it: %s", path, err)
        ir.async_create_issue(
            hass,
            DOMAIN,
            issue,
            is_fixable=False,
            severity=ir.IssueSeverity.ERROR,
            translation_key=issue,
            translation_placeholders={"path": str(path), "error": str(err)},
        )
        return None
    ir.async_delete_issue(hass, DOMAIN, issue)
    return opened


async def _async_open_all(hass: HomeAssistant) -> SharedStorage:
    shared = SharedStorage(
        memory=await _async_open(hass, MEMORY_FILE, MEMORY_ISSUE, SqliteStore.open),
        threads=await _async_open(
            hass,
            THREADS_FILE,
            THREADS_ISSUE,
            lambda path: SqliteCheckpointSaver.open(path, keep_last=CHECKPOINTS_KEPT_PER_THREAD),
        ),
    )
    await shared.async_expire_threads()

    async def expire(now: datetime) -> None:
        await shared.async_expire_threads()

    shared._cancel_expiry = async_track_time_interval(
        hass, expire, _EXPIRY_INTERVAL, cancel_on_shutdown=True
    )
    return shared


@callback
def report_threads_failure(hass: HomeAssistant, error: Exception) -> None:
    """The conversations file failed while in use: say so; a reload tries it again."""
    path = Path(hass.config.path(DOMAIN, THREADS_FILE))
    ir.async_create_issue(
        hass,
        DOMAIN,
        THREADS_ISSUE,
        is_fixable=False,
        severity=ir.IssueSeverity.ERROR,
        translation_key=THREADS_ISSUE,
        translation_placeholders={"path": str(path), "error": str(error)},
    )


async def _async_end_turns(hass: HomeAssistant, shared: SharedStorage) -> None:
    """Let the running turns of every entry using the storage finish or cancel them."""
    entries = [hass.config_entries.async_get_entry(entry_id) for entry_id in shared.entries]
    await asyncio.gather(
        *(
            entry.runtime_data.aclose()
            for entry in entries
            if entry is not None and hasattr(entry, "runtime_data")
        )
    )


async def async_acquire_storage(hass: HomeAssistant, entry: ConfigEntry) -> SharedStorage:
    """The shared storage, opened on first use; `entry` holds it until released."""
    async with hass.data.setdefault(DATA_STORAGE_LOCK, asyncio.Lock()):
        shared = hass.data.get(DATA_STORAGE)
        if shared is None:
            shared = hass.data[DATA_STORAGE] = await _async_open_all(hass)

            async def close_at_stop(event: Event) -> None:
                # Turns still running end first, while their threads' file is open.
                await _async_end_turns(hass, shared)
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
