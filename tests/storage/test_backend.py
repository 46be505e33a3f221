"""Both backends give what storage/backend.py's StorageBackend names, on real instances:
the SQLite files in a temporary folder, and a database on the PostgreSQL test server
(tests/postgres.py). persistence.py asks them nothing else, so what passes here for one
passes for the other."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
import inspect
from pathlib import Path
import threading
import time

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
import pytest

from custom_components.langgraph_conversation.storage import SqliteStorage, StorageBackend
from custom_components.langgraph_conversation.storage.postgres import PostgresStorage

# What the protocol names: a member gone or added is a change to every backend.
MEMBERS = {
    "check",
    "is_outage",
    "saver",
    "store",
    "links",
    "ratings",
    "errors",
    "embeds",
    "embedding_fixed",
    "keep_checkpoints",
    "use_embeddings",
    "expire_threads",
    "sweep_memories",
    "backfill_vectors",
    "stats",
    "describe",
    "aclose",
}


def _members() -> dict[str, object]:
    return {name: value for name, value in vars(StorageBackend).items() if name[0] != "_"}


@pytest.fixture(params=["sqlite", "postgresql"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StorageBackend]:
    """A backend with every part open."""
    opened: StorageBackend
    if request.param == "sqlite":
        opened = await SqliteStorage.open(tmp_path / "threads.db", tmp_path / "memory.db")
    else:
        opened = await PostgresStorage.open(request.getfixturevalue("postgres_url"))
    try:
        yield opened
    finally:
        await opened.aclose()


def test_the_protocol_names_its_members() -> None:
    assert set(_members()) == MEMBERS


async def test_each_backend_has_every_member_in_its_shape(backend: StorageBackend) -> None:
    """A property is read as one (a property or a field); methods take the same
    parameters, awaited or not alike."""
    for name, declared in _members().items():
        implemented = inspect.getattr_static(type(backend), name)
        if isinstance(declared, property):
            assert not inspect.isroutine(implemented), name
            getattr(backend, name)
            continue
        assert inspect.iscoroutinefunction(implemented) == inspect.iscoroutinefunction(declared), (
            name
        )
        assert list(inspect.signature(implemented).parameters) == list(
            inspect.signature(declared).parameters  # type: ignore[arg-type]
        ), name


async def test_each_backend_keeps_and_sweeps_alike(backend: StorageBackend) -> None:
    """Every part works through the protocol alone, with the same answers on both."""
    assert isinstance(backend.saver, BaseCheckpointSaver)
    assert isinstance(backend.store, BaseStore)
    assert backend.errors
    assert all(issubclass(error, BaseException) for error in backend.errors)
    assert backend.embeds is False  # opened without an embedding model
    backend.keep_checkpoints(3)
    backend.use_embeddings(None, None)
    assert backend.links is not None
    assert backend.ratings is not None
    now = time.time()
    await backend.links.write(lambda table: table.put("agent", "anna", "talk", "thread", now))
    assert await backend.links.read(lambda t: t.thread_of("agent", "anna", "talk")) == "thread"
    await backend.ratings.rate("thread", "answer", "up", "spot on", now)
    assert await backend.ratings.of_thread("thread") == {
        "answer": {"rating": "up", "comment": "spot on"}
    }
    await backend.store.aput(("memories", "anna"), "tea", {"text": "Anna drinks green tea"})
    assert await backend.sweep_memories() == 0
    assert await backend.backfill_vectors(10) == 0  # no embedding model, nothing to embed
    stats = await backend.stats()
    assert stats["threads"]["conversation_links"] == 1
    assert stats["threads"]["answers_rated_up"] == 1
    assert stats["memory"]["items"] == 1
    # No conversation has a checkpoint; a link unused since the cutoff goes all the same.
    assert await backend.expire_threads(datetime.now(UTC) + timedelta(days=1)) == 0
    assert await backend.links.read(lambda t: t.thread_of("agent", "anna", "talk")) is None
    assert isinstance(backend.describe(backend.errors[0]("the disk is full")), str)


async def test_closing_twice_is_harmless(backend: StorageBackend) -> None:
    """Closing ends what the backend held open (the SQLite files' threads, PostgreSQL's
    pool); a second close finds nothing left to do and raises nothing."""
    await backend.aclose()
    await backend.aclose()
    assert [t.name for t in threading.enumerate() if t.name.startswith("sqlite-")] == []
    if isinstance(backend, PostgresStorage):
        assert backend.saver.conn.closed
