"""One SQLite file's faults seen from the connection: deleted, replaced, reported."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
import shutil
import sqlite3

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
