"""One SQLite file behind one aiosqlite connection: pragmas, schema versions, transactions.

Everything here runs on the event loop without blocking it: aiosqlite executes each
statement on the connection's own worker thread, and filesystem calls (creating the parent
directory, checking the file is still there) go to a worker thread.

Faults of the file (locked by another program, disk full, read-only, corrupted, deleted)
are the caller's to report: `on_failure` hears of every failed transaction and
`on_recovery` of the first one that works again. Two faults are handled here, because
only this layer can do it without losing anything:
- Deleted while open (the file or its whole directory): SQLite would go on writing into
  the unlinked file, and everything would vanish when the connection closes. Before each
  write the path is checked; a missing file is written back from the open connection
  (`VACUUM INTO`), the connection moves to it, and `on_restore` is told.
- Corrupted or replaced by another file: the connection is never written to again (that
  could spread the damage or overwrite the newcomer); every call fails until `reopen`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
import logging
import os
from pathlib import Path
import sqlite3

import aiosqlite

_LOGGER = logging.getLogger(__name__)

# Applied to every connection. WAL lets a reader (a backup, a diagnostics query) work while
# we write; NORMAL is durable at every commit in WAL mode except on power loss, which costs
# at most the last transactions, never consistency; busy_timeout waits for another process
# (such as the sqlite3 shell) instead of failing at once.
_PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA busy_timeout = 5000",
)

# A migration brings the schema from version N to N + 1 (index N in the sequence). It runs
# inside the write transaction that also records the new version, so it applies entirely or
# not at all.
type Migration = Callable[[aiosqlite.Connection], Awaitable[None]]


class SchemaVersionError(sqlite3.DatabaseError):
    """The file was written by a newer version of the integration than this one."""


class FileReplacedError(sqlite3.DatabaseError):
    """Another file took the database's place while it was open."""


# Result codes (sqlite3.Error.sqlite_errorname prefixes) that mean the file or the disk
# failed, as opposed to a mistake in a statement.
_FILE_FAULTS = (
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_FULL",
    "SQLITE_IOERR",
    "SQLITE_READONLY",
    "SQLITE_CORRUPT",
    "SQLITE_NOTADB",
    "SQLITE_CANTOPEN",
    "SQLITE_PERM",
)
# Of those, the ones after which the connection must not write to the file again.
_DAMAGE = ("SQLITE_CORRUPT", "SQLITE_NOTADB")

type _Identity = tuple[int, int]


def is_file_fault(error: BaseException) -> bool:
    """Whether `error` is the file or disk failing (not a bad statement)."""
    if isinstance(error, FileReplacedError | _BrokenError):
        return True
    name = getattr(error, "sqlite_errorname", None) or ""
    return isinstance(error, sqlite3.Error) and name.startswith(_FILE_FAULTS)


class _BrokenError(sqlite3.DatabaseError):
    """The database was closed to writes after damage; `reopen` it."""


class SqliteDatabase:
    """An open SQLite file: one connection, one lock, explicit transactions.

    A single connection sees its own uncommitted changes, so reads take the same lock as
    writes: nobody reads a half-written transaction, and `BEGIN IMMEDIATE` never meets a
    transaction another coroutine left open on the shared connection.
    """

    def __init__(
        self,
        connection: aiosqlite.Connection,
        schema_version: int,
        *,
        path: Path,
        identity: _Identity | None,
        migrations: Sequence[Migration],
    ) -> None:
        """Use `open`, which connects and migrates."""
        self.schema_version = schema_version
        self.path = path
        self._connection: aiosqlite.Connection | None = connection
        self._identity = identity
        self._migrations = migrations
        self._lock = asyncio.Lock()
        # Set after damage: the connection is not used again until `reopen`.
        self._broken: sqlite3.Error | None = None
        self._failing = False
        self.on_failure: Callable[[sqlite3.Error], None] | None = None
        self.on_recovery: Callable[[], None] | None = None
        self.on_restore: Callable[[], None] | None = None

    @classmethod
    async def open(cls, path: str | Path, migrations: Sequence[Migration]) -> SqliteDatabase:
        """Open (creating if needed) the file at `path` and bring its schema up to date."""
        path = Path(path)
        connection, version, identity = await _connect(path, migrations)
        return cls(connection, version, path=path, identity=identity, migrations=migrations)

    @property
    def broken(self) -> sqlite3.Error | None:
        """The damage that closed the file to further use, if any."""
        return self._broken

    @property
    def failing(self) -> bool:
        """Whether the last transaction failed with a fault of the file (see is_file_fault)."""
        return self._failing

    async def reopen(self) -> None:
        """Connect to the file at the path afresh (after damage was repaired)."""
        async with self._lock:
            connection, version, identity = await _connect(self.path, self._migrations)
            old, self._connection = self._connection, connection
            self.schema_version, self._identity, self._broken = version, identity, None
            self._failing = False
            if old is not None:
                await close_connection(old)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[aiosqlite.Connection]:
        """A read transaction: the statements inside see one consistent state of the file."""
        async with self._transaction("BEGIN DEFERRED") as connection:
            yield connection

    @asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        """A write transaction, committed when the block ends, rolled back if it raises."""
        async with self._transaction("BEGIN IMMEDIATE") as connection:
            yield connection

    @asynccontextmanager
    async def _transaction(self, begin: str) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            if self._connection is None:
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            try:
                if self._broken is not None:
                    raise _BrokenError(
                        f"{self.path} is not used after this error, until it is reopened: "
                        f"{self._broken}"
                    )
                if begin != "BEGIN DEFERRED":
                    await self._check_file()
            except sqlite3.Error as err:
                self._failed(err)
                raise
            connection = self._connection
            try:
                await connection.execute(begin)
                yield connection
                await connection.commit()
            except BaseException as err:
                # Also on cancellation, even one that interrupts BEGIN itself: the
                # connection's thread runs statements in the order they were queued, so
                # this rollback always comes after whatever is still pending, and nothing
                # stays open for the next transaction to trip over.
                try:
                    await connection.rollback()
                except sqlite3.Error as rollback_error:
                    _LOGGER.debug("Rollback on %s failed: %s", self.path, rollback_error)
                if isinstance(err, sqlite3.Error) and is_file_fault(err):
                    self._failed(err)
                raise
            if self._failing:
                self._failing = False
                if self.on_recovery is not None:
                    self.on_recovery()

    def _failed(self, error: sqlite3.Error) -> None:
        name = getattr(error, "sqlite_errorname", None) or ""
        if self._broken is None and (
            name.startswith(_DAMAGE) or isinstance(error, FileReplacedError)
        ):
            _LOGGER.error(
                "%s is damaged or replaced; it is not written again: %s", self.path, error
            )
            self._broken = error
        self._failing = True
        if self.on_failure is not None:
            self.on_failure(error)

    async def _check_file(self) -> None:
        """Before writing: the file at the path must still be the one we have open."""
        identity = await asyncio.to_thread(_file_identity, self.path)
        if identity == self._identity:
            return
        if identity is not None:
            raise FileReplacedError(
                f"{self.path} was replaced by another file while in use; reload to use it"
            )
        await self._restore()

    async def _restore(self) -> None:
        """The file was deleted while open: write it back from the connection, move to it."""
        assert self._connection is not None
        _LOGGER.warning("%s was deleted while in use; writing it back", self.path)
        await asyncio.to_thread(self.path.parent.mkdir, parents=True, exist_ok=True)
        partial = self.path.with_name(f"{self.path.name}.restoring")
        await asyncio.to_thread(partial.unlink, missing_ok=True)
        # VACUUM INTO copies the whole database, as this connection sees it, to a new file.
        await self._connection.execute("VACUUM INTO ?", (str(partial),))
        await asyncio.to_thread(os.replace, partial, self.path)
        connection, version, identity = await _connect(self.path, self._migrations)
        old, self._connection = self._connection, connection
        self.schema_version, self._identity = version, identity
        await close_connection(old)
        if self.on_restore is not None:
            self.on_restore()

    async def close(self) -> None:
        """Close the connection and end its thread; later calls do nothing."""
        async with self._lock:
            if self._connection is None:
                return
            if self._broken is None:
                # A file deleted since the last write would vanish with the connection.
                try:
                    await self._check_file()
                except (OSError, sqlite3.Error) as err:
                    _LOGGER.warning("Could not check %s before closing it: %s", self.path, err)
            connection, self._connection = self._connection, None
            await close_connection(connection)


async def close_connection(connection: aiosqlite.Connection) -> None:
    """Close an aiosqlite connection and wait until its worker thread has ended.

    `close()` returns when the worker has closed the file, a moment before the thread
    itself exits. Joining it (in the executor: joining blocks) means no thread outlives
    the caller's shutdown, which Home Assistant's test harness checks after every test.
    """
    await connection.close()
    # aiosqlite keeps the worker in a private attribute; without it there is nothing to wait for.
    worker = getattr(connection, "_thread", None)
    if worker is not None:
        await asyncio.to_thread(worker.join)


def _file_identity(path: Path) -> _Identity | None:
    """Device and inode of the file at `path`, None if there is none."""
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    return status.st_dev, status.st_ino


async def _connect(
    path: Path, migrations: Sequence[Migration]
) -> tuple[aiosqlite.Connection, int, _Identity | None]:
    """A configured, migrated connection to `path`, its schema version and file identity."""
    await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
    # isolation_level=None: the sqlite3 module never opens transactions on its own; every
    # transaction is an explicit BEGIN ... COMMIT.
    connection = await aiosqlite.connect(path, isolation_level=None)
    try:
        for pragma in _PRAGMAS:
            await connection.execute(pragma)
        version = await _migrate(connection, path, migrations)
        identity = await asyncio.to_thread(_file_identity, path)
    except BaseException:
        await close_connection(connection)
        raise
    return connection, version, identity


async def _migrate(
    connection: aiosqlite.Connection, path: Path, migrations: Sequence[Migration]
) -> int:
    """Apply the migrations the file lacks; returns the schema version it has afterwards."""
    target = len(migrations)
    try:
        await connection.execute("BEGIN IMMEDIATE")
        # Read inside the write transaction: another process migrating the same file at the
        # same moment waits for us instead of applying the same migration twice.
        async with connection.execute("PRAGMA user_version") as cursor:
            row = await cursor.fetchone()
        current = row[0] if row else 0
        if current > target:
            raise SchemaVersionError(
                f"{path} has schema version {current}; this version of the integration "
                f"understands up to {target}. Update the integration or remove the file."
            )
        for migration in migrations[current:]:
            await migration(connection)
        if current != target:
            # PRAGMA takes no parameters; `target` is an int we computed.
            await connection.execute(f"PRAGMA user_version = {target:d}")
        await connection.commit()
    except BaseException:
        await connection.rollback()
        raise
    return target
