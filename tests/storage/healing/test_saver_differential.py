"""HealingSaver against a saver that never fails, over random sequences of operations.

Each seed draws a sequence over a few conversations: turns of a small LangGraph graph,
deletions of conversations, outages that begin between turns or at the Nth call of the
database (in the middle of a turn, or of a write-back), outages that end (waited out or
not: turns then meet the write-back), and restarts (a new health and saver over the same
file, remembering nothing, as after a Home Assistant restart). The same turns and
deletions go to a plain SQLite saver that never fails. Once the last outage is healed, the
newest state of every conversation in the database must be the reference's: the same
messages in the same order, each once; a deleted conversation is gone; and every
checkpoint's parent is in the database (the chain of checkpoints is whole).

Two kinds of outage: a server that stops answering (every call fails), and an SQLite file
that refuses writes but answers reads (`reads_while_down`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
import itertools
from pathlib import Path
import random

from langgraph.graph.state import CompiledStateGraph
import pytest

from custom_components.langgraph_conversation.storage.healing.saver import HealingSaver
from custom_components.langgraph_conversation.storage.sqlite import SqliteCheckpointSaver

from . import (
    Switch,
    Switched,
    build_graph,
    config_of,
    new_health,
    newest_messages,
    question,
    wait_up,
)

THREADS = ("kitchen", "garage", "porch", "attic")
SEEDS_PER_BLOCK = 10
BLOCKS = 10  # 100 seeds for each kind of outage


@dataclass
class Healing:
    """The side under test: the database behind a switch, the healing saver over it."""

    database: SqliteCheckpointSaver
    reads_while_down: bool
    switch: Switch = field(default_factory=Switch)
    graph: CompiledStateGraph | None = None

    def start(self) -> None:
        """As Home Assistant starting: a new health and saver, nothing remembered."""
        self.health = new_health(self.switch, reads_while_down=self.reads_while_down)
        switched = Switched(self.database, self.switch)
        self.saver = HealingSaver(lambda: switched, self.health)
        self.graph = build_graph(self.saver)

    def outage(self, rng: random.Random) -> str:
        """Down now, or at the Nth call of the database from now."""
        if rng.random() < 0.5:
            self.switch.off(read_only=self.reads_while_down)
            return "down"
        calls = rng.randint(1, 12)
        self.switch.fail_after(calls, read_only=self.reads_while_down)
        return f"down at call {calls}"


async def play(seed: int, healing: Healing, reference: CompiledStateGraph) -> list[str]:
    """The seed's sequence on both sides; the operations done, for the failure message."""
    rng = random.Random(seed)
    numbers = itertools.count()
    outage = False
    done: list[str] = []
    for _ in range(rng.randint(10, 24)):
        roll = rng.random()
        if roll < 0.12:
            thread = rng.choice(THREADS)
            await healing.saver.adelete_thread(thread)
            await reference.checkpointer.adelete_thread(thread)
            done.append(f"delete {thread}")
        elif roll < 0.27 and not outage:
            outage = True
            done.append(healing.outage(rng))
        elif roll < 0.42 and outage:
            outage = False
            healing.switch.switch_on()
            done.append("up")
            if rng.random() < 0.5:
                await wait_up(healing.health)
                done.append("healed")
        elif roll < 0.48 and not outage:
            await wait_up(healing.health)
            # As the storage closes: the writes on their way first (HealingStorage.aclose).
            await healing.saver.settled()
            await healing.health.aclose()
            healing.start()
            done.append("restart")
        else:
            thread, number = rng.choice(THREADS), next(numbers)
            assert healing.graph is not None
            await healing.graph.ainvoke(question(thread, number), config_of(thread))
            await reference.ainvoke(question(thread, number), config_of(thread))
            done.append(f"turn {number} on {thread}")
    healing.switch.switch_on()
    await wait_up(healing.health)
    # The database is read directly next: after the last turn's write. (A conversation
    # begun afresh reads the database before its write, so the write may not be queued
    # yet when its turn returns.)
    await healing.saver.settled()
    return done


async def check_chain(database: SqliteCheckpointSaver, context: str) -> None:
    """Every checkpoint once, each parent in the database."""
    found = [item async for item in database.alist(None)]
    ids = [item.checkpoint["id"] for item in found]
    assert len(ids) == len(set(ids)), context
    held = {(item.config["configurable"]["thread_id"], item.checkpoint["id"]) for item in found}
    for item in found:
        if item.parent_config is not None:
            parent = item.parent_config["configurable"]
            assert (parent["thread_id"], parent["checkpoint_id"]) in held, context


async def run_seed(seed: int, folder: Path, reads_while_down: bool) -> list[str]:
    """Play one seed and compare; returns what was played (every comparison asserts)."""
    database = await SqliteCheckpointSaver.open(folder / f"healing-{seed}.db")
    plain = await SqliteCheckpointSaver.open(folder / f"reference-{seed}.db")
    healing = Healing(database, reads_while_down)
    healing.start()
    try:
        done = await play(seed, healing, build_graph(plain))
        context = f"seed {seed}: {', '.join(done)}"
        for thread in THREADS:
            healed, expected = (
                await newest_messages(database, thread),
                await newest_messages(plain, thread),
            )
            assert healed == expected, f"{thread} after {context}"
            ids = [message_id for message_id, _ in healed]
            assert len(ids) == len(set(ids)), f"{thread} after {context}"
            gone = await plain.aget_tuple(config_of(thread)) is None
            assert (await database.aget_tuple(config_of(thread)) is None) == gone, context
        await check_chain(database, context)
        return done
    finally:
        await healing.health.aclose()
        await database.aclose()
        await plain.aclose()


@pytest.mark.parametrize("block", range(BLOCKS))
@pytest.mark.parametrize("reads_while_down", [False, True], ids=["server", "file"])
async def test_healed_database_holds_what_never_failed(
    block: int, reads_while_down: bool, tmp_path: Path
) -> None:
    """Random turns, deletions, outages and restarts: once healed, the database holds the
    newest state of every conversation as a saver that never failed does."""
    played = [
        await run_seed(seed, tmp_path, reads_while_down)
        for seed in range(block * SEEDS_PER_BLOCK, (block + 1) * SEEDS_PER_BLOCK)
    ]
    # The block really exercised outages and turns, not an empty script.
    steps = [step for done in played for step in done]
    assert any(step.startswith("turn") for step in steps)
    assert any(step.startswith("down") for step in steps), steps
