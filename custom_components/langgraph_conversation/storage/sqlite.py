"""One SQLite file behind one aiosqlite connection: pragmas, schema versions, transactions.

Everything here runs on the event loop without blocking it: aiosqlite executes each
statement on the connection's own worker thread, and the one filesystem call (creating
the parent directory) goes to the executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
import sqlite3

import aiosqlite

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


class SqliteDatabase:
    """An open SQLite file: one connection, one lock, explicit transactions.

    A single connection sees its own uncommitted changes, so reads take the same lock as
    writes: nobody reads a half-written transaction, and `BEGIN IMMEDIATE` never meets a
    transaction another coroutine left open on the shared connection.
    """

    def __init__(self, connection: aiosqlite.Connection, schema_version: int) -> None:
        """Use `open`, which connects and migrates."""
        self.schema_version = schema_version
        self._connection: aiosqlite.Connection | None = connection
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: str | Path, migrations: Sequence[Migration]) -> SqliteDatabase:
        """Open (creating if needed) the file at `path` and bring its schema up to date."""
        path = Path(path)
        await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
        # isolation_level=None: the sqlite3 module never opens transactions on its own; every
        # transaction is the explicit BEGIN ... COMMIT below.
        connection = await aiosqlite.connect(path, isolation_level=None)
        try:
            for pragma in _PRAGMAS:
                await connection.execute(pragma)
            version = await _migrate(connection, path, migrations)
        except BaseException:
            await close_connection(connection)
            raise
        return cls(connection, version)

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
            connection = self._connection
            try:
                await connection.execute(begin)
                yield connection
                await connection.commit()
            except BaseException:
                # Also on cancellation, even one that interrupts BEGIN itself: the
                # connection's thread runs statements in the order they were queued, so
                # this rollback always comes after whatever is still pending, and nothing
                # stays open for the next transaction to trip over.
                await connection.rollback()
                raise

    async def close(self) -> None:
        """Close the connection and end its thread; later calls do nothing."""
        async with self._lock:
            if self._connection is None:
                return
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
