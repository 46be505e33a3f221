"""Conversation links in threads.db: migration, the thread rule over SQLite, deletion."""

from __future__ import annotations

import asyncio
from contextlib import closing
from datetime import UTC, datetime, timedelta
import itertools
import logging
from pathlib import Path
import random
import shutil
import sqlite3

import pytest

from custom_components.langgraph_conversation.agent.memory import (
    MemoryLinkStore,
    Party,
    ThreadRequest,
    choose_thread,
    find_thread,
    known_choice,
)
from custom_components.langgraph_conversation.agent.memory.threads import thread_id_for
from custom_components.langgraph_conversation.storage.sqlite.checkpointer import (
    SqliteCheckpointSaver,
)
from custom_components.langgraph_conversation.storage.sqlite.links import SqliteLinkStore

from ...agent.memory.earlier_release import AGENT_ID, CHOSEN_ID, FIXTURE, ISSUED_ID
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


async def test_a_thread_no_link_points_at(saver: SqliteCheckpointSaver) -> None:
    """Unlinked: checkpoints and no link; a link (or no checkpoint) makes it not so."""
    store = SqliteLinkStore(saver.database)
    await put_checkpoint(saver, "agent:conversation")
    assert await store.read(lambda t: t.has_unlinked_thread("agent:conversation"))
    assert not await store.read(lambda t: t.has_unlinked_thread("agent:other"))
    await store.write(lambda t: t.put("agent", "p", "c", "agent:conversation", 1.0))
    assert not await store.read(lambda t: t.has_unlinked_thread("agent:conversation"))


async def test_the_earlier_releases_threads_under_the_rule(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The threads.db the release before the links wrote (schema 1): its thread of an
    id Home Assistant issued goes to the first party that brings the id back (as the id
    Home Assistant replaced), and only to them; its thread of an id the client chose
    goes to nobody, with a warning, and stays."""
    path = tmp_path / "threads.db"
    await asyncio.to_thread(shutil.copyfile, FIXTURE, path)
    saver = await SqliteCheckpointSaver.open(path)
    store = SqliteLinkStore(saver.database)
    earlier = f"{AGENT_ID}:{ISSUED_ID}"
    owner, other = Party(user="a"), Party(device="x")
    try:

        def came_back(party: Party, now: float):
            request = ThreadRequest(AGENT_ID, f"new-{now}", party, replaced_id=ISSUED_ID)
            return lambda table: choose_thread(table, request, now)

        claimed = await store.write(came_back(owner, 1.0))
        assert (claimed.thread_id, claimed.linked) == (earlier, True)
        assert await store.read(lambda t: find_thread(t, AGENT_ID, ISSUED_ID, owner)) == earlier
        refused = await store.write(came_back(other, 2.0))
        assert refused.thread_id == thread_id_for(AGENT_ID, "new-2.0", other)
        assert (await store.write(came_back(owner, 3.0))).thread_id == earlier

        with caplog.at_level(logging.WARNING):
            chosen = await store.write(
                lambda t: choose_thread(t, ThreadRequest(AGENT_ID, CHOSEN_ID, owner), 4.0)
            )
        assert chosen.thread_id == thread_id_for(AGENT_ID, CHOSEN_ID, owner)
        assert "not continued" in caplog.text
        assert await store.read(lambda t: t.has_unlinked_thread(f"{AGENT_ID}:{CHOSEN_ID}"))
    finally:
        await saver.aclose()


@pytest.mark.parametrize("seed", range(40))
async def test_a_choice_known_in_advance_is_the_rule_s(
    saver: SqliteCheckpointSaver, seed: int
) -> None:
    """known_choice against choose_thread, on generated link tables in the file: where a
    choice is known without reading (a conversation id issued for this turn, nothing to
    continue), the rule chooses the same whatever links the other conversations, parties
    and agents have; elsewhere nothing is known in advance."""
    rng = random.Random(seed)
    store = SqliteLinkStore(saver.database)
    agents = ["agent1", "agent2"]
    for number in range(rng.randrange(1, 30)):
        agent, party = rng.choice(agents), rng.choice(PARTIES)
        conversation = rng.choice(["chat", "old", f"other{number}"])
        earlier = ThreadRequest(agent, conversation, party, window=rng.choice([None, 300.0]))
        await store.write(lambda t, r=earlier, at=100.0 + number: choose_thread(t, r, at))
    for index, party in enumerate(PARTIES):
        # An id issued for this turn: nobody has used it yet.
        request = ThreadRequest(
            rng.choice(agents),
            f"01JBNEWCONVERSATION{index:07d}",
            party,
            replaced_id=rng.choice([None, "old"]),
            window=rng.choice([None, 300.0]),
            issued_now=rng.choice([True, False]),
        )
        known = known_choice(request)
        chosen = await store.write(lambda t, r=request: choose_thread(t, r, 200.0))
        if request.issued_now and request.replaced_id is None and request.window is None:
            assert known == chosen
        else:
            assert known is None
