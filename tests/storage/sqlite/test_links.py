"""Conversation links in threads.db: migration, the thread rule over SQLite, deletion."""

from __future__ import annotations

import asyncio
from contextlib import closing
from datetime import UTC, datetime, timedelta
import itertools
from pathlib import Path
import sqlite3

import pytest

from custom_components.langgraph_conversation.agent.memory import (
    MemoryLinkStore,
    Party,
    ThreadRequest,
    choose_thread,
    find_thread,
)
from custom_components.langgraph_conversation.agent.memory.threads import thread_id_for
from custom_components.langgraph_conversation.storage.sqlite.checkpointer import (
    SqliteCheckpointSaver,
)
from custom_components.langgraph_conversation.storage.sqlite.links import SqliteLinkStore

from .test_checkpointer import put_checkpoint


def _version_1_file(path: Path) -> None:
    """threads.db as the previous release wrote it: schema 1, one checkpoint row."""
    from custom_components.langgraph_conversation.storage.sqlite.checkpointer import MIGRATIONS

    with closing(sqlite3.connect(path, isolation_level=None)) as connection:
        MIGRATIONS[0](connection)
        connection.execute("PRAGMA user_version = 1")
        connection.execute(
            "INSERT INTO checkpoints VALUES ('agent:old', '', 'c1', NULL, NULL, 0, 't', x'00',"
            " '{}', '{}')"
        )


async def test_a_version_1_file_gains_the_links_table(tmp_path: Path) -> None:
    """Opening an older threads.db adds the links table and keeps its threads."""
    path = tmp_path / "threads.db"
    await asyncio.to_thread(_version_1_file, path)
    saver = await SqliteCheckpointSaver.open(path)
    try:
        stats = await saver.stats()
        assert stats["schema_version"] == 2
        assert stats["checkpoints"] == 1
        assert stats["conversation_links"] == 0
    finally:
        await saver.aclose()


@pytest.fixture
async def saver(tmp_path: Path):
    opened = await SqliteCheckpointSaver.open(tmp_path / "threads.db")
    yield opened
    await opened.aclose()


PARTIES = [Party(device, user) for device in ("x", "y", None) for user in ("a", "b", None)]


@pytest.mark.parametrize("store_kind", ["sqlite", "memory"])
async def test_the_rule_is_the_same_in_the_file_and_in_memory(
    saver: SqliteCheckpointSaver, store_kind: str
) -> None:
    """Every pair of parties, through both link stores: one thread per party and
    conversation; a new conversation continues only the same satellite's thread."""
    store = SqliteLinkStore(saver.database) if store_kind == "sqlite" else MemoryLinkStore()
    for number, (first, second) in enumerate(itertools.product(PARTIES, PARTIES)):
        agent = f"agent{number}"
        named = await store.write(
            lambda t, p=first, a=agent: choose_thread(t, ThreadRequest(a, "chat", p), 100.0)
        )
        assert named.thread_id == thread_id_for(agent, "chat", first)
        again = await store.write(
            lambda t, p=second, a=agent: choose_thread(t, ThreadRequest(a, "chat", p), 110.0)
        )
        assert (again.thread_id == named.thread_id) == (first == second)
        assert again.shared == (first != second)
        window = 300.0 if second.device else None
        new = await store.write(
            lambda t, p=second, a=agent, w=window: choose_thread(
                t, ThreadRequest(a, "new", p, window=w), 200.0
            )
        )
        continues = first == second and first.device is not None
        assert (new.thread_id == named.thread_id) == continues
        assert new.linked == (second.device is not None)
        # Beyond the window: fresh.
        late = await store.write(
            lambda t, p=second, a=agent, w=window: choose_thread(
                t, ThreadRequest(a, "late", p, window=w), 1000.0
            )
        )
        assert late.thread_id == thread_id_for(agent, "late", second)
        # Found again as the turn found it, also after the link.
        assert await store.read(lambda t, p=second, a=agent: find_thread(t, a, "new", p)) == (
            new.thread_id
        )


async def test_links_go_with_their_thread(saver: SqliteCheckpointSaver) -> None:
    """Deleting a thread (clear, idle expiry) deletes every link to it."""
    store = SqliteLinkStore(saver.database)
    satellite = Party(device="x")
    first = await store.write(lambda t: choose_thread(t, ThreadRequest("a", "c1", satellite), 1.0))
    linked = await store.write(
        lambda t: choose_thread(t, ThreadRequest("a", "c2", satellite, window=60), 2.0)
    )
    assert linked.thread_id == first.thread_id
    await put_checkpoint(saver, first.thread_id)
    assert (await saver.stats())["conversation_links"] == 2
    await saver.adelete_thread(first.thread_id)
    assert (await saver.stats())["conversation_links"] == 0

    old = datetime.now(UTC) - timedelta(days=400)
    kept = await store.write(
        lambda t: choose_thread(
            t, ThreadRequest("a", "c3", satellite), datetime.now(UTC).timestamp()
        )
    )
    gone = await store.write(
        lambda t: choose_thread(t, ThreadRequest("a", "c4", Party(user="u")), old.timestamp())
    )
    await put_checkpoint(saver, kept.thread_id)
    await put_checkpoint(saver, gone.thread_id, ts=old)
    assert await saver.adelete_threads_idle_since(datetime.now(UTC) - timedelta(days=30)) == 1
    remaining = await store.read(lambda t: t.thread_of("a", satellite.key, "c3"))
    assert remaining == kept.thread_id
    assert await store.read(lambda t: t.thread_of("a", Party(user="u").key, "c4")) is None


def test_party_keys_cannot_be_forged() -> None:
    """A client-chosen device id that spells another party's parts is another party."""
    assert Party(device="x,u=a").key != Party(device="x", user="a").key
    assert Party(device='x","a').key != Party(device="x", user="a").key
    assert Party().key == "nobody"
    assert ":" not in Party(device="a:b", user="c:d").key
