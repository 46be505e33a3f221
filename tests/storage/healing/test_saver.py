"""HealingSaver's rules, case by case.

- Its clones (LangGraph clones a checkpointer per allow-list when strict msgpack is on)
  share one memory side and one write-back with the original.
- A conversation begun afresh in memory while the database holds it is written back after
  the database's history: the database's messages first, each message once, also when a
  turn arrives during the write-back (a second pass) and when a turn begun in memory ends
  after the database is back.
- Where the database still answers reads (an SQLite file refusing writes), a conversation
  not remembered continues with its history, but one deleted during the outage does not
  come back from the database.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
import gc
from pathlib import Path
from typing import Any
import weakref

import pytest

from custom_components.langgraph_conversation.storage.healing import StorageHealth
from custom_components.langgraph_conversation.storage.healing.saver import HealingSaver
from custom_components.langgraph_conversation.storage.sqlite import SqliteCheckpointSaver

from . import (
    PATIENCE,
    DatabaseDown,
    Switch,
    Switched,
    build_graph,
    config_of,
    newest_messages,
    question,
    turn_ids,
    wait_for,
    wait_up,
)

KITCHEN = config_of("kitchen")

type MakeHealth = Callable[..., StorageHealth]


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[SqliteCheckpointSaver]:
    """threads.db with two turns on "kitchen", written before Home Assistant started."""
    saver = await SqliteCheckpointSaver.open(tmp_path / "threads.db")
    graph = build_graph(saver)
    for number in (1, 2):
        await graph.ainvoke(question("kitchen", number), KITCHEN)
    yield saver
    await saver.aclose()


async def held(database: SqliteCheckpointSaver, thread: str = "kitchen") -> list[str]:
    return [message_id for message_id, _ in await newest_messages(database, thread)]


def ids(state: dict[str, list]) -> list[str]:
    return [message.id for message in state["messages"]]


async def test_clones_share_the_memory_side(
    database: SqliteCheckpointSaver, make_health: MakeHealth
) -> None:
    """A clone with an allow-list writes to the same memory side as the original: the
    original reads it, and its write-back brings it to the database."""
    switch = Switch()
    health = make_health(switch)
    switched = Switched(database, switch)
    saver = HealingSaver(lambda: switched, health)
    clone = saver.with_allowlist([("langchain_core", "messages", "human", "HumanMessage")])
    assert clone is not saver
    graph = build_graph(clone)
    await graph.ainvoke(question("kitchen", 3), KITCHEN)
    switch.off()
    await graph.ainvoke(question("kitchen", 4), KITCHEN)
    assert not health.up
    found = await saver.aget_tuple(KITCHEN)
    assert found is not None
    assert ids(found.checkpoint["channel_values"]) == turn_ids("kitchen", 1, 2, 3, 4)
    # A clone of the clone too, as LangGraph may make one per compiled graph.
    await build_graph(clone.with_allowlist([("tests", "Other")])).ainvoke(
        question("kitchen", 5), KITCHEN
    )
    switch.switch_on()
    await wait_up(health)
    assert await held(database) == turn_ids("kitchen", 1, 2, 3, 4, 5)


def test_a_clone_is_made_once_per_allowlist(
    database: SqliteCheckpointSaver, make_health: MakeHealth
) -> None:
    """LangGraph asks for a clone at every run, with its compiled graph's same set: the
    same clone comes back. Another collection, or the same one grown, gets its own clone,
    which reads with everything allowed."""
    saver = HealingSaver(lambda: database, make_health(Switch()))
    human = ("langchain_core", "messages", "human", "HumanMessage")
    other = ("tests", "Other")
    asked = {human}
    clone = saver.with_allowlist(asked)
    assert saver.with_allowlist(asked) is clone
    equal = saver.with_allowlist({human})
    assert equal is not clone
    asked.add(other)
    grown = saver.with_allowlist(asked)
    assert grown not in (clone, equal)
    assert grown.with_allowlist(asked) is grown.with_allowlist(asked)  # of a clone, too
    assert grown._allowlist == frozenset({human, other})
    assert clone._allowlist == frozenset({human})
    # Bounded: many graphs' sets do not pile up clones.
    for n in range(100):
        saver.with_allowlist({("tests", f"Kind{n}")})
    assert len(saver._sides.allowlisted) <= 16


async def test_begun_afresh_is_written_after_the_database_history(
    database: SqliteCheckpointSaver, make_health: MakeHealth
) -> None:
    """The database could not be opened at start: a turn on a conversation it holds
    begins afresh in memory, and is written back after the database's turns."""
    switch = Switch()
    switch.off()
    health = make_health(switch)
    switched = Switched(database, switch)
    graph = build_graph(HealingSaver(lambda: switched, health))
    health.start_down("could not be opened")
    assert ids(await graph.ainvoke(question("kitchen", 3), KITCHEN)) == turn_ids("kitchen", 3)
    switch.switch_on()
    await wait_up(health)
    assert await held(database) == turn_ids("kitchen", 1, 2, 3)
    # On the database again, the next turn continues the whole history.
    state = await graph.ainvoke(question("kitchen", 4), KITCHEN)
    assert ids(state) == turn_ids("kitchen", 1, 2, 3, 4)


async def test_turn_during_the_write_back_of_a_conversation_begun_afresh(
    database: SqliteCheckpointSaver, make_health: MakeHealth
) -> None:
    """A turn arriving while the write-back runs is written in a second pass: the
    conversation begun afresh is written after the database's turns once, not twice."""
    switch = Switch()
    switch.off()
    health = make_health(switch)
    switched = Switched(database, switch)
    graph = build_graph(HealingSaver(lambda: switched, health))
    health.start_down("could not be opened")
    await graph.ainvoke(question("kitchen", 3), KITCHEN)
    turned: list[int] = []

    async def turn_meanwhile() -> dict[str, int]:
        # A part written back after the saver's: the database is still down for turns.
        if not turned:
            turned.append(4)
            await graph.ainvoke(question("kitchen", 4), KITCHEN)
        return {}

    health.add_part(turn_meanwhile, lambda: None)
    switch.switch_on()
    await wait_up(health)
    assert turned == [4]
    assert await held(database) == turn_ids("kitchen", 1, 2, 3, 4)


async def test_turn_begun_in_memory_ends_on_the_database(
    database: SqliteCheckpointSaver, make_health: MakeHealth
) -> None:
    """A turn that began afresh in memory and ends after the database came back: what it
    writes to the database still follows the database's history."""
    switch = Switch()
    switch.off()
    health = make_health(switch)
    switched = Switched(database, switch)
    entered, gate = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        entered.set()
        await gate.wait()

    saver = HealingSaver(lambda: switched, health)
    held_graph, graph = build_graph(saver, pause=hold), build_graph(saver)
    health.start_down("could not be opened")
    turn = asyncio.create_task(held_graph.ainvoke(question("kitchen", 3), KITCHEN))
    await wait_for(entered.is_set, lambda: "the turn never reached its reply")
    switch.switch_on()
    await wait_up(health)
    gate.set()
    await turn
    # Read directly: after the turn's write, which reads the database's history first
    # (begun afresh), so it may not be queued yet when the turn returns.
    await saver.settled()
    assert await held(database) == turn_ids("kitchen", 1, 2, 3)
    state = await graph.ainvoke(question("kitchen", 4), KITCHEN)
    assert ids(state) == turn_ids("kitchen", 1, 2, 3, 4)
    await saver.settled()
    assert await held(database) == turn_ids("kitchen", 1, 2, 3, 4)


async def test_file_refusing_writes_still_gives_the_history(
    database: SqliteCheckpointSaver, make_health: MakeHealth
) -> None:
    """A conversation not used since start, while its file refuses writes but answers
    reads: the turn continues its history, and the database gets the turn once."""
    switch = Switch()
    health = make_health(switch, reads_while_down=True)
    switched = Switched(database, switch)
    graph = build_graph(HealingSaver(lambda: switched, health))
    switch.off(read_only=True)
    state = await graph.ainvoke(question("kitchen", 3), KITCHEN)
    assert not health.up
    assert ids(state) == turn_ids("kitchen", 1, 2, 3)
    switch.switch_on()
    await wait_up(health)
    assert await held(database) == turn_ids("kitchen", 1, 2, 3)


async def test_deleted_in_the_outage_does_not_come_back(
    database: SqliteCheckpointSaver, make_health: MakeHealth
) -> None:
    """A conversation deleted while its file refuses writes begins afresh at its next
    turn (not from the database's copy, which the write-back deletes), and only that turn
    is in the database afterwards."""
    switch = Switch()
    health = make_health(switch, reads_while_down=True)
    switched = Switched(database, switch)
    saver = HealingSaver(lambda: switched, health)
    graph = build_graph(saver)
    await graph.ainvoke(question("kitchen", 3), KITCHEN)
    switch.off(read_only=True)
    await saver.adelete_thread("kitchen")
    assert not health.up
    assert ids(await graph.ainvoke(question("kitchen", 4), KITCHEN)) == turn_ids("kitchen", 4)
    switch.switch_on()
    await wait_up(health)
    assert await held(database) == turn_ids("kitchen", 4)
    checkpoints = [found async for found in database.alist(KITCHEN)]
    assert checkpoints[-1].parent_config is None


class Interrupted:
    """The database's saver, running what `meanwhile` holds for a method once, at its next
    call (a deletion or a turn arriving while the write-back runs)."""

    def __init__(
        self,
        inner: SqliteCheckpointSaver,
        meanwhile: dict[str, Callable[[], Awaitable[None]]] | None = None,
    ) -> None:
        self._inner = inner
        self.meanwhile = {} if meanwhile is None else meanwhile

    def with_allowlist(self, allowlist: Any) -> Interrupted:
        """A clone as LangGraph makes one, sharing what is to run meanwhile."""
        return Interrupted(self._inner.with_allowlist(allowlist), self.meanwhile)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if name not in ("aput", "adelete_thread"):
            return found

        async def called(*args: Any, **kwargs: Any) -> Any:
            if (meanwhile := self.meanwhile.pop(name, None)) is not None:
                await meanwhile()
            return await found(*args, **kwargs)

        return called


async def test_deleted_and_begun_again_during_the_write_back(
    database: SqliteCheckpointSaver, make_health: MakeHealth
) -> None:
    """While the write-back deletes one conversation, another is deleted and begun again
    in memory: its new turn is in the database afterwards, its old ones are not."""
    switch = Switch()
    health = make_health(switch)
    interrupted = Interrupted(database)
    switched = Switched(interrupted, switch)
    saver = HealingSaver(lambda: switched, health)
    graph = build_graph(saver)
    await graph.ainvoke(question("garage", 1), config_of("garage"))
    switch.off()
    await saver.adelete_thread("kitchen")
    await graph.ainvoke(question("garage", 2), config_of("garage"))

    async def delete_and_begin_again() -> None:
        await saver.adelete_thread("garage")
        await graph.ainvoke(question("garage", 3), config_of("garage"))

    interrupted.meanwhile["adelete_thread"] = delete_and_begin_again
    switch.switch_on()
    await wait_up(health)
    assert not interrupted.meanwhile
    assert await held(database, "garage") == turn_ids("garage", 3)
    assert await held(database) == []


async def test_deleted_while_its_write_back_runs_stays_deleted(
    database: SqliteCheckpointSaver, make_health: MakeHealth
) -> None:
    """A conversation deleted while the write-back copies it: gone afterwards, and at the
    next outage it begins afresh (nothing remembered of it comes back)."""
    switch = Switch()
    health = make_health(switch)
    interrupted = Interrupted(database)
    switched = Switched(interrupted, switch)
    saver = HealingSaver(lambda: switched, health)
    graph = build_graph(saver)
    await graph.ainvoke(question("garage", 1), config_of("garage"))
    switch.off()
    await graph.ainvoke(question("garage", 2), config_of("garage"))

    async def delete() -> None:
        await saver.adelete_thread("garage")

    interrupted.meanwhile["aput"] = delete
    switch.switch_on()
    await wait_up(health)
    assert await held(database, "garage") == []
    switch.off()
    state = await graph.ainvoke(question("garage", 3), config_of("garage"))
    assert ids(state) == turn_ids("garage", 3)
    switch.switch_on()
    await wait_up(health)
    assert await held(database, "garage") == turn_ids("garage", 3)


class _TurnLike:
    """Stands for what a turn hands its run: its tools, models and memories."""


async def test_a_remembered_checkpoint_keeps_no_run_alive(
    database: SqliteCheckpointSaver, make_health: MakeHealth
) -> None:
    """The saver remembers each conversation's newest checkpoint (for an outage), not the
    run that wrote it: the config LangGraph hands it carries the run's context and every
    configurable value, which would keep each conversation's last turn alive."""
    switch = Switch()
    saver = HealingSaver(lambda: Switched(database, switch), make_health(switch))
    graph = build_graph(saver)
    alive = []
    for number in (3, 4):
        turn = _TurnLike()
        alive.append(weakref.ref(turn))
        config = {"configurable": {**KITCHEN["configurable"], "turn_stuff": turn}}
        await graph.ainvoke(question("kitchen", number), config, context=turn)
        del turn, config
    # A write on its way holds its run's config until it is written (an instant).
    await saver.settled()
    gc.collect()

    assert [ref() for ref in alive] == [None, None]
    # What it remembers still names the checkpoint, and the next turn goes on from it.
    found = await saver.aget_tuple(KITCHEN)
    assert found is not None
    assert ids(found.checkpoint["channel_values"]) == turn_ids("kitchen", 1, 2, 3, 4)


class _Gate:
    """A slow disk: checkpoint writes wait until it opens, the next one then fails with
    `failure` if one is set."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.waiting = 0
        self.failure: Exception | None = None


class _Slow:
    """The database's saver behind a _Gate (its reads pass straight through)."""

    def __init__(self, inner: SqliteCheckpointSaver, gate: _Gate) -> None:
        self._inner = inner
        self._gate = gate

    def with_allowlist(self, allowlist: Any) -> _Slow:
        return _Slow(self._inner.with_allowlist(allowlist), self._gate)

    async def aput(self, *args: Any) -> Any:
        self._gate.waiting += 1
        await self._gate.open.wait()
        self._gate.waiting -= 1
        if (failure := self._gate.failure) is not None:
            self._gate.failure = None
            raise failure
        return await self._inner.aput(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _slow_saver(
    database: SqliteCheckpointSaver, make_health: MakeHealth
) -> tuple[HealingSaver, _Gate, StorageHealth]:
    switch = Switch()
    gate = _Gate()
    health = make_health(switch)
    return HealingSaver(lambda: Switched(_Slow(database, gate), switch), health), gate, health


async def _turn(graph: Any, number: int) -> dict[str, Any]:
    """One turn on "kitchen", saved as it ends (as the agent's runs are); bounded by
    PATIENCE: a turn that waited for the slow disk would hang here."""
    return await asyncio.wait_for(
        graph.ainvoke(question("kitchen", number), KITCHEN, durability="exit"), PATIENCE
    )


async def test_a_turn_ends_before_its_checkpoint_is_written_and_nobody_reads_past_it(
    database: SqliteCheckpointSaver, make_health: MakeHealth
) -> None:
    """A turn ends while the disk still writes its checkpoint. A read of the conversation
    (the next turn's, or anybody's) waits for that write and sees the turn; so do the
    interrupts a next turn checks first, and closing waits for it too."""
    saver, gate, _health = _slow_saver(database, make_health)
    graph = build_graph(saver)

    state = await _turn(graph, 3)
    assert ids(state) == turn_ids("kitchen", 1, 2, 3)
    assert gate.waiting == 1
    assert await held(database) == turn_ids("kitchen", 1, 2)
    read = asyncio.ensure_future(saver.aget_tuple(KITCHEN))
    interrupts = asyncio.ensure_future(saver.apending_interrupts("kitchen"))
    closing = asyncio.ensure_future(saver.settled())
    # Time for a read that did not wait to reach the file (which lacks turn 3 meanwhile).
    await asyncio.sleep(0.2)
    assert not closing.done()
    gate.open.set()

    found = await asyncio.wait_for(read, PATIENCE)
    assert found is not None
    assert ids(found.checkpoint["channel_values"]) == turn_ids("kitchen", 1, 2, 3)
    assert await asyncio.wait_for(interrupts, PATIENCE) == []
    await asyncio.wait_for(closing, PATIENCE)
    assert await held(database) == turn_ids("kitchen", 1, 2, 3)
    state = await _turn(graph, 4)
    assert ids(state) == turn_ids("kitchen", 1, 2, 3, 4)


async def test_a_write_failing_after_its_turn_ended_goes_on_in_memory(
    database: SqliteCheckpointSaver, make_health: MakeHealth
) -> None:
    """The disk fails a checkpoint after its turn ended: the conversation goes on in
    memory from that turn, and the file gets it with the write-back."""
    saver, gate, health = _slow_saver(database, make_health)
    graph = build_graph(saver)
    gate.failure = DatabaseDown("the disk went away")

    await _turn(graph, 3)
    gate.open.set()
    state = await _turn(graph, 4)

    assert ids(state) == turn_ids("kitchen", 1, 2, 3, 4)
    await wait_up(health)
    await saver.settled()
    assert await held(database) == turn_ids("kitchen", 1, 2, 3, 4)


async def test_a_write_refused_after_its_turn_ended_is_said_in_the_log(
    database: SqliteCheckpointSaver, make_health: MakeHealth, caplog: pytest.LogCaptureFixture
) -> None:
    """An error that is no outage, met after the turn ended, can no longer fail the turn:
    the log says which conversation lost its last turn, and it goes on from the turn
    before, whole."""
    saver, gate, health = _slow_saver(database, make_health)
    graph = build_graph(saver)
    gate.failure = ValueError("the disk refuses this value")

    await _turn(graph, 3)
    gate.open.set()
    await saver.settled()

    assert any(
        "kitchen" in record.getMessage() and "could not be saved" in record.getMessage()
        for record in caplog.records
        if record.levelname == "ERROR"
    )
    assert health.up
    state = await _turn(graph, 4)
    assert ids(state) == turn_ids("kitchen", 1, 2, 4)
    assert await held(database) == turn_ids("kitchen", 1, 2, 4)
