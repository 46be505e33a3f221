"""The same graphs on our saver and on a reference: same states, same history.

The references: langgraph-checkpoint-sqlite's saver, and LangGraph's PostgreSQL saver as
storage/postgres/ opens it on the test server (tests/postgres.py), so the same turns on
SQLite and PostgreSQL are shown to give the same states. Each scenario runs once per saver
on fresh storage. What LangGraph reads back (final state, every checkpoint of
`aget_state_history`, pending tasks, interrupts) must be identical; checkpoint ids and
timestamps are left out, they differ by construction.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Send, interrupt
import pytest

from custom_components.langgraph_conversation.storage.postgres import PostgresStorage
from custom_components.langgraph_conversation.storage.sqlite.checkpointer import (
    SqliteCheckpointSaver,
)

from . import build_chat_graph, build_confirmation_graph, human, reference_saver

type Scenario = Callable[[BaseCheckpointSaver], Awaitable[list[Any]]]

CONFIG: RunnableConfig = {"configurable": {"thread_id": "thread-1"}}


@pytest.fixture(params=["langgraph-sqlite", "postgres"])
async def savers(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[BaseCheckpointSaver, BaseCheckpointSaver]]:
    """Ours and the reference, each on its own new file or database."""
    ours = await SqliteCheckpointSaver.open(tmp_path / "ours.db")
    try:
        if request.param == "postgres":
            storage = await PostgresStorage.open(request.getfixturevalue("postgres_url"))
            try:
                yield ours, storage.saver
            finally:
                await storage.aclose()
        else:
            async with reference_saver(tmp_path / "reference.db") as reference:
                yield ours, reference
    finally:
        await ours.aclose()


async def run_on_both(
    savers: tuple[BaseCheckpointSaver, BaseCheckpointSaver], scenario: Scenario
) -> list[Any]:
    """Run a scenario on each saver; assert both observed the same; return that."""
    ours, reference = savers
    observed = await scenario(ours)
    expected = await scenario(reference)
    assert observed == expected
    return observed


async def history(graph: CompiledStateGraph, config: RunnableConfig = CONFIG) -> list[Any]:
    """Everything LangGraph tells about each checkpoint of a thread, newest first."""
    return [
        (
            snapshot.values,
            snapshot.next,
            snapshot.metadata["step"],
            snapshot.metadata["source"],
            [
                (task.name, task.error, [item.value for item in task.interrupts])
                for task in snapshot.tasks
            ],
        )
        async for snapshot in graph.aget_state_history(config)
    ]


async def test_multi_turn_messages(
    savers: tuple[BaseCheckpointSaver, BaseCheckpointSaver],
) -> None:
    """Several turns on one thread, then a second thread."""

    async def scenario(saver: BaseCheckpointSaver) -> list[Any]:
        graph = build_chat_graph(saver)
        results = [await graph.ainvoke({"messages": [human(turn)]}, CONFIG) for turn in range(4)]
        other: RunnableConfig = {"configurable": {"thread_id": "thread-2"}}
        results.append(await graph.ainvoke({"messages": [human(9)]}, other))
        return [results, await history(graph), await history(graph, other)]

    observed = await run_on_both(savers, scenario)
    results, first_history, _ = observed
    assert len(results[3]["messages"]) == 8
    # Per turn: the input's checkpoint, the one that starts the step, and the reply's.
    assert len(first_history) == 4 * 3


def build_tool_loop_graph(saver: BaseCheckpointSaver) -> CompiledStateGraph:
    """A model-like node asks for two tool calls; a tools node answers them; then a reply."""

    def agent(state: MessagesState) -> MessagesState:
        count = len(state["messages"])
        if isinstance(state["messages"][-1], HumanMessage):
            calls = [
                {"name": "add", "args": {"a": count, "b": 1}, "id": f"call-{count}-a"},
                {"name": "add", "args": {"a": count, "b": 2}, "id": f"call-{count}-b"},
            ]
            return {"messages": [AIMessage(id=f"ai-{count}", content="", tool_calls=calls)]}
        results = [message.content for message in state["messages"][-2:]]
        return {"messages": [AIMessage(id=f"ai-{count}", content=f"Sums: {results}")]}

    def tools(state: MessagesState) -> MessagesState:
        request = state["messages"][-1]
        assert isinstance(request, AIMessage)
        return {
            "messages": [
                ToolMessage(
                    id=f"tool-{call['id']}",
                    content=str(call["args"]["a"] + call["args"]["b"]),
                    tool_call_id=call["id"],
                    name=call["name"],
                )
                for call in request.tool_calls
            ]
        }

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


async def test_tool_calling_loop(savers: tuple[BaseCheckpointSaver, BaseCheckpointSaver]) -> None:
    """agent → tools → agent, twice on one thread."""

    async def scenario(saver: BaseCheckpointSaver) -> list[Any]:
        graph = build_tool_loop_graph(saver)
        results = [await graph.ainvoke({"messages": [human(turn)]}, CONFIG) for turn in range(2)]
        return [results, await history(graph)]

    results, _ = await run_on_both(savers, scenario)
    assert [type(message).__name__ for message in results[1]["messages"]] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "AIMessage",
    ] * 2


async def test_interrupt_and_resume(
    savers: tuple[BaseCheckpointSaver, BaseCheckpointSaver],
) -> None:
    """Two turns that each stop at `interrupt()`; one is declined, one confirmed."""

    async def scenario(saver: BaseCheckpointSaver) -> list[Any]:
        graph = build_confirmation_graph(saver)
        observed: list[Any] = []
        for turn, answer in enumerate(("no", "yes")):
            paused = await graph.ainvoke({"messages": [human(turn)]}, CONFIG)
            waiting = await graph.aget_state(CONFIG)
            observed.append([item.value for item in paused["__interrupt__"]])
            observed.append((waiting.next, [task.interrupts[0].value for task in waiting.tasks]))
            observed.append(await graph.ainvoke(Command(resume=answer), CONFIG))
        observed.append(await history(graph))
        return observed

    observed = await run_on_both(savers, scenario)
    assert observed[1] == (
        ("confirm",),
        [{"action": "unlock", "args": {"entity_id": "lock.front"}}],
    )
    assert [message.content for message in observed[5]["messages"]][-1] == "unlocked"


class FanOutState(TypedDict):
    """Lists that parallel branches append to."""

    visited: Annotated[list[str], operator.add]
    squares: Annotated[list[int], operator.add]


class SquareTask(TypedDict):
    """What one `Send` carries to the square node."""

    number: int


def build_fan_out_graph(
    saver: BaseCheckpointSaver, calls: dict[str, int], failures: dict[str, int]
) -> CompiledStateGraph:
    """Two static branches in parallel, then one Send per number.

    Each static node counts its runs in `calls`; `failures[name]` makes that node raise
    that many times before it succeeds.

    Run it with durability="sync". The join's barrier channel checkpoints a set that the
    next step's tasks change in place; with the default "async" durability LangGraph may
    hand a checkpoint to the saver after that change, and how late depends on the saver's
    speed, so two savers would record two different (both racy) histories.
    """

    def visit(name: str) -> Callable[[FanOutState], Awaitable[FanOutState]]:
        async def node(state: FanOutState) -> FanOutState:
            calls[name] = calls.get(name, 0) + 1
            if failures.get(name, 0) >= calls[name]:
                # Fail only after the parallel branch has finished: a branch still running
                # when another fails is cancelled, and which one wins would be a race.
                await asyncio.sleep(0.05)
                raise RuntimeError(f"{name} failed")
            return {"visited": [name]}

        return node

    def fan_out(state: FanOutState) -> list[Send]:
        return [Send("square", {"number": number}) for number in range(1, 5)]

    def square(task: SquareTask) -> FanOutState:
        return {"squares": [task["number"] ** 2]}

    graph = StateGraph(FanOutState)
    for name in ("left", "right", "join"):
        graph.add_node(name, visit(name))
    graph.add_node("square", square)
    graph.add_edge(START, "left")
    graph.add_edge(START, "right")
    graph.add_edge(["left", "right"], "join")
    graph.add_conditional_edges("join", fan_out, ["square"])
    graph.add_edge("square", END)
    return graph.compile(checkpointer=saver)


async def test_parallel_branches_and_send(
    savers: tuple[BaseCheckpointSaver, BaseCheckpointSaver],
) -> None:
    """Static fan-out and Send map into reducer channels, twice on one thread."""

    async def scenario(saver: BaseCheckpointSaver) -> list[Any]:
        graph = build_fan_out_graph(saver, calls={}, failures={})
        first = await graph.ainvoke({"visited": ["start"]}, CONFIG, durability="sync")
        second = await graph.ainvoke({"visited": ["again"]}, CONFIG, durability="sync")
        return [first, second, await history(graph)]

    first, second, _ = await run_on_both(savers, scenario)
    assert first == {"visited": ["start", "left", "right", "join"], "squares": [1, 4, 9, 16]}
    assert second["squares"] == [1, 4, 9, 16] * 2


async def test_failed_branch_resumes_from_pending_writes(
    savers: tuple[BaseCheckpointSaver, BaseCheckpointSaver],
) -> None:
    """One branch fails: the other's write and the error are pending writes, and the
    resumed run reruns only the failed branch."""

    async def scenario(saver: BaseCheckpointSaver) -> list[Any]:
        calls: dict[str, int] = {}
        graph = build_fan_out_graph(saver, calls, failures={"right": 1})
        with pytest.raises(RuntimeError, match="right failed"):
            await graph.ainvoke({"visited": ["start"]}, CONFIG, durability="sync")
        failed_history = await history(graph)
        result = await graph.ainvoke(None, CONFIG, durability="sync")
        return [failed_history, result, calls, await history(graph)]

    failed_history, result, calls, _ = await run_on_both(savers, scenario)
    pending_tasks = failed_history[0][4]
    assert [(name, error is not None) for name, error, _ in pending_tasks] == [
        ("left", False),
        ("right", True),
    ]
    assert calls == {"left": 1, "right": 2, "join": 1}
    assert result["visited"] == ["start", "left", "right", "join"]


def build_parent_graph(saver: BaseCheckpointSaver) -> CompiledStateGraph:
    """A subgraph that pauses at `interrupt()`: checkpoints in a child namespace."""

    def ask(state: MessagesState) -> MessagesState:
        count = len(state["messages"])
        answer = interrupt("Which room?")
        return {"messages": [AIMessage(id=f"ai-{count}", content=f"Lights on in the {answer}.")]}

    inner = StateGraph(MessagesState)
    inner.add_node("ask", ask)
    inner.add_edge(START, "ask")
    inner.add_edge("ask", END)

    outer = StateGraph(MessagesState)
    outer.add_node("lights", inner.compile())
    outer.add_edge(START, "lights")
    outer.add_edge("lights", END)
    return outer.compile(checkpointer=saver)


async def test_subgraph_namespace(savers: tuple[BaseCheckpointSaver, BaseCheckpointSaver]) -> None:
    """A subgraph's own checkpoints, read back through the parent, and its resume."""

    async def scenario(saver: BaseCheckpointSaver) -> list[Any]:
        graph = build_parent_graph(saver)
        await graph.ainvoke({"messages": [human(0)]}, CONFIG)
        paused = await graph.aget_state(CONFIG, subgraphs=True)
        inner = paused.tasks[0].state
        assert inner is not None
        inner_view = (inner.values, inner.next, inner.metadata["step"])
        result = await graph.ainvoke(Command(resume="kitchen"), CONFIG)
        return [inner_view, result, await history(graph)]

    inner_view, result, _ = await run_on_both(savers, scenario)
    assert inner_view[1] == ("ask",)
    assert result["messages"][-1].content == "Lights on in the kitchen."
