"""The integration's storage (its SQLite files or PostgreSQL), opened once per Home Assistant
and shared by its entries.

Memories are about people, not models: every entry (an OpenAI one, an Ollama one) reads
and writes the same `memory.db`; conversations (LangGraph threads, keyed by agent and
conversation id) live in `threads.db`. One file has one connection, so the files are opened by
the first entry that sets up, shared, and closed when the last entry unloads or Home
Assistant stops (the files' threads would otherwise hold up the shutdown).

A file that cannot be opened, or fails while in use, does not stop the agents: they go on
in memory at once (storage/healing/: conversations, links, ratings and memories said
meanwhile), a repair issue says what is wrong, and the file is tried again in the
background with growing pauses (sooner when a turn needs it). Once it works, what was said
meanwhile is written to it and the repair issue goes away: no reload is needed. Nothing
stored is ever deleted to recover.

Settings (the "Configure" options of each model access entry) apply to the shared files,
so differing values combine, always towards keeping more:
- checkpoints kept per conversation: the largest value of the loaded entries;
- conversations idle for N days are deleted: the largest N, and 0 (never) beats any N;
- embedding model: that of the earliest added entry that sets one (Home Assistant's order);
- PostgreSQL instead of the files: the URL of the earliest added entry that chooses it.

Either way the storage is one backend (storage/backend.py's StorageBackend), asked
everything through that protocol. With PostgreSQL, LangGraph's official saver and store
(storage/postgres/) take the files' place; its packages are installed on demand
(postgres_packages.py). A database that cannot be opened or stops answering heals as a
file does (one health for the whole database). When the combined choice changes while
storage is open (an entry's options changed), the storage is opened anew and the other
entries are reloaded so that every agent uses the same one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
import contextlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeassistant.config_entries import ConfigEntry, ConfigEntryState
from homeassistant.const import EVENT_HOMEASSISTANT_STOP
from homeassistant.core import CALLBACK_TYPE, Event, HomeAssistant, callback
from homeassistant.helpers import issue_registry as ir
from homeassistant.helpers.event import async_track_time_interval
from homeassistant.util import dt as dt_util
from homeassistant.util.hass_dict import HassKey

from .agent.memory import MemoryLinkStore
from .agent.models import LiteLLMEmbedder, ModelAccess, embedding_access, warm_up_embeddings
from .const import (
    CHECKPOINTS_KEPT_PER_THREAD,
    CONF_API_BASE,
    CONF_API_KEY,
    CONF_CHECKPOINTS_KEPT,
    CONF_EMBEDDING_API_BASE,
    CONF_EMBEDDING_API_KEY,
    CONF_EMBEDDING_MODEL,
    CONF_MODEL,
    CONF_POSTGRES_URL,
    CONF_STORAGE,
    CONF_THREAD_IDLE_DAYS,
    DOMAIN,
    EMBEDDING_BACKFILL_LIMIT,
    EMBEDDING_TIMEOUT,
    MEMORY_FILE,
    STORAGE_POSTGRES,
    THREAD_IDLE_DAYS,
    THREADS_FILE,
)
from .postgres_packages import PostgresNotInstalled, async_load_postgres
from .storage import (
    SQLITE_ERRORS,
    HealingLinks,
    HealingRatings,
    HealingStorage,
    SqliteCheckpointSaver,
    SqliteDatabase,
    SqliteStorage,
    SqliteStore,
    StorageBackend,
    StorageHealth,
    is_file_fault,
)

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.store.base import BaseStore

_LOGGER = logging.getLogger(__name__)

MEMORY_ISSUE = "memory_unavailable"
MEMORY_FAILED_ISSUE = "memory_failed"
THREADS_ISSUE = "threads_unavailable"
RESTORED_ISSUE = "storage_restored"
EARLIER_ISSUE = "earlier_conversations"
POSTGRES_ISSUE = "postgres_unavailable"
# How often idle threads and expired memory items are deleted, and memories without a
# vector get one.
_MAINTENANCE_INTERVAL = timedelta(hours=6)


@dataclass(frozen=True, slots=True)
class StorageSettings:
    """What one entry asks of the shared files (its options), or their combination."""

    checkpoints_kept: int = CHECKPOINTS_KEPT_PER_THREAD
    # Conversations unused for this many days are deleted; 0 keeps them forever.
    thread_idle_days: int = THREAD_IDLE_DAYS
    # How to reach the embedding model; None searches memories by their words only.
    embedding: ModelAccess | None = None
    # PostgreSQL's connection URL (a secret) when chosen; None keeps the SQLite files.
    postgres_url: str | None = field(default=None, repr=False)

    @classmethod
    def of_entry(cls, entry: ConfigEntry) -> StorageSettings:
        """The settings in an entry's options (defaults where it has none)."""
        options = entry.options
        embedding = None
        if model := (options.get(CONF_EMBEDDING_MODEL) or "").strip():
            chat = ModelAccess(
                entry.data[CONF_MODEL], entry.data.get(CONF_API_KEY), entry.data.get(CONF_API_BASE)
            )
            embedding = embedding_access(
                model,
                options.get(CONF_EMBEDDING_API_KEY),
                options.get(CONF_EMBEDDING_API_BASE),
                chat=chat,
            )
        return cls(
            checkpoints_kept=int(options.get(CONF_CHECKPOINTS_KEPT, CHECKPOINTS_KEPT_PER_THREAD)),
            thread_idle_days=int(options.get(CONF_THREAD_IDLE_DAYS, THREAD_IDLE_DAYS)),
            embedding=embedding,
            postgres_url=(
                options.get(CONF_POSTGRES_URL) or None
                if options.get(CONF_STORAGE) == STORAGE_POSTGRES
                else None
            ),
        )

    def as_diagnostics(self) -> dict[str, object]:
        """The effective settings without any key or address."""
        return {
            "storage": "postgresql" if self.postgres_url else "sqlite",
            "checkpoints_kept_per_conversation": self.checkpoints_kept,
            "delete_conversations_idle_days": self.thread_idle_days or "never",
            "embeddings": self.embedding is not None,
            "embedding_model": self.embedding.model if self.embedding else None,
        }


def combine_settings(ordered: Sequence[StorageSettings]) -> StorageSettings:
    """One setting for the shared files from every loaded entry's (in entry order).

    The most conservative wins: the most checkpoints, the longest idle age (0, never,
    beats every number); the embedding model is the first entry's that sets one.
    """
    if not ordered:
        return StorageSettings()
    idle_days = [settings.thread_idle_days for settings in ordered]
    return StorageSettings(
        checkpoints_kept=max(settings.checkpoints_kept for settings in ordered),
        thread_idle_days=0 if 0 in idle_days else max(idle_days),
        embedding=next((s.embedding for s in ordered if s.embedding is not None), None),
        postgres_url=next((s.postgres_url for s in ordered if s.postgres_url), None),
    )


@dataclass
class SharedStorage:
    """Open storage, the entries using it and their combined settings."""

    # The SQLite files or the PostgreSQL database; None until opened, and while the chosen
    # database cannot be opened.
    backend: StorageBackend | None = None
    # The URL the storage was last opened for (None: the SQLite files).
    opened_for: str | None = None
    # The embedding model the backend was given (None: memories get no vectors).
    embedding: ModelAccess | None = None
    # Each entry's own settings; `settings` is their combination.
    entries: dict[str, StorageSettings] = field(default_factory=dict)
    settings: StorageSettings = field(default_factory=StorageSettings)
    # How a failure of the open backend's conversations is reported (None: as the
    # conversations' file's; see report_threads_failure).
    report_failure: Callable[[Exception], None] | None = None
    # What the agents use: the backend's parts, going on in memory while it is down.
    healing: HealingStorage | None = None
    _cancel_maintenance: CALLBACK_TYPE | None = None
    _cancel_stop_listener: CALLBACK_TYPE | None = None
    _backfill: asyncio.Task[int] | None = None
    # Failed databases closing beside the turns (see retire); the storage's close waits.
    _retiring: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def threads(self) -> BaseCheckpointSaver | None:
        """The conversations' saver (healing: in memory while its database is down)."""
        return self.healing.saver if self.healing is not None else None

    @property
    def memory(self) -> BaseStore | None:
        """The memory store (healing: in memory while its database is down)."""
        return self.healing.store if self.healing is not None else None

    @property
    def links(self) -> HealingLinks | None:
        """The conversation links (healing, as the conversations)."""
        return self.healing.links if self.healing is not None else None

    @property
    def ratings(self) -> HealingRatings | None:
        """The answer ratings (healing, as the conversations)."""
        return self.healing.ratings if self.healing is not None else None

    def _up(self, part: str) -> bool:
        """Whether the database of "threads" or "memory" works now (maintenance and
        diagnostics leave a database that is down alone: it would only time out)."""
        healing = self.healing
        if healing is None:
            return True
        health = healing.threads_health if part == "threads" else healing.memory_health
        return health.up

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        """The exceptions the open storage raises when its database fails."""
        return self.backend.errors if self.backend is not None else ()

    @property
    def choice_changed(self) -> bool:
        """Whether the open storage is not the one the settings ask for: another database,
        or another embedding model where the backend takes it only when it opens."""
        if self.opened_for != self.settings.postgres_url:
            return True
        backend = self.backend
        return (
            backend is not None
            and backend.embedding_fixed
            and self.embedding != self.settings.embedding
        )

    async def async_expire_threads(self) -> int:
        """Delete threads nobody used for the idle days setting; how many went."""
        days = self.settings.thread_idle_days
        backend = self.backend  # the storage open now (it may close while this runs)
        if backend is None or days <= 0 or not self._up("threads"):
            return 0
        cutoff = dt_util.utcnow() - timedelta(days=days)
        try:
            removed = await backend.expire_threads(cutoff)
        except backend.errors as err:
            _LOGGER.warning("Could not delete idle conversations: %s", err)
            return 0
        if removed:
            _LOGGER.info("Deleted %d conversations idle for %d days", removed, days)
        return removed

    async def async_sweep_memories(self) -> int:
        """Delete stored items whose time to live ran out; how many went.

        Reads never return an expired item (LangGraph's store contract); this frees
        their rows, search entries and vectors.
        """
        backend = self.backend  # the storage open now (it may close while this runs)
        if backend is None or not self._up("memory"):
            return 0
        try:
            return await backend.sweep_memories()
        except backend.errors as err:
            _LOGGER.warning("Could not delete expired memory items: %s", err)
            return 0

    async def async_stats(self) -> dict[str, Any]:
        """The open storage's figures for diagnostics, and each database's health. The
        turns' checkpoints still on their way are counted: they are written first."""
        healing = self.healing
        if healing is not None:
            await healing.saver.settled()
        health = {"health": healing.as_diagnostics()} if healing is not None else {}
        if self.backend is None or not (self._up("threads") and self._up("memory")):
            return {"threads": "unavailable", "memory": "unavailable", **health}
        return {**await self.backend.stats(), **health}

    async def async_apply(self, hass: HomeAssistant) -> None:
        """Combine the entries' settings and apply them to the open storage."""
        position = {
            entry.entry_id: index
            for index, entry in enumerate(hass.config_entries.async_entries(DOMAIN))
        }
        ordered = sorted(self.entries, key=lambda entry_id: position.get(entry_id, len(position)))
        self.settings = combine_settings([self.entries[entry_id] for entry_id in ordered])
        backend = self.backend
        if backend is None:
            return
        backend.keep_checkpoints(self.settings.checkpoints_kept)
        if backend.store is None or backend.embedding_fixed:
            # A backend that takes its embedding model when it opens is opened anew for
            # another one (async_acquire_storage).
            return
        wanted = self.settings.embedding
        in_use = self.embedding if backend.embeds else None
        if wanted == in_use:
            return
        self.embedding = wanted
        if wanted is None:
            backend.use_embeddings(None, None)
        else:
            embedder = LiteLLMEmbedder(wanted, timeout=EMBEDDING_TIMEOUT)
            await hass.async_add_executor_job(warm_up_embeddings, wanted)
            backend.use_embeddings(embedder, wanted.model)
            # A backfill still running embeds with the model it started with; the new
            # model needs its own.
            running, self._backfill = self._backfill, None
            if running is not None:
                running.cancel()
            self.async_start_backfill(hass)

    @callback
    def async_start_backfill(self, hass: HomeAssistant) -> None:
        """Give memories without a vector of the current model one, in the background."""
        backend = self.backend
        if backend is None or not backend.embeds or not self._up("memory"):
            return
        if self._backfill is not None and not self._backfill.done():
            return
        self._backfill = hass.async_create_background_task(
            self._async_backfill(backend), f"{DOMAIN} memory vectors"
        )

    async def _async_backfill(self, backend: StorageBackend) -> int:
        try:
            done = await backend.backfill_vectors(EMBEDDING_BACKFILL_LIMIT)
        except backend.errors as err:
            _LOGGER.warning("Could not add vectors to memories: %s", err)
            return 0
        if done:
            _LOGGER.debug("Added vectors to %d memories", done)
        return done

    @callback
    def retire(self, backend: StorageBackend) -> None:
        """Close a failed backend beside the turns, and before the storage's own close ends.

        Not as one of Home Assistant's background tasks: those are cancelled as it stops,
        and a pool cancelled while it closes leaves its workers running (they reconnect,
        log and wait for work forever). Nor awaited by whoever met the failure: that is a
        turn or a write on its way, and the goodbye to a dead server may take seconds.
        """
        closing = asyncio.get_running_loop().create_task(
            _async_close_failed(backend), name=f"{DOMAIN} close failed storage"
        )
        self._retiring.add(closing)
        closing.add_done_callback(self._retiring.discard)

    async def async_close(self) -> None:
        """Close the storage (idempotent)."""
        if self._cancel_maintenance is not None:
            self._cancel_maintenance()
            self._cancel_maintenance = None
        if self._cancel_stop_listener is not None:
            self._cancel_stop_listener()
            self._cancel_stop_listener = None
        await self.async_close_storage()

    async def async_close_storage(self) -> None:
        """Close the files or the database (idempotent); the entries stay registered."""
        if (healing := self.healing) is not None:
            # Kept until closed: its last attempt may open the database again (and start
            # a backfill).
            await healing.aclose()
            self.healing = None
        backfill, self._backfill = self._backfill, None
        if backfill is not None and not backfill.done():
            backfill.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await backfill
        backend, self.backend = self.backend, None
        self.embedding = None
        self.report_failure = None
        if backend is not None:
            await backend.aclose()
        # Last: the healing's close may have met a failure and retired the backend.
        while self._retiring:
            await asyncio.wait(set(self._retiring))


DATA_STORAGE: HassKey[SharedStorage] = HassKey(f"{DOMAIN}_storage")
DATA_STORAGE_LOCK: HassKey[asyncio.Lock] = HassKey(f"{DOMAIN}_storage_lock")


@callback
def _report(hass: HomeAssistant, issue: str, path: Path, error: BaseException | None) -> None:
    ir.async_create_issue(
        hass,
        DOMAIN,
        issue,
        is_fixable=False,
        severity=ir.IssueSeverity.WARNING if issue == RESTORED_ISSUE else ir.IssueSeverity.ERROR,
        translation_key=issue,
        translation_placeholders={"path": str(path), "error": str(error or "")},
    )


@callback
def _watch(database: SqliteDatabase, hass: HomeAssistant, health: StorageHealth) -> None:
    """A file in use: its faults mark it down (whoever met them: a turn, a maintenance
    sweep), and a file deleted while open and written back is a repair issue."""
    database.on_restore = lambda: _report(hass, RESTORED_ISSUE, database.path, None)
    database.on_failure = health.failed


class StorageStillDown(Exception):
    """A retry found the storage still unavailable (the message says why, redacted)."""


async def _async_open_postgres(hass: HomeAssistant, shared: SharedStorage, url: str) -> None:
    """Open LangGraph's PostgreSQL saver and store; on failure a repair issue names why
    (never the URL: only the problem and libpq's message without the password)."""
    if (failure := await _async_try_postgres(hass, shared, url)) is not None:
        problem, message = failure
        _LOGGER.error(
            "PostgreSQL is unavailable (%s), continuing in memory and trying it again: %s",
            problem,
            message,
        )
        _report_postgres(hass, problem, message)


async def _async_try_postgres(
    hass: HomeAssistant, shared: SharedStorage, url: str
) -> tuple[str, str] | None:
    """Open PostgreSQL as the storage; None when it opened, else (problem, message)."""
    try:
        postgres = await async_load_postgres(hass)
    except PostgresNotInstalled as err:
        return err.problem, str(err)
    embedding = shared.settings.embedding
    embedder = None
    if embedding is not None:
        await hass.async_add_executor_job(warm_up_embeddings, embedding)
        embedder = LiteLLMEmbedder(embedding, timeout=EMBEDDING_TIMEOUT)
    try:
        storage = await postgres.PostgresStorage.open(
            url, embed=embedder, embedding_model=embedding.model if embedding else ""
        )
    except postgres.PostgresUnavailable as err:
        return str(err.problem), str(err)
    ir.async_delete_issue(hass, DOMAIN, POSTGRES_ISSUE)
    storage.keep_checkpoints(shared.settings.checkpoints_kept)
    shared.backend = storage
    shared.embedding = embedding
    shared.report_failure = lambda error: _report_postgres(hass, "failed", storage.describe(error))
    shared.async_start_backfill(hass)
    if embedding is not None and storage.store.vector_problem:
        # Once per opening: the search works, by words, and needs no repair.
        _LOGGER.warning(
            "Memories on PostgreSQL are searched by their words only (%s); the"
            " embedding model %s is not used there",
            storage.store.vector_problem,
            embedding.model,
        )
    return None


@callback
def _report_postgres(hass: HomeAssistant, problem: str, message: str) -> None:
    """The repair issue for the PostgreSQL database; `message` is already redacted."""
    ir.async_create_issue(
        hass,
        DOMAIN,
        POSTGRES_ISSUE,
        is_fixable=False,
        severity=ir.IssueSeverity.ERROR,
        translation_key=POSTGRES_ISSUE,
        translation_placeholders={"problem": problem, "error": message},
    )


async def _async_open_missing(hass: HomeAssistant, shared: SharedStorage) -> None:
    """Open the storage chosen if it is not open, or the files of it that are not, and
    reopen those closed after damage; what stays unavailable is retried in the background
    (its health is down) while the agents go on in memory."""
    # What was chosen, whether or not it opens (a failing database is retried, not
    # switched away from).
    shared.opened_for = shared.settings.postgres_url
    if shared.healing is None:
        shared.healing = _healing(hass, shared)
    healing = shared.healing
    if url := shared.settings.postgres_url:
        if shared.backend is None:
            await _async_open_postgres(hass, shared, url)
            if shared.backend is None:
                healing.threads_health.start_down("PostgreSQL could not be opened")
        healing.threads_health.nudge()
        return
    # With the files chosen, an open backend is theirs (another choice closed it).
    files = shared.backend
    if not isinstance(files, SqliteStorage):
        files = shared.backend = SqliteStorage()
    for part, health in (("memory", healing.memory_health), ("threads", healing.threads_health)):
        try:
            await _async_open_file(hass, shared, files, part)
        except (OSError, *SQLITE_ERRORS) as err:
            path = Path(hass.config.path(DOMAIN, _FILES[part][0]))
            _LOGGER.error("%s is unavailable, continuing in memory: %s", path, err)
            _report(hass, _FILES[part][1], path, err)
            health.start_down(str(err))
        health.nudge()


# Each file's name and the repair issue for a file that cannot be opened.
_FILES = {"memory": (MEMORY_FILE, MEMORY_ISSUE), "threads": (THREADS_FILE, THREADS_ISSUE)}


async def _async_open_file(
    hass: HomeAssistant, shared: SharedStorage, files: SqliteStorage, part: str
) -> SqliteDatabase:
    """One file of the SQLite storage, opened if it is not and reopened after damage or a
    failure (a connection that SQLite opened read-only stays read-only when the file
    becomes writable again); raises what opening raised."""
    assert shared.healing is not None
    opened = files.store if part == "memory" else files.saver
    if opened is not None:
        if _needs_reopening(opened.database):
            await opened.database.reopen()
        return opened.database
    path = Path(hass.config.path(DOMAIN, _FILES[part][0]))
    if part == "memory":
        files.store = await SqliteStore.open(path)
        database = files.store.database
        health = shared.healing.memory_health
    else:
        files.saver = await SqliteCheckpointSaver.open(
            path, keep_last=shared.settings.checkpoints_kept
        )
        database = files.saver.database
        health = shared.healing.threads_health
        await _async_report_earlier(hass, files)
    _watch(database, hass, health)
    ir.async_delete_issue(hass, DOMAIN, _FILES[part][1])
    if part == "memory":
        # The embedding model applies to the memories' file once it is open.
        await shared.async_apply(hass)
    return database


async def _async_report_earlier(hass: HomeAssistant, files: SqliteStorage) -> None:
    """Conversations held before conversations had owners (no link points at them): a
    notice says who may continue them (agent/memory/threads.py), once per opening."""
    links = files.links
    if links is None:
        return
    count = await links.read(lambda table: table.unlinked_threads())
    if not count:
        ir.async_delete_issue(hass, DOMAIN, EARLIER_ISSUE)
        return
    ir.async_create_issue(
        hass,
        DOMAIN,
        EARLIER_ISSUE,
        is_fixable=False,
        severity=ir.IssueSeverity.WARNING,
        translation_key=EARLIER_ISSUE,
        translation_placeholders={"count": str(count)},
    )


def _healing(hass: HomeAssistant, shared: SharedStorage) -> HealingStorage:
    """The parts the agents use over the storage chosen, with one health per database."""

    def start(coroutine: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return hass.async_create_background_task(coroutine, f"{DOMAIN} {name}")

    if shared.settings.postgres_url:
        database = StorageHealth(
            "PostgreSQL",
            is_outage=lambda error: shared.backend is None or shared.backend.is_outage(error),
            describe=lambda error: (
                shared.backend.describe(error) if shared.backend is not None else str(error)
            ),
        )
        database.connect(
            partial(_async_reconnect_postgres, hass, shared),
            start,
            partial(_postgres_changed, hass, shared),
        )
        threads = memory = database
    else:
        threads, memory = (
            StorageHealth(
                hass.config.path(DOMAIN, _FILES[part][0]),
                is_outage=is_file_fault,
                reads_while_down=True,
            )
            for part in ("threads", "memory")
        )
        for part, health in (("threads", threads), ("memory", memory)):
            health.connect(
                partial(_async_reconnect_file, hass, shared, part),
                start,
                partial(_file_changed, hass, part),
            )
    return HealingStorage(
        lambda: shared.backend, threads=threads, memory=memory, memory_links=MemoryLinkStore
    )


async def _async_reconnect_postgres(hass: HomeAssistant, shared: SharedStorage) -> None:
    """One retry of PostgreSQL: open it if it never opened, then prove it answers."""
    if shared.backend is None:
        url = shared.settings.postgres_url
        failure = await _async_try_postgres(hass, shared, url) if url else ("closed", "closed")
        if failure is not None:
            raise StorageStillDown(failure[1])
    assert shared.backend is not None
    await shared.backend.check()


async def _async_reconnect_file(hass: HomeAssistant, shared: SharedStorage, part: str) -> None:
    """One retry of an SQLite file: open or reopen it, then prove it takes a write."""
    files = shared.backend
    if not isinstance(files, SqliteStorage):
        raise StorageStillDown("the files are closed")
    database = await _async_open_file(hass, shared, files, part)
    await database.check()


@callback
def _file_changed(hass: HomeAssistant, part: str, error: BaseException | None) -> None:
    """A file failed in use (a repair issue), or works again (the issues go)."""
    file_name, open_issue = _FILES[part]
    in_use_issue = MEMORY_FAILED_ISSUE if part == "memory" else THREADS_ISSUE
    if error is not None:
        _report(hass, in_use_issue, Path(hass.config.path(DOMAIN, file_name)), error)
        return
    for issue in {open_issue, in_use_issue}:
        ir.async_delete_issue(hass, DOMAIN, issue)


@callback
def _postgres_changed(
    hass: HomeAssistant, shared: SharedStorage, error: BaseException | None
) -> None:
    """PostgreSQL failed in use (a repair issue, without the password), or works again.

    A failed database is closed (its pool would otherwise keep reconnecting, and logging
    each attempt, for minutes, then give up) and opened anew by the retries.
    """
    if error is None:
        ir.async_delete_issue(hass, DOMAIN, POSTGRES_ISSUE)
        return
    backend, shared.backend = shared.backend, None
    _report_postgres(hass, "failed", backend.describe(error) if backend else str(error))
    if backend is not None:
        shared.retire(backend)


async def _async_close_failed(backend: StorageBackend) -> None:
    try:
        await backend.aclose()
    except Exception as err:  # noqa: BLE001  a dead server may fail the goodbye too
        _LOGGER.debug("Closing the failed PostgreSQL storage: %s", err)


def _needs_reopening(database: SqliteDatabase) -> bool:
    """Damaged, or failing: a fresh connection may see the repaired file (a connection that
    SQLite opened read-only stays read-only when the file becomes writable again)."""
    return database.broken is not None or database.failing


async def _async_maintain(hass: HomeAssistant, shared: SharedStorage) -> None:
    await shared.async_expire_threads()
    await shared.async_sweep_memories()
    shared.async_start_backfill(hass)


@callback
def report_threads_failure(hass: HomeAssistant, error: Exception) -> None:
    """The conversations file (or database) failed while in use: say so; a reload tries it
    again."""
    shared = hass.data.get(DATA_STORAGE)
    if shared is not None and shared.report_failure is not None:
        shared.report_failure(error)
        return
    _report(hass, THREADS_ISSUE, Path(hass.config.path(DOMAIN, THREADS_FILE)), error)


# Entry states in which the entry's runtime exists (Home Assistant deletes it after
# unloading).
_WITH_RUNTIME = (ConfigEntryState.LOADED, ConfigEntryState.UNLOAD_IN_PROGRESS)


async def _async_end_turns(hass: HomeAssistant, shared: SharedStorage) -> None:
    """Let the running turns of every entry using the storage finish or cancel them."""
    # Plain entries: their runtime data is an EntryStack (stack.py), which imports this
    # module; naming its type here would close an import circle.
    entries: list[ConfigEntry | None] = [
        hass.config_entries.async_get_entry(entry_id) for entry_id in shared.entries
    ]
    await asyncio.gather(
        *(
            entry.runtime_data.aclose()
            for entry in entries
            # An entry that still sets up has opened the storage before its runtime.
            if entry is not None and entry.state in _WITH_RUNTIME
        )
    )


async def async_acquire_storage(hass: HomeAssistant, entry: ConfigEntry) -> SharedStorage:
    """The shared storage, opened on first use; `entry` holds it until released."""
    async with hass.data.setdefault(DATA_STORAGE_LOCK, asyncio.Lock()):
        shared = hass.data.get(DATA_STORAGE)
        first = shared is None
        if shared is None:
            shared = hass.data[DATA_STORAGE] = SharedStorage()

            async def close_at_stop(event: Event) -> None:
                shared._cancel_stop_listener = None  # a fired one-time listener is gone
                # Turns still running end first, while their threads' file is open.
                await _async_end_turns(hass, shared)
                await shared.async_close()

            shared._cancel_stop_listener = hass.bus.async_listen_once(
                EVENT_HOMEASSISTANT_STOP, close_at_stop
            )

            async def maintain(now: datetime) -> None:
                await _async_maintain(hass, shared)

            shared._cancel_maintenance = async_track_time_interval(
                hass, maintain, _MAINTENANCE_INTERVAL, cancel_on_shutdown=True
            )
        shared.entries[entry.entry_id] = StorageSettings.of_entry(entry)
        await shared.async_apply(hass)
        if not first and shared.choice_changed:
            await _async_switch(hass, shared, entry)
        await _async_open_missing(hass, shared)
        await shared.async_apply(hass)
        if first:
            await _async_maintain(hass, shared)
        return shared


async def _async_switch(hass: HomeAssistant, shared: SharedStorage, entry: ConfigEntry) -> None:
    """The storage choice changed while open: close it (it opens anew for `entry`) and
    reload the other entries, whose agents hold the storage that was open."""
    _LOGGER.info("The storage choice changed; opening it anew and reloading the other entries")
    await shared.async_close_storage()
    ir.async_delete_issue(hass, DOMAIN, POSTGRES_ISSUE)
    for entry_id in shared.entries:
        if entry_id != entry.entry_id:
            hass.config_entries.async_schedule_reload(entry_id)


async def async_release_storage(hass: HomeAssistant, entry: ConfigEntry) -> None:
    """`entry` no longer uses the storage; the last one closes it."""
    async with hass.data.setdefault(DATA_STORAGE_LOCK, asyncio.Lock()):
        shared = hass.data.get(DATA_STORAGE)
        if shared is None:
            return
        shared.entries.pop(entry.entry_id, None)
        if not shared.entries:
            hass.data.pop(DATA_STORAGE)
            await shared.async_close()
        else:
            await shared.async_apply(hass)
