"""One SQLite file's faults seen from the connection: deleted, replaced, reported."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
import shutil
import sqlite3
import threading

import pytest

from custom_components.langgraph_conversation.storage.sqlite.database import (
    FileReplacedError,
    SqliteDatabase,
)


def _create_notes(connection: sqlite3.Connection) -> None:
    connection.execute("CREATE TABLE notes (text TEXT NOT NULL)")


class Events:
    """What the database told its listeners, in order."""

    def __init__(self, database: SqliteDatabase) -> None:
        self.seen: list[str] = []
        database.on_failure = lambda error: self.seen.append(f"failure: {error}")
        database.on_recovery = lambda: self.seen.append("recovery")
        database.on_restore = lambda: self.seen.append("restore")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "files" / "notes.db"


@pytest.fixture
async def database(path: Path) -> AsyncIterator[SqliteDatabase]:
    database = await SqliteDatabase.open(path, [_create_notes])
    yield database
    await database.close()


async def _add(database: SqliteDatabase, text: str) -> None:
    await database.write(
        lambda connection: connection.execute("INSERT INTO notes (text) VALUES (?)", (text,))
    )


def _notes_on_disk(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as connection:
        return [text for (text,) in connection.execute("SELECT text FROM notes ORDER BY rowid")]


async def test_deleted_directory_is_written_back_before_the_next_write(
    database: SqliteDatabase, path: Path
) -> None:
    """Without this, the write would go into the unlinked file and vanish at close."""
    events = Events(database)
    await _add(database, "before")
    await asyncio.to_thread(shutil.rmtree, path.parent)
    await _add(database, "after")
    assert events.seen == ["restore"]
    assert await asyncio.to_thread(_notes_on_disk, path) == ["before", "after"]


async def test_deleted_file_is_written_back_at_close(path: Path) -> None:
    """Only reads since the deletion: closing writes the file back."""
    database = await SqliteDatabase.open(path, [_create_notes])
    events = Events(database)
    await _add(database, "kept")
    await asyncio.to_thread(path.unlink)
    notes = await database.read(
        lambda connection: connection.execute("SELECT text FROM notes").fetchall()
    )
    assert notes == [("kept",)]
    await database.close()
    assert events.seen == ["restore"]
    assert await asyncio.to_thread(_notes_on_disk, path) == ["kept"]


async def test_replaced_file_is_never_written(
    database: SqliteDatabase, path: Path, tmp_path: Path
) -> None:
    """Another file in its place (a backup restored while running): no more writes or reads."""
    events = Events(database)
    await _add(database, "old")
    backup = tmp_path / "backup.db"

    def put_backup_in_place() -> None:
        with closing(sqlite3.connect(backup)) as connection:
            connection.execute("CREATE TABLE notes (text TEXT NOT NULL)")
            connection.execute("INSERT INTO notes VALUES ('from the backup')")
            connection.execute("PRAGMA user_version = 1")
            connection.commit()
        backup.replace(path)

    await asyncio.to_thread(put_backup_in_place)
    with pytest.raises(FileReplacedError):
        await _add(database, "not written")
    assert database.broken is not None
    # Reads are refused too: they would show data that is no longer the file's.
    with pytest.raises(sqlite3.DatabaseError, match="not used after this error"):
        await database.read(lambda connection: None)
    assert len(events.seen) == 2
    assert all(seen.startswith("failure: ") for seen in events.seen)
    assert "replaced by another file" in events.seen[0]


async def test_lock_is_reported_once_it_fails_and_when_it_works_again(
    database: SqliteDatabase, path: Path
) -> None:
    """Listeners hear of a locked file, and of the first write that works afterwards."""
    events = Events(database)

    def lock() -> sqlite3.Connection:
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("PRAGMA busy_timeout = 0")
        holder.execute("BEGIN EXCLUSIVE")
        return holder

    await database.write(lambda connection: connection.execute("PRAGMA busy_timeout = 0"))
    holder = await asyncio.to_thread(lock)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            await _add(database, "blocked")
    finally:
        await asyncio.to_thread(holder.close)
    assert database.failing
    await _add(database, "works")
    assert not database.failing
    assert events.seen == ["failure: database is locked", "recovery"]
    assert await asyncio.to_thread(_notes_on_disk, path) == ["works"]


async def _held(database: SqliteDatabase) -> tuple[asyncio.Future[None], threading.Event]:
    """A transaction that keeps the connection's thread busy until the event is set."""
    release = threading.Event()
    started = threading.Event()

    def hold(_connection: sqlite3.Connection) -> None:
        started.set()
        release.wait(timeout=30)

    busy = asyncio.ensure_future(database.read(hold))
    await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
    return busy, release


async def test_transactions_queued_meanwhile_run_together_each_whole(
    database: SqliteDatabase, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes submitted while the thread is busy take one job on it (not one round trip
    each), run in submission order, and each is still a transaction of its own: a
    failing one is rolled back alone, its caller gets the error, the others commit."""
    jobs: list[object] = []
    worker = database._queue._worker
    submit = worker.submit

    def counted(*args: object, **kwargs: object) -> object:
        jobs.append(args[0])
        return submit(*args, **kwargs)

    monkeypatch.setattr(worker, "submit", counted)
    busy, release = await _held(database)
    texts = [f"note {n}" for n in range(12)]
    failing = 5

    def add(text: str, fail: bool):
        def work(connection: sqlite3.Connection) -> str:
            connection.execute("INSERT INTO notes (text) VALUES (?)", (text,))
            if fail:
                raise ValueError(text)
            return text

        return database.write(work)

    writes = [
        asyncio.ensure_future(add(text, index == failing)) for index, text in enumerate(texts)
    ]
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(busy, *writes, return_exceptions=True)
    assert len(jobs) <= 2, jobs  # the busy one, then at most one for all twelve
    assert isinstance(results[1 + failing], ValueError)
    assert [r for r in results[1:] if not isinstance(r, Exception)] == [
        t for i, t in enumerate(texts) if i != failing
    ]
    assert _notes_on_disk(path) == [t for i, t in enumerate(texts) if i != failing]


async def test_a_transaction_cancelled_before_it_starts_never_runs(
    database: SqliteDatabase, path: Path
) -> None:
    """As with the executor: a caller gone before its turn leaves nothing behind; one
    queued after it still runs."""
    busy, release = await _held(database)
    dropped = asyncio.ensure_future(_add(database, "cancelled"))
    kept = asyncio.ensure_future(_add(database, "kept"))
    await asyncio.sleep(0)
    dropped.cancel()
    release.set()
    await busy
    await kept
    assert dropped.cancelled()
    assert _notes_on_disk(path) == ["kept"]


async def test_the_thread_takes_calls_again_after_a_quiet_moment(
    database: SqliteDatabase, path: Path
) -> None:
    """Once the queue ran dry, the next call starts a new job (nothing waits forever)."""
    for round_ in range(3):
        await asyncio.gather(*(_add(database, f"{round_}.{n}") for n in range(3)))
        await asyncio.sleep(0.01)
    assert _notes_on_disk(path) == [f"{r}.{n}" for r in range(3) for n in range(3)]
