"""Tests of storage/healing/ alone: its wrappers over the project's own SQLite parts.

A database outage is faked at the database's edge, never inside our code: `Switched` wraps
a real part (the SQLite saver, store, links or ratings) and, while its `Switch` is off,
every call raises `DatabaseDown` before reaching the file, as a stopped server would (or,
switched off read-only, only the writes fail, as a locked SQLite file does). The health
is driven as persistence.py drives it: its reconnect works once the switch is on again,
its retries run as an asyncio task, and tests wait until it is up (bounded waits on
conditions, never on elapsed time).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
import inspect
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import PutOp

from custom_components.langgraph_conversation.storage.healing import StorageHealth

# Tiny pauses between attempts: the tests wait on conditions, not on these.
QUICK_DELAYS = (0.001, 0.002, 0.005)
# A bound against a hang, never a measure of speed (the machine may be loaded).
PATIENCE = 60.0

# The calls of the wrapped parts that write (the rest only read).
_WRITES = frozenset(
    {"aput", "aput_writes", "adelete_thread", "adelete", "write", "rate", "add_missing"}
)


class DatabaseDown(Exception):
    """What a switched-off database raises (the test's health counts it as an outage)."""


class Switch:
    """Whether the fake database answers: on, off (every call fails) or off read-only
    (reads still answer, writes fail); `fail_after` turns it off at a later call, in the
    middle of a turn or of a write-back."""

    def __init__(self) -> None:
        self.on = True
        self.read_only = False
        self.calls = 0
        self._countdown: int | None = None

    def off(self, *, read_only: bool = False) -> None:
        self.on, self.read_only, self._countdown = False, read_only, None

    def switch_on(self) -> None:
        self.on, self._countdown = True, None

    def fail_after(self, calls: int, *, read_only: bool = False) -> None:
        """Off from the `calls`-th call on (1: the next one)."""
        self._countdown, self.read_only = calls, read_only

    def check(self, *, write: bool) -> None:
        """A call reaches the database: raise if the database is down for it."""
        self.calls += 1
        if self._countdown is not None:
            self._countdown -= 1
            if self._countdown <= 0:
                self.on, self._countdown = False, None
        if not self.on and (write or not self.read_only):
            raise DatabaseDown("the database is switched off")


def _writes(name: str, args: tuple[Any, ...]) -> bool:
    if name == "abatch":
        return any(isinstance(op, PutOp) for op in args[0])
    return name in _WRITES


class Switched:
    """A database part whose async calls first ask the switch (the rest passes through)."""

    def __init__(self, inner: Any, switch: Switch) -> None:
        self._inner = inner
        self._switch = switch

    def with_allowlist(self, allowlist: Any) -> Switched:
        return Switched(self._inner.with_allowlist(allowlist), self._switch)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        switch = self._switch
        if inspect.isasyncgenfunction(found):

            async def listed(*args: Any, **kwargs: Any) -> Any:
                switch.check(write=False)
                async for item in found(*args, **kwargs):
                    yield item

            return listed
        if inspect.iscoroutinefunction(found):

            async def called(*args: Any, **kwargs: Any) -> Any:
                switch.check(write=_writes(name, args))
                return await found(*args, **kwargs)

            return called
        return found


def new_health(
    switch: Switch,
    *,
    reads_while_down: bool = False,
    delays: tuple[float, ...] = QUICK_DELAYS,
    on_change: Callable[[BaseException | None], None] = lambda _error: None,
    reconnect: Callable[[], Awaitable[None]] | None = None,
) -> StorageHealth:
    """A health as persistence.py makes one: the reconnect proves the database answers a
    write (here: the switch is on), the retries run as a task on the running loop."""
    health = StorageHealth(
        "test database",
        is_outage=lambda error: isinstance(error, DatabaseDown),
        delays=delays,
        reads_while_down=reads_while_down,
    )

    async def switched_on() -> None:
        if not switch.on:
            raise DatabaseDown("the database is still switched off")

    def start_task(coroutine: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(coroutine, name=name)

    health.connect(reconnect or switched_on, start_task, on_change)
    return health


async def wait_for(condition: Callable[[], bool], what: Callable[[], str]) -> None:
    """Until `condition` holds (bounded by PATIENCE against a hang; `what` explains)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while not condition():
        assert loop.time() < deadline, what()
        await asyncio.sleep(0.005)


async def wait_up(health: StorageHealth) -> None:
    """Until the health is up (the write-back done)."""
    await wait_for(lambda: health.up, lambda: f"not healed: {health.as_diagnostics()}")


def build_graph(
    saver: BaseCheckpointSaver, *, pause: Callable[[], Awaitable[None]] | None = None
) -> CompiledStateGraph:
    """A turn of two steps (two checkpoints besides the input's), each adding a message
    named after the question, so a turn's messages do not depend on the history before;
    `pause` is awaited before the reply (a turn held in the middle)."""

    async def reply(state: MessagesState) -> dict[str, Any]:
        if pause is not None:
            await pause()
        asked = state["messages"][-1]
        return {"messages": [AIMessage(id=f"{asked.id}-reply", content=f"On {asked.content}")]}

    def follow_up(state: MessagesState) -> dict[str, Any]:
        asked = state["messages"][-2]
        return {"messages": [AIMessage(id=f"{asked.id}-more", content="Anything else?")]}

    graph = StateGraph(MessagesState)
    graph.add_node("reply", reply)
    graph.add_node("follow_up", follow_up)
    graph.add_edge(START, "reply")
    graph.add_edge("reply", "follow_up")
    graph.add_edge("follow_up", END)
    return graph.compile(checkpointer=saver)


def question(thread: str, number: int) -> dict[str, Any]:
    """A turn's input: the question's id names its conversation and number."""
    return {"messages": [HumanMessage(id=f"{thread}-{number}", content=f"q{number}")]}


def config_of(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def turn_ids(thread: str, *numbers: int) -> list[str]:
    """The message ids the turns `numbers` leave in a conversation, in order."""
    return [f"{thread}-{n}{suffix}" for n in numbers for suffix in ("", "-reply", "-more")]


async def newest_messages(saver: BaseCheckpointSaver, thread: str) -> list[tuple[str, str]]:
    """(id, text) of each message of the conversation's newest checkpoint."""
    found = await saver.aget_tuple(config_of(thread))
    if found is None:
        return []
    return [(m.id, m.content) for m in found.checkpoint["channel_values"].get("messages", [])]
