"""SqliteCheckpointSaver: LangGraph's conformance suite, retention, safety, growth."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import closing
from datetime import UTC, datetime, timedelta
import itertools
from pathlib import Path
import random
import sqlite3
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointTuple
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    JsonPlusSerializer,
)
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT
from langgraph.types import Command
import ormsgpack
import pytest

from custom_components.langgraph_conversation.storage.sqlite.checkpointer import (
    SCHEMA_VERSION,
    SqliteCheckpointSaver,
)
from custom_components.langgraph_conversation.storage.sqlite.database import SchemaVersionError

from .. import build_chat_graph, build_confirmation_graph, human, reference_saver

type OpenSaver = Callable[..., Awaitable[SqliteCheckpointSaver]]


def thread(thread_id: str) -> RunnableConfig:
    """The config of a thread's newest checkpoint."""
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


@pytest.fixture
async def open_saver(tmp_path: Path) -> AsyncIterator[OpenSaver]:
    """Opens savers on tmp_path/checkpoints.db and closes them all after the test."""
    opened: list[SqliteCheckpointSaver] = []

    async def _open(**kwargs: Any) -> SqliteCheckpointSaver:
        saver = await SqliteCheckpointSaver.open(tmp_path / "checkpoints.db", **kwargs)
        opened.append(saver)
        return saver

    yield _open
    for saver in opened:
        await saver.aclose()


async def sql(path: Path, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Run one statement through a separate connection, as another process would."""

    def run() -> list[Any]:
        with closing(sqlite3.connect(path, isolation_level=None)) as connection:
            return connection.execute(statement, params).fetchall()

    return await asyncio.to_thread(run)


def new_checkpoint_id() -> str:
    """A checkpoint id as LangGraph makes them: later ids sort higher."""
    return str(uuid6(clock_seq=-1))


async def put_checkpoint(
    saver: SqliteCheckpointSaver,
    thread_id: str,
    *,
    ts: datetime | None = None,
    checkpoint_ns: str = "",
    values: dict[str, Any] | None = None,
    checkpoint_id: str | None = None,
) -> RunnableConfig:
    """Store one checkpoint whose channels are all new, as a first step would."""
    values = values or {}
    versions = {channel: saver.get_next_version(None, None) for channel in values}
    checkpoint: Checkpoint = {
        "v": 1,
        "id": checkpoint_id or new_checkpoint_id(),
        "ts": (ts or datetime.now(UTC)).isoformat(),
        "channel_values": values,
        "channel_versions": versions,
        "versions_seen": {},
        "updated_channels": None,
    }
    config: RunnableConfig = {
        "configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    }
    return await saver.aput(config, checkpoint, {"source": "loop", "step": 0}, versions)


def used_values(checkpoints: list[CheckpointTuple]) -> set[tuple[str, str]]:
    """The (channel, version) pairs some of these checkpoints refer to."""
    return {
        (channel, str(version))
        for checkpoint in checkpoints
        for channel, version in checkpoint.checkpoint["channel_versions"].items()
    }


async def test_conformance(tmp_path: Path) -> None:
    """LangGraph's conformance suite: every base and extended capability passes."""
    files = itertools.count()

    @checkpointer_test(name="SqliteCheckpointSaver")
    async def factory() -> AsyncIterator[SqliteCheckpointSaver]:
        saver = await SqliteCheckpointSaver.open(tmp_path / f"conformance-{next(files)}.db")
        try:
            yield saver
        finally:
            await saver.aclose()

    report = await validate(factory)
    report.print_report()
    for capability, result in report.results.items():
        assert result.detected, f"{capability} not detected"
        assert result.passed, f"{capability}: {result.failures}"
    assert report.passed_all_base()
    assert report.conformance_level() == "FULL"
    assert set(report.results) >= {"prune", "copy_thread", "delete_for_runs"}


async def test_keep_last_retains_newest_and_what_they_use(open_saver: OpenSaver) -> None:
    """keep_last=N: N checkpoints, their writes and values stay; the thread goes on."""
    saver = await open_saver(keep_last=3)
    graph = build_chat_graph(saver)
    config = thread("kitchen")
    for turn in range(6):
        await graph.ainvoke({"messages": [human(turn)]}, config)

    kept = [checkpoint async for checkpoint in saver.alist(config)]
    assert len(kept) == 3
    stats = await saver.stats()
    assert stats["checkpoints"] == 3
    assert stats["blobs"] == len(used_values(kept))
    assert stats["writes"] == sum(len(checkpoint.pending_writes or []) for checkpoint in kept)

    state = await graph.aget_state(config)
    assert [message.id for message in state.values["messages"]][-2:] == ["human-5", "ai-11"]
    result = await graph.ainvoke({"messages": [human(6)]}, config)
    assert len(result["messages"]) == 14
    assert len([snapshot async for snapshot in graph.aget_state_history(config)]) == 3


async def test_retention_and_writes_out_of_order(open_saver: OpenSaver) -> None:
    """LangGraph may store a task's writes before or after the checkpoint next to them.
    Writes ahead of their checkpoint survive retention; writes arriving after theirs was
    deleted are removed by the next retention."""
    saver = await open_saver(keep_last=1)
    first = await put_checkpoint(saver, "t", values={"a": 1})
    ahead_id = new_checkpoint_id()
    ahead = {"configurable": {**first["configurable"], "checkpoint_id": ahead_id}}
    await saver.aput_writes(ahead, [("a", "early")], "task-early")
    await put_checkpoint(saver, "t", values={"a": 2}, checkpoint_id=ahead_id)
    stored = await saver.aget_tuple(thread("t"))
    assert stored is not None
    assert stored.pending_writes == [("task-early", "a", "early")]

    await saver.aput_writes(first, [("a", "late")], "task-late")
    assert (await saver.stats())["writes"] == 2
    await put_checkpoint(saver, "t", values={"a": 3})
    stats = await saver.stats()
    assert (stats["checkpoints"], stats["writes"], stats["blobs"]) == (1, 0, 1)


async def test_keep_last_one_still_resumes_an_interrupt(open_saver: OpenSaver) -> None:
    """The pending interrupt lives in the newest checkpoint's writes, which retention keeps."""
    saver = await open_saver(keep_last=1)
    graph = build_confirmation_graph(saver)
    config = thread("front-door")
    paused = await graph.ainvoke({"messages": [human(0)]}, config)
    assert paused["__interrupt__"]
    assert (await saver.stats())["checkpoints"] == 1

    result = await graph.ainvoke(Command(resume="yes"), config)
    assert result["messages"][-1].content == "unlocked"


async def test_pending_interrupts_are_what_the_state_shows(open_saver: OpenSaver) -> None:
    """apending_interrupts answers "is this thread paused?" like aget_state, cheaply."""
    saver = await open_saver(keep_last=2)
    graph = build_confirmation_graph(saver)
    config = thread("front-door")
    assert await saver.apending_interrupts("front-door") == []
    await graph.ainvoke({"messages": [human(0)]}, config)
    state = await graph.aget_state(config)
    pending = await saver.apending_interrupts("front-door")
    assert [p.value for p in pending] == [i.value for i in state.interrupts]
    assert pending[0].value == {"action": "unlock", "args": {"entity_id": "lock.front"}}
    assert await saver.apending_interrupts("another-thread") == []

    await graph.ainvoke(Command(resume="no"), config)
    assert (await graph.aget_state(config)).interrupts == ()
    assert await saver.apending_interrupts("front-door") == []


async def test_the_read_after_the_interrupt_check_comes_from_it_once(
    open_saver: OpenSaver, tmp_path: Path
) -> None:
    """A turn checks for a pause, then LangGraph reads the same newest checkpoint: that
    read is answered from the check's rows (no second round trip), and only once. A
    change made behind the saver's back (the file is this process's alone) shows that."""
    saver = await open_saver()
    first = await put_checkpoint(saver, "kitchen", values={"said": "hello"})
    assert await saver.apending_interrupts("kitchen") == []
    await sql(tmp_path / "checkpoints.db", "DELETE FROM checkpoints")

    prefetched = await saver.aget_tuple(thread("kitchen"))
    assert prefetched is not None
    assert prefetched.config == first
    assert prefetched.checkpoint["channel_values"] == {"said": "hello"}
    assert await saver.aget_tuple(thread("kitchen")) is None


async def test_the_newest_checkpoint_as_written_is_read_without_reviving_it(
    open_saver: OpenSaver,
) -> None:
    """A saver reads its own newest checkpoint of a thread back with the values it wrote:
    the same messages, in containers of their own (a change to what one read returned
    does not reach the next). A newer checkpoint another saver wrote is read from the
    file, and so is any older one."""
    saver = await open_saver()
    other = await open_saver()
    hello, there = HumanMessage("hello", id="m1"), AIMessage("hi there", id="m2")
    first = await put_checkpoint(saver, "kitchen", values={"messages": [hello]})
    second = await put_checkpoint(saver, "kitchen", values={"messages": [hello, there]})

    for read in (saver.aget_tuple, lambda config: _after_check(saver, config)):
        found = await read(thread("kitchen"))
        assert found is not None
        assert found.config == second
        messages = found.checkpoint["channel_values"]["messages"]
        assert messages == [hello, there]
        assert messages[0] is hello
        assert messages[1] is there
        messages.append(HumanMessage("changed by a reader"))

    older = await saver.aget_tuple(first)
    assert older is not None
    assert older.checkpoint["channel_values"]["messages"] == [hello]
    assert older.checkpoint["channel_values"]["messages"][0] is not hello

    newer = await put_checkpoint(other, "kitchen", values={"messages": [there]})
    found = await saver.aget_tuple(thread("kitchen"))
    assert found is not None
    assert found.config == newer
    assert found.checkpoint["channel_values"]["messages"] == [there]
    assert found.checkpoint["channel_values"]["messages"][0] is not there


async def _after_check(saver: SqliteCheckpointSaver, config: RunnableConfig) -> Any:
    """The read a turn makes: the interrupt check, then the newest checkpoint."""
    await saver.apending_interrupts(config["configurable"]["thread_id"])
    return await saver.aget_tuple(config)


@pytest.mark.parametrize("seed", range(8))
async def test_reads_after_interrupt_checks_always_show_the_file(
    open_saver: OpenSaver, seed: int
) -> None:
    """Generated interleavings of interrupt checks, reads, checkpoints (this saver's and
    another's on the same file), pending writes, deletions and other writes to the file on
    three threads: every read shows what a second saver on its own connection reads from
    the file at that moment."""
    rng = random.Random(seed)
    saver = await open_saver()
    other = await open_saver()
    newest: dict[str, RunnableConfig] = {}
    checked: set[str] = set()  # threads checked with no write since: their read is served
    served = 0
    for step in range(150):
        name = rng.choice(("a", "b", "c"))
        action = rng.choice(
            ("check", "check", "read", "read", "put", "put_elsewhere", "writes", "delete", "other")
        )
        if action == "check":
            await saver.apending_interrupts(name)
            checked.add(name)
        elif action == "read":
            served += name in checked
            checked.discard(name)
            assert await saver.aget_tuple(thread(name)) == await other.aget_tuple(thread(name))
            continue
        elif action == "put":
            values = {"step": step, "said": [f"s{step}"], "held": {"step": step}}
            newest[name] = await put_checkpoint(saver, name, values=values)
        elif action == "put_elsewhere":
            # Another saver on the file writes a newer checkpoint: what this saver wrote
            # last is no longer the newest. (Between a turn's check and its read, the file
            # is taken to change only through this saver's database: its change count
            # moves with this write of the file's own.)
            newest[name] = await put_checkpoint(other, name, values={"said": [f"o{step}"]})
            await saver.database.check()
        elif action == "writes" and name in newest:
            channel = rng.choice((INTERRUPT, "said"))
            await saver.aput_writes(newest[name], [(channel, [f"w{step}"])], f"task-{step}")
        elif action == "delete":
            await saver.adelete_thread(name)
            newest.pop(name, None)
        elif action == "other":
            await saver.database.check()
        else:
            continue
        if action != "check":
            checked.clear()
    assert served > 0


async def test_delete_threads_idle_since(open_saver: OpenSaver) -> None:
    """A thread goes when its newest checkpoint, in any namespace, is older than the cutoff."""
    saver = await open_saver()
    now = datetime.now(UTC)
    await put_checkpoint(saver, "idle", ts=now - timedelta(days=40), values={"a": "old"})
    await put_checkpoint(saver, "idle", ts=now - timedelta(days=31), values={"a": "older"})
    await put_checkpoint(saver, "active", ts=now - timedelta(days=40), values={"a": "x"})
    await put_checkpoint(saver, "active", ts=now - timedelta(days=1), checkpoint_ns="child:1")
    await put_checkpoint(saver, "fresh", ts=now, values={"a": "new"})

    assert await saver.adelete_threads_idle_since(now - timedelta(days=30)) == 1

    assert await saver.aget_tuple(thread("idle")) is None
    assert await saver.aget_tuple(thread("active")) is not None
    assert await saver.aget_tuple(thread("fresh")) is not None
    stats = await saver.stats()
    assert (stats["threads"], stats["checkpoints"], stats["blobs"]) == (2, 3, 2)
    # A naive cutoff counts as UTC. "active" is kept by its newer child namespace.
    naive_cutoff = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=2)
    assert await saver.adelete_threads_idle_since(naive_cutoff) == 0


async def test_schema_version_and_reopen(open_saver: OpenSaver, tmp_path: Path) -> None:
    """The file records its schema version; data outlives aclose and a new open."""
    saver = await open_saver()
    graph = build_chat_graph(saver)
    for turn in range(2):
        await graph.ainvoke({"messages": [human(turn)]}, thread("hall"))
    await saver.aclose()
    await saver.aclose()

    path = tmp_path / "checkpoints.db"
    assert await sql(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert await sql(path, "PRAGMA journal_mode") == [("wal",)]

    reopened = await open_saver()
    state = await build_chat_graph(reopened).aget_state(thread("hall"))
    assert len(state.values["messages"]) == 4
    assert (await reopened.stats())["schema_version"] == SCHEMA_VERSION == 2


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    """A file from a newer integration version is left untouched, and no thread stays."""
    path = tmp_path / "checkpoints.db"
    await sql(path, f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(SchemaVersionError, match="schema version 3"):
        await SqliteCheckpointSaver.open(path)
    assert await sql(path, "PRAGMA user_version") == [(SCHEMA_VERSION + 1,)]


async def test_open_creates_the_directory(tmp_path: Path) -> None:
    """The parent directory is made (off the event loop) when missing."""
    path = tmp_path / "langgraph_conversation" / "threads.db"
    saver = await SqliteCheckpointSaver.open(path)
    await saver.aclose()
    assert await asyncio.to_thread(path.is_file)


async def test_keep_last_must_be_positive(tmp_path: Path) -> None:
    """keep_last=0 would delete the checkpoint just written."""
    with pytest.raises(ValueError, match="keep_last"):
        await SqliteCheckpointSaver.open(tmp_path / "checkpoints.db", keep_last=0)


async def test_stats(open_saver: OpenSaver) -> None:
    """Counts and sizes only, never contents."""
    saver = await open_saver()
    empty = await saver.stats()
    assert set(empty) == {
        "schema_version",
        "threads",
        "checkpoints",
        "writes",
        "blobs",
        "conversation_links",
        "answers_rated_up",
        "answers_rated_down",
        "size_bytes",
        "free_bytes",
    }
    assert empty["schema_version"] == SCHEMA_VERSION
    assert empty["threads"] == empty["checkpoints"] == empty["writes"] == empty["blobs"] == 0
    first = await put_checkpoint(saver, "one", values={"a": 1, "b": 2})
    await put_checkpoint(saver, "two", values={"a": 3})
    await saver.aput_writes(first, [("a", 5), ("b", 6)], "task-1")

    stats = await saver.stats()
    assert {key: stats[key] for key in ("threads", "checkpoints", "writes", "blobs")} == {
        "threads": 2,
        "checkpoints": 2,
        "writes": 2,
        "blobs": 3,
    }
    assert stats["size_bytes"] > 0


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("get_tuple", (thread("t"),)),
        ("get", (thread("t"),)),
        ("list", (thread("t"),)),
        ("put", (thread("t"), {}, {}, {})),
        ("put_writes", (thread("t"), [], "task")),
        ("delete_thread", ("t",)),
        ("delete_for_runs", (["run"],)),
        ("copy_thread", ("t", "u")),
        ("prune", (["t"],)),
    ],
)
async def test_sync_methods_raise(
    open_saver: OpenSaver, method: str, args: tuple[Any, ...]
) -> None:
    """A sync call would deadlock the event loop; it fails at once and says why."""
    saver = await open_saver()
    with pytest.raises(RuntimeError, match="async-only"):
        getattr(saver, method)(*args)


async def test_closed_saver_refuses_work(open_saver: OpenSaver) -> None:
    """After aclose, calls fail with sqlite3's own error instead of hanging."""
    saver = await open_saver()
    await saver.aclose()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        await saver.aget_tuple(thread("t"))


async def test_failed_write_leaves_nothing_behind(open_saver: OpenSaver, tmp_path: Path) -> None:
    """A statement failing mid-aput rolls back its channel values too; the saver goes on."""
    saver = await open_saver()
    await put_checkpoint(saver, "t", values={"a": 1})
    await sql(
        tmp_path / "checkpoints.db",
        "CREATE TRIGGER refuse BEFORE INSERT ON checkpoints"
        " BEGIN SELECT RAISE(ABORT, 'disk says no'); END",
    )
    with pytest.raises(sqlite3.IntegrityError, match="disk says no"):
        await put_checkpoint(saver, "t", values={"a": 2, "b": 3})
    assert (await saver.stats())["blobs"] == 1

    await sql(tmp_path / "checkpoints.db", "DROP TRIGGER refuse")
    await put_checkpoint(saver, "t", values={"a": 2, "b": 3})
    stored = await saver.aget_tuple(thread("t"))
    assert stored is not None
    assert stored.checkpoint["channel_values"] == {"a": 2, "b": 3}


async def test_cancelled_writes_leave_no_transaction_open(open_saver: OpenSaver) -> None:
    """A turn cancelled at any point of aput either stored its checkpoint whole or not at
    all, and the next write works."""
    saver = await open_saver()
    for delay in range(8):
        attempt = asyncio.create_task(put_checkpoint(saver, "t", values={"a": delay, "b": 0}))
        for _ in range(delay):
            await asyncio.sleep(0)
        attempt.cancel()
        await asyncio.gather(attempt, return_exceptions=True)
        await put_checkpoint(saver, "u", values={"a": delay})

    # Every checkpoint of "u" has one channel value, every one of "t" that made it two.
    stats = await saver.stats()
    stored_t = stats["checkpoints"] - 8
    assert stats["blobs"] == 8 + 2 * stored_t


async def test_special_writes_replace_regular_writes_keep_first(open_saver: OpenSaver) -> None:
    """WRITES_IDX_MAP: a task's error/interrupt slot takes the latest value; a regular
    write stored twice (a retried task) keeps the first, and writes come in task order."""
    saver = await open_saver()
    config = await put_checkpoint(saver, "t")
    await saver.aput_writes(config, [("messages", "first"), (ERROR, "boom 1")], "task-b", "~b")
    await saver.aput_writes(config, [("messages", "second"), (ERROR, "boom 2")], "task-b", "~b")
    await saver.aput_writes(config, [(INTERRUPT, "ask"), ("messages", "a")], "task-a", "~a")

    stored = await saver.aget_tuple(config)
    assert stored is not None
    assert stored.pending_writes == [
        ("task-a", INTERRUPT, "ask"),
        ("task-a", "messages", "a"),
        ("task-b", ERROR, "boom 2"),
        ("task-b", "messages", "first"),
    ]


async def test_copy_thread_is_independent_of_its_source(open_saver: OpenSaver) -> None:
    """The copy carries its own channel values: it survives the source's deletion."""
    saver = await open_saver()
    graph = build_chat_graph(saver)
    for turn in range(2):
        await graph.ainvoke({"messages": [human(turn)]}, thread("source"))
    await saver.acopy_thread("source", "copy")
    await saver.acopy_thread("source", "copy")
    await saver.adelete_thread("source")

    result = await graph.ainvoke({"messages": [human(2)]}, thread("copy"))
    assert len(result["messages"]) == 6
    assert (await saver.stats())["threads"] == 1


async def test_delete_for_runs_keeps_values_other_runs_use(open_saver: OpenSaver) -> None:
    """Values written by a deleted run stay while a remaining checkpoint uses them."""
    saver = await open_saver()
    graph = build_chat_graph(saver)
    config = thread("t")
    for turn, run_id in enumerate(("run-1", "run-2")):
        await graph.ainvoke({"messages": [human(turn)]}, {**config, "metadata": {"run_id": run_id}})
    await saver.adelete_for_runs(["run-1"])

    kept = [checkpoint async for checkpoint in saver.alist(config)]
    assert {checkpoint.metadata["run_id"] for checkpoint in kept} == {"run-2"}
    assert (await saver.stats())["blobs"] == len(used_values(kept))
    state = await graph.aget_state(config)
    assert len(state.values["messages"]) == 4

    await saver.adelete_for_runs(["run-2"])
    stats = await saver.stats()
    assert (stats["checkpoints"], stats["blobs"], stats["writes"]) == (0, 0, 0)


async def test_concurrent_turns_on_one_saver(open_saver: OpenSaver) -> None:
    """Many threads at once share the one connection without mixing or losing anything."""
    saver = await open_saver(keep_last=2)
    graph = build_chat_graph(saver)

    async def converse(name: str) -> None:
        for turn in range(3):
            await graph.ainvoke({"messages": [human(turn, f"{name} {turn}")]}, thread(name))

    names = [f"thread-{number}" for number in range(10)]
    await asyncio.gather(*(converse(name) for name in names))
    for name in names:
        state = await graph.aget_state(thread(name))
        assert [message.content for message in state.values["messages"][::2]] == [
            f"{name} {turn}" for turn in range(3)
        ]
    stats = await saver.stats()
    assert (stats["threads"], stats["checkpoints"]) == (10, 20)


class Canary:
    """A class no allowlist names: reviving it from a checkpoint would construct it."""

    constructed = 0

    def __init__(self, **kwargs: Any) -> None:
        Canary.constructed += 1
        self.kwargs = kwargs


def ext(code: int, module: str, name: str, args: Any) -> bytes:
    """A msgpack value that asks JsonPlusSerializer to call module.name(args)."""
    return ormsgpack.packb(ormsgpack.Ext(code, ormsgpack.packb((module, name, args))))


async def test_tampered_blob_does_not_construct_arbitrary_classes(
    open_saver: OpenSaver, tmp_path: Path
) -> None:
    """Someone who can write the file plants a call to os.system and to a class; reading
    the checkpoint returns their data, never calls either. The same payload does revive
    when the class is explicitly allowed, so the test payload itself is well-formed.

    The file is read by a saver that did not write it (Home Assistant restarted): the
    saver that wrote a checkpoint answers its own newest one with the values it wrote."""
    marker = tmp_path / "pwned"
    writer = await open_saver()
    config = await put_checkpoint(writer, "t", values={"shell": "a", "canary": "b"})
    saver = await open_saver()
    path = tmp_path / "checkpoints.db"
    planted = {
        "shell": ext(EXT_CONSTRUCTOR_POS_ARGS, "os", "system", [f"touch {marker}"]),
        "canary": ext(EXT_CONSTRUCTOR_KW_ARGS, __name__, "Canary", {"colour": "yellow"}),
    }
    for channel, payload in planted.items():
        await sql(
            path,
            "UPDATE channel_blobs SET value_type = 'msgpack', value = ? WHERE channel = ?",
            (payload, channel),
        )

    stored = await saver.aget_tuple(config)
    assert stored is not None
    assert stored.checkpoint["channel_values"] == {
        "shell": [f"touch {marker}"],
        "canary": {"colour": "yellow"},
    }
    assert Canary.constructed == 0
    assert not await asyncio.to_thread(marker.exists)

    # LangGraph widens the allowlist per graph through with_allowlist: a clone sharing
    # the connection, which revives exactly the named class.
    allowed = saver.with_allowlist([(__name__, "Canary")])
    assert allowed is not saver
    revived = await allowed.aget_tuple(config)
    assert revived is not None
    assert isinstance(revived.checkpoint["channel_values"]["canary"], Canary)
    assert Canary.constructed == 1

    explicit = await open_saver(serde=JsonPlusSerializer(allowed_msgpack_modules=[Canary]))
    from_explicit = await explicit.aget_tuple(config)
    assert from_explicit is not None
    assert isinstance(from_explicit.checkpoint["channel_values"]["canary"], Canary)
    assert from_explicit.checkpoint["channel_values"]["shell"] == [f"touch {marker}"]

    # The clone shares the connection: closing the saver closes it for the clone too.
    await saver.aclose()
    with pytest.raises(sqlite3.ProgrammingError):
        await allowed.aget_tuple(config)


async def used_bytes(path: Path) -> int:
    """Bytes of a database file that hold data (its free pages left out)."""
    [(page_count,)] = await sql(path, "PRAGMA page_count")
    [(free_pages,)] = await sql(path, "PRAGMA freelist_count")
    [(page_size,)] = await sql(path, "PRAGMA page_size")
    return (page_count - free_pages) * page_size


async def test_growth_over_200_turns(tmp_path: Path) -> None:
    """200 turns on one thread: ours with keep_last=3 needs at most 10% of the bytes of
    langgraph-checkpoint-sqlite's saver, which stores every value in every checkpoint."""
    turns = 200
    ours_path, reference_path = tmp_path / "ours.db", tmp_path / "reference.db"

    async def converse(graph: Any) -> None:
        for turn in range(turns):
            await graph.ainvoke({"messages": [human(turn, "Turn on the lights " * 5)]}, thread("t"))

    ours = await SqliteCheckpointSaver.open(ours_path, keep_last=3)
    try:
        await converse(build_chat_graph(ours, reply_chars=200))
    finally:
        await ours.aclose()
    async with reference_saver(reference_path) as reference:
        await converse(build_chat_graph(reference, reply_chars=200))

    ours_bytes, reference_bytes = await used_bytes(ours_path), await used_bytes(reference_path)
    ours_file = await asyncio.to_thread(lambda: ours_path.stat().st_size)
    print(
        f"\nbytes per thread after {turns} turns: ours (keep_last=3) {ours_bytes:,}"
        f" (file {ours_file:,}), AsyncSqliteSaver {reference_bytes:,}"
        f" ({ours_bytes / reference_bytes:.1%})"
    )
    assert ours_bytes <= reference_bytes * 0.10
