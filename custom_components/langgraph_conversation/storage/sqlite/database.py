"""One SQLite file on one connection thread: pragmas, schema versions, transactions.

A transaction is one plain function of a `sqlite3.Connection`; `read` and `write` run it
whole on the file's own thread and await the result, so the event loop never blocks and a
transaction costs one thread round trip however many statements it has.

Why not aiosqlite: it sends every statement (BEGIN, each execute, each fetch, COMMIT) to its
thread separately, and each round trip wakes the event loop. A LangGraph checkpoint took
about ten of them; a text turn about fifty, which was a quarter of the integration's
per-turn overhead on Home Assistant's loop. aiosqlite has no public way to run a function
on its thread, and a thread pool of one worker from the standard library does exactly that.

Transactions submitted while the thread is busy wait in a queue and run together, each
still its own transaction, in submission order; their results come back to the loop in
one wake-up. LangGraph submits a step's writes and its checkpoint at the same moment, and
parallel conversations submit theirs while others run: each hop costs a thread switch,
and on a busy loop a switch waits for the interpreter lock (up to its 5 ms switch
interval), so the hops, not SQLite, were most of a checkpoint's time.

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
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
import contextlib
import logging
import os
from pathlib import Path
import sqlite3
import threading
from typing import Any

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
type Migration = Callable[[sqlite3.Connection], None]


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


class _Connection:
    """The thread's side: the sqlite3 connection and what runs on it.

    Every method runs on the database's one worker thread (the sqlite3 connection refuses
    any other thread), one call at a time, in the order they were submitted.
    """

    def __init__(self, path: Path, migrations: Sequence[Migration]) -> None:
        self.path = path
        self.migrations = migrations
        self.connection: sqlite3.Connection | None = None
        self.identity: _Identity | None = None
        self.schema_version = 0

    def connect(self) -> None:
        """Open the file (creating it and its directory), configured and migrated."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: the sqlite3 module never opens transactions on its own;
        # every transaction is an explicit BEGIN ... COMMIT.
        connection = sqlite3.connect(self.path, isolation_level=None)
        try:
            for pragma in _PRAGMAS:
                connection.execute(pragma)
            version = _migrate(connection, self.path, self.migrations)
            identity = _file_identity(self.path)
        except BaseException:
            connection.close()
            raise
        old, self.connection = self.connection, connection
        self.schema_version, self.identity = version, identity
        if old is not None:
            old.close()

    def transact(self, begin: str, work: Callable[[sqlite3.Connection], Any]) -> tuple[Any, bool]:
        """Run `work` in a transaction; returns its result and whether the file was restored."""
        if self.connection is None:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        restored = begin != "BEGIN DEFERRED" and self.check_file()
        connection = self.connection
        connection.execute(begin)
        try:
            result = work(connection)
            connection.execute("COMMIT")
        except BaseException:
            try:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
            except sqlite3.Error as rollback_error:
                _LOGGER.debug("Rollback on %s failed: %s", self.path, rollback_error)
            raise
        return result, restored

    def check_file(self) -> bool:
        """Before writing: the file at the path must still be the one we have open.

        Returns whether it had been deleted and was written back.
        """
        identity = _file_identity(self.path)
        if identity == self.identity:
            return False
        if identity is not None:
            raise FileReplacedError(
                f"{self.path} was replaced by another file while in use; reload to use it"
            )
        self.restore()
        return True

    def restore(self) -> None:
        """The file was deleted while open: write it back from the connection, move to it."""
        assert self.connection is not None
        _LOGGER.warning("%s was deleted while in use; writing it back", self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f"{self.path.name}.restoring")
        partial.unlink(missing_ok=True)
        # VACUUM INTO copies the whole database, as this connection sees it, to a new file.
        self.connection.execute("VACUUM INTO ?", (str(partial),))
        os.replace(partial, self.path)
        self.connect()

    def close(self, check: bool) -> bool:
        """Close the connection (after checking the file); whether it was written back."""
        restored = False
        if self.connection is None:
            return restored
        if check:
            # A file deleted since the last write would vanish with the connection.
            try:
                restored = self.check_file()
            except (OSError, sqlite3.Error) as err:
                _LOGGER.warning("Could not check %s before closing it: %s", self.path, err)
        connection, self.connection = self.connection, None
        connection.close()
        return restored


class SqliteDatabase:
    """An open SQLite file: one connection on one thread, one transaction at a time.

    The thread runs one function at a time in submission order, so transactions never
    interleave: nobody reads a half-written transaction, and `BEGIN IMMEDIATE` never meets
    a transaction another coroutine left open on the shared connection. A caller
    cancelled while its transaction runs does not stop it: the transaction ends whole
    (committed, or rolled back if it fails), never half done.
    """

    def __init__(self, side: _Connection, worker: ThreadPoolExecutor) -> None:
        """Use `open`, which connects and migrates."""
        self._side = side
        self._worker: ThreadPoolExecutor | None = worker
        self._queue = _Queue(worker)
        # Set after damage: the connection is not used again until `reopen`.
        self._broken: sqlite3.Error | None = None
        self._failing = False
        # Write transactions submitted (and reconnections) so far. Transactions run in
        # submission order, so a read submitted while this was N showed the file as it
        # still is while it is N: what was read then may be used instead of reading again.
        self.changes = 0
        self.on_failure: Callable[[sqlite3.Error], None] | None = None
        self.on_recovery: Callable[[], None] | None = None
        self.on_restore: Callable[[], None] | None = None

    @classmethod
    async def open(cls, path: str | Path, migrations: Sequence[Migration]) -> SqliteDatabase:
        """Open (creating if needed) the file at `path` and bring its schema up to date."""
        path = Path(path)
        side = _Connection(path, migrations)
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"sqlite-{path.name}")
        try:
            await asyncio.get_running_loop().run_in_executor(worker, side.connect)
        except BaseException:
            await _shut_down(worker)
            raise
        return cls(side, worker)

    @property
    def path(self) -> Path:
        """Where the file is."""
        return self._side.path

    @property
    def schema_version(self) -> int:
        """The schema version the file has."""
        return self._side.schema_version

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
        self.changes += 1
        await self._call(self._side.connect)
        self._broken = None
        self._failing = False

    async def check(self) -> None:
        """Prove the file takes a write now (not locked, not full, not read-only): the
        schema version is written again, unchanged, in a transaction of its own."""
        await self.write(_rewrite_version)

    async def read[T](self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` in a read transaction: its statements see one state of the file."""
        return await self._transaction("BEGIN DEFERRED", work)

    async def write[T](self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` in a write transaction, committed if it returns, rolled back if it raises."""
        self.changes += 1
        return await self._transaction("BEGIN IMMEDIATE", work)

    async def _transaction[T](self, begin: str, work: Callable[[sqlite3.Connection], T]) -> T:
        if self._broken is not None:
            error = _BrokenError(
                f"{self.path} is not used after this error, until it is reopened: {self._broken}"
            )
            self._failed(error)
            raise error
        try:
            result, restored = await self._call(self._side.transact, begin, work)
        except sqlite3.Error as err:
            if is_file_fault(err):
                self._failed(err)
            raise
        if restored and self.on_restore is not None:
            self.on_restore()
        if self._failing:
            self._failing = False
            if self.on_recovery is not None:
                self.on_recovery()
        return result

    async def _call[T](self, function: Callable[..., T], *args: Any) -> T:
        if self._worker is None:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        return await self._queue.submit(function, args)

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

    async def close(self) -> None:
        """Close the connection and end its thread; later calls do nothing."""
        if self._worker is None:
            return
        worker = self._worker
        try:
            restored = await self._call(self._side.close, self._broken is None)
        finally:
            self._worker = None
            await _shut_down(worker)
        if restored and self.on_restore is not None:
            self.on_restore()


class _Queue:
    """Calls for the connection's thread, run in submission order, queued ones together.

    One job on the worker thread runs whatever is queued when it starts (and what arrives
    meanwhile), then hands every result back to the loop at once. A call whose caller was
    cancelled before it started is skipped, as the executor skips a cancelled job; one
    that started runs to its end.
    """

    def __init__(self, worker: ThreadPoolExecutor) -> None:
        self._worker = worker
        self._calls: deque[tuple[Callable[..., Any], tuple[Any, ...], asyncio.Future[Any]]]
        self._calls = deque()
        # Guards `_calls` together with `_draining`: a call queued just as the worker
        # finds the queue empty is either seen by it or starts a new job.
        self._lock = threading.Lock()
        self._draining = False

    def submit(self, function: Callable[..., Any], args: tuple[Any, ...]) -> asyncio.Future[Any]:
        """Queue `function(*args)` for the thread; its future resolves on the loop."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            self._calls.append((function, args, future))
            if self._draining:
                return future
            self._draining = True
        try:
            self._worker.submit(self._drain, loop)
        except BaseException:
            with self._lock:
                self._draining = False
                self._calls.clear()
            raise
        return future

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the thread: run the queued calls, handing back each round's results at once."""
        try:
            self._run_rounds(loop)
        except BaseException:
            # Never left marked as draining with no job running: the next call starts one.
            with self._lock:
                self._draining = False
            raise

    def _run_rounds(self, loop: asyncio.AbstractEventLoop) -> None:
        while calls := self._take():
            outcomes: list[tuple[asyncio.Future[Any], bool, Any]] = []
            for function, args, future in calls:
                # Read across threads: a cancellation that comes a moment later finds
                # the call running, which then ends whole (its result is dropped).
                if future.cancelled():
                    continue
                try:
                    outcomes.append((future, True, function(*args)))
                except BaseException as err:  # noqa: BLE001  handed to the caller
                    outcomes.append((future, False, err))
            if outcomes:
                # A loop closed meanwhile has nobody waiting any more.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_deliver, outcomes)

    def _take(self) -> list[tuple[Callable[..., Any], tuple[Any, ...], asyncio.Future[Any]]]:
        """Everything queued now; none left means this job ends (the next call starts one)."""
        with self._lock:
            calls = list(self._calls)
            self._calls.clear()
            if not calls:
                self._draining = False
            return calls


def _deliver(outcomes: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    """On the loop: the results of one round of calls to their callers."""
    for future, ok, value in outcomes:
        if future.cancelled():
            continue
        if ok:
            future.set_result(value)
        elif isinstance(value, StopIteration):  # a future refuses it as its exception
            future.set_exception(RuntimeError(repr(value)))
        else:
            future.set_exception(value)


async def _shut_down(worker: ThreadPoolExecutor) -> None:
    """End the worker thread and wait for it (in the executor: waiting blocks), so that no
    thread outlives the caller's shutdown, which Home Assistant's test harness checks."""
    await asyncio.get_running_loop().run_in_executor(None, worker.shutdown)


def _rewrite_version(connection: sqlite3.Connection) -> None:
    """One real write that changes nothing: SQLite writes the header page again."""
    row = connection.execute("PRAGMA user_version").fetchone()
    # PRAGMA takes no parameters; the value is the int SQLite just gave.
    connection.execute(f"PRAGMA user_version = {int(row[0]) if row else 0:d}")


def _file_identity(path: Path) -> _Identity | None:
    """Device and inode of the file at `path`, None if there is none."""
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    return status.st_dev, status.st_ino


def _migrate(connection: sqlite3.Connection, path: Path, migrations: Sequence[Migration]) -> int:
    """Apply the migrations the file lacks; returns the schema version it has afterwards."""
    target = len(migrations)
    try:
        connection.execute("BEGIN IMMEDIATE")
        # Read inside the write transaction: another process migrating the same file at the
        # same moment waits for us instead of applying the same migration twice.
        row = connection.execute("PRAGMA user_version").fetchone()
        current = row[0] if row else 0
        if current > target:
            raise SchemaVersionError(
                f"{path} has schema version {current}; this version of the integration "
                f"understands up to {target}. Update the integration or remove the file."
            )
        for migration in migrations[current:]:
            migration(connection)
        if current != target:
            # PRAGMA takes no parameters; `target` is an int we computed.
            connection.execute(f"PRAGMA user_version = {target:d}")
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return target
