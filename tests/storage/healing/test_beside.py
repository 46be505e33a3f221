"""HealingLinks and HealingRatings over the project's SQLite tables in threads.db.

Random link puts, forgotten threads, ratings and reads, with outages: during an outage a
conversation linked since start is still known (the in-memory table starts from the links
remembered), ratings given during it are read back; once healed, the database holds
exactly what a model that never failed holds (a forgotten thread's links gone, the newest
link and rating of each key). Then a write-back that fails at links or at ratings: newer
values written meanwhile win.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
import random

import pytest

from custom_components.langgraph_conversation.agent.memory import MemoryLinkStore
from custom_components.langgraph_conversation.storage.healing import (
    HealingLinks,
    HealingRatings,
    StorageHealth,
)
from custom_components.langgraph_conversation.storage.sqlite import SqliteCheckpointSaver
from custom_components.langgraph_conversation.storage.sqlite.links import SqliteLinkStore
from custom_components.langgraph_conversation.storage.sqlite.ratings import SqliteRatingStore

from . import Switch, Switched, wait_for, wait_up

type MakeHealth = Callable[..., StorageHealth]
type LinkKey = tuple[str, str, str]

AGENTS, PARTIES = ("agent-a", "agent-b"), ("alice", "bob")
CONVERSATIONS, THREADS, MESSAGES = ("c0", "c1", "c2"), ("t0", "t1", "t2", "t3"), ("m0", "m1")
SEEDS = 100


@dataclass
class Tables:
    """threads.db's link and rating tables, raw and behind the healing parts."""

    file: SqliteCheckpointSaver
    switch: Switch = field(default_factory=Switch)

    @property
    def links(self) -> SqliteLinkStore:
        return SqliteLinkStore(self.file.database)

    @property
    def ratings(self) -> SqliteRatingStore:
        return SqliteRatingStore(self.file.database)

    def healing(self, health: StorageHealth) -> tuple[HealingLinks, HealingRatings]:
        links, ratings = Switched(self.links, self.switch), Switched(self.ratings, self.switch)
        return (
            HealingLinks(lambda: links, health, MemoryLinkStore),
            HealingRatings(lambda: ratings, health),
        )

    async def link_rows(self) -> dict[LinkKey, tuple[str, float]]:
        rows = await self.links.read(lambda table: table.all_rows())
        return {(agent, party, conv): (thread, used) for agent, party, conv, thread, used in rows}

    async def rating_rows(self) -> dict[tuple[str, str], tuple[str, str, float]]:
        return {(t, m): (r, c, at) for t, m, r, c, at in await self.ratings.all_rows()}


@pytest.fixture
async def tables(tmp_path: Path) -> AsyncIterator[Tables]:
    file = await SqliteCheckpointSaver.open(tmp_path / "threads.db")
    yield Tables(file)
    await file.aclose()


@dataclass
class Model:
    """The links and ratings as a database that never failed holds them, the links the
    healing parts saw since start, and the ratings given during the current outage."""

    links: dict[LinkKey, tuple[str, float]] = field(default_factory=dict)
    ratings: dict[tuple[str, str], tuple[str, str, float]] = field(default_factory=dict)
    seen: set[LinkKey] = field(default_factory=set)
    outage: int = 0
    rated_during: dict[tuple[str, str], tuple[str, str, float]] = field(default_factory=dict)

    def forget(self, thread: str) -> None:
        self.links = {key: row for key, row in self.links.items() if row[0] != thread}


async def link_or_forget(rng: random.Random, links: HealingLinks, model: Model, now: float) -> None:
    if rng.random() < 0.2:
        thread = rng.choice(THREADS)
        await links.write(lambda table: table.forget_thread(thread))
        model.forget(thread)
        return
    key = (rng.choice(AGENTS), rng.choice(PARTIES), rng.choice(CONVERSATIONS))
    thread = rng.choice(THREADS)
    await links.write(lambda table: table.put(*key, thread, now))
    model.links[key] = (thread, now)
    model.seen.add(key)


async def read_link(rng: random.Random, links: HealingLinks, model: Model, down: bool) -> None:
    """A link known since start is found during an outage too; one the healing parts
    never saw may or may not be (the in-memory table does not read the database)."""
    key = (rng.choice(AGENTS), rng.choice(PARTIES), rng.choice(CONVERSATIONS))
    found = await links.read(lambda table: table.thread_of(*key))
    expected = model.links[key][0] if key in model.links else None
    if down and key not in model.seen:
        assert found in (None, expected), key
    else:
        assert found == expected, key


async def read_ratings(
    rng: random.Random, ratings: HealingRatings, model: Model, health: StorageHealth, on: bool
) -> None:
    """A thread's ratings: all of them while the database works, those given during the
    outage while it is down (the read that finds it down: none yet)."""
    thread = rng.choice(THREADS)
    if health.up and on:
        given = model.ratings
    elif health.up or health.outage.outages != model.outage:
        given = {}
    else:
        given = model.rated_during
    found = await ratings.of_thread(thread)
    assert found == {
        m: {"rating": r, "comment": c} for (t, m), (r, c, _) in given.items() if t == thread
    }


async def rate(
    rng: random.Random, ratings: HealingRatings, model: Model, health: StorageHealth, now: float
) -> None:
    key = (rng.choice(THREADS), rng.choice(MESSAGES))
    row = (rng.choice(("up", "down")), f"comment {now}", now)
    await ratings.rate(*key, *row)
    model.ratings[key] = row
    if not health.up:  # given during an outage
        if health.outage.outages != model.outage:
            model.outage, model.rated_during = health.outage.outages, {}
        model.rated_during[key] = row


async def play(seed: int, tables: Tables, health: StorageHealth) -> None:
    rng, model = random.Random(seed), Model()
    for number, key in enumerate(zip(AGENTS * 3, PARTIES * 3, CONVERSATIONS, strict=False)):
        # Links written before Home Assistant started.
        await tables.links.write(
            lambda table, key=key, number=number: table.put(*key, THREADS[number], -1.0)
        )
        model.links[key] = (THREADS[number], -1.0)
    links, ratings = tables.healing(health)
    for number in range(rng.randint(15, 40)):
        roll, switch = rng.random(), tables.switch
        if roll < 0.1 and switch.on:
            switch.off()
        elif roll < 0.2 and not switch.on:
            switch.switch_on()  # writes may meet the write-back until the next read
        elif roll < 0.45:
            await link_or_forget(rng, links, model, float(number))
        elif roll < 0.65:
            await rate(rng, ratings, model, health, float(number))
        else:
            if switch.on:
                await wait_up(health)
            if rng.random() < 0.5:
                await read_link(rng, links, model, down=not (health.up and switch.on))
            else:
                await read_ratings(rng, ratings, model, health, switch.on)
    tables.switch.switch_on()
    await wait_up(health)
    assert await tables.link_rows() == model.links
    assert await tables.rating_rows() == model.ratings


@pytest.mark.parametrize("seed", range(SEEDS))
async def test_links_and_ratings_heal_as_a_model_says(
    seed: int, tables: Tables, make_health: MakeHealth
) -> None:
    """Random links, forgotten threads, ratings and reads with outages: reads as the model
    says, and once healed the tables hold what the model holds."""
    await play(seed, tables, make_health(tables.switch))


@pytest.mark.parametrize("failing_call", [1, 2], ids=["links", "ratings"])
async def test_failed_write_back_keeps_them_and_newer_values_win(
    failing_call: int, tables: Tables, make_health: MakeHealth
) -> None:
    """The database fails again at the write-back of the links (its first call) or of the
    ratings (its second): still down, everything kept; what is written meanwhile replaces
    it, and the next attempt writes the newest of each."""
    health = make_health(tables.switch)
    links, ratings = tables.healing(health)
    key = ("agent-a", "alice", "c0")
    await links.write(lambda table: table.put(*key, "t0", 1.0))
    tables.switch.off()
    await links.write(lambda table: table.put(*key, "t1", 2.0))
    await links.write(lambda table: table.put("agent-a", "bob", "c1", "t2", 2.0))
    await ratings.rate("t1", "m0", "down", "", 2.0)
    tables.switch.switch_on()
    tables.switch.fail_after(failing_call)
    await wait_for(lambda: not tables.switch.on, lambda: "the write-back never failed")
    assert not health.up
    await links.write(lambda table: table.put(*key, "t3", 3.0))
    await ratings.rate("t1", "m0", "up", "better", 3.0)
    assert await links.read(lambda table: table.thread_of(*key)) == "t3"
    tables.switch.switch_on()
    await wait_up(health)
    assert await tables.link_rows() == {key: ("t3", 3.0), ("agent-a", "bob", "c1"): ("t2", 2.0)}
    assert await tables.rating_rows() == {("t1", "m0"): ("up", "better", 3.0)}


async def test_links_known_before_the_outage_go_on(tables: Tables, make_health: MakeHealth) -> None:
    """Links written since start are known during the outage (the memory table starts with
    them), a thread forgotten during it loses its links there and in the database."""
    health = make_health(tables.switch)
    links, _ = tables.healing(health)
    for conversation, thread in (("c0", "t0"), ("c1", "t1"), ("c2", "t1")):
        await links.write(lambda t, c=conversation, th=thread: t.put("a", "p", c, th, 1.0))
    tables.switch.off()
    await links.write(lambda table: table.forget_thread("t1"))
    assert not health.up
    found = await links.read(lambda t: [t.thread_of("a", "p", c) for c in ("c0", "c1", "c2")])
    assert found == ["t0", None, None]
    tables.switch.switch_on()
    await wait_up(health)
    assert await tables.link_rows() == {("a", "p", "c0"): ("t0", 1.0)}


async def test_link_replaced_then_forgotten_in_the_outage_is_gone(
    tables: Tables, make_health: MakeHealth
) -> None:
    """A conversation moved to a new thread during the outage, and that thread forgotten:
    the conversation has no link afterwards (not its link from before the outage)."""
    health = make_health(tables.switch)
    links, _ = tables.healing(health)
    await links.write(lambda table: table.put("a", "p", "c0", "t0", 1.0))
    tables.switch.off()
    await links.write(lambda table: table.put("a", "p", "c0", "t1", 2.0))
    await links.write(lambda table: table.forget_thread("t1"))
    assert await links.read(lambda table: table.thread_of("a", "p", "c0")) is None
    tables.switch.switch_on()
    await wait_up(health)
    assert await tables.link_rows() == {}
