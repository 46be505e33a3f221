"""Tests of storage/ (its backends: sqlite/, postgres/), and the deterministic graphs they share.

Every message gets an explicit id: LangGraph would otherwise give it a random one, and
two runs of the same scenario could not be compared value for value.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt


def human(turn: int, text: str = "") -> HumanMessage:
    """The user's message of a turn."""
    return HumanMessage(id=f"human-{turn}", content=text or f"Question number {turn}?")


def build_chat_graph(
    checkpointer: BaseCheckpointSaver, *, reply_chars: int = 40
) -> CompiledStateGraph:
    """One node answering every message; the answer's length is `reply_chars`."""

    def reply(state: MessagesState) -> MessagesState:
        count = len(state["messages"])
        text = f"Answer {count}: " + "x" * reply_chars
        return {"messages": [AIMessage(id=f"ai-{count}", content=text[:reply_chars])]}

    graph = StateGraph(MessagesState)
    graph.add_node("reply", reply)
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    return graph.compile(checkpointer=checkpointer)


def build_confirmation_graph(checkpointer: BaseCheckpointSaver) -> CompiledStateGraph:
    """Proposes unlocking a door and waits for the user's answer (`interrupt`)."""

    def propose(state: MessagesState) -> MessagesState:
        count = len(state["messages"])
        call = {"name": "unlock", "args": {"entity_id": "lock.front"}, "id": f"call-{count}"}
        return {"messages": [AIMessage(id=f"ai-{count}", content="", tool_calls=[call])]}

    def confirm(state: MessagesState) -> MessagesState:
        request = state["messages"][-1]
        assert isinstance(request, AIMessage)
        call = request.tool_calls[0]
        answer = interrupt({"action": call["name"], "args": call["args"]})
        outcome = "unlocked" if answer == "yes" else "declined"
        message = ToolMessage(
            id=f"tool-{call['id']}", content=outcome, tool_call_id=call["id"], name=call["name"]
        )
        return {"messages": [message]}

    graph = StateGraph(MessagesState)
    graph.add_node("propose", propose)
    graph.add_node("confirm", confirm)
    graph.add_edge(START, "propose")
    graph.add_edge("propose", "confirm")
    graph.add_edge("confirm", END)
    return graph.compile(checkpointer=checkpointer)


@asynccontextmanager
async def reference_saver(path: Path) -> AsyncIterator[AsyncSqliteSaver]:
    """langgraph-checkpoint-sqlite's saver on a file, its connection closed afterwards."""
    connection = await aiosqlite.connect(path)
    try:
        saver = AsyncSqliteSaver(connection)
        await saver.setup()
        yield saver
    finally:
        await connection.close()
        # aiosqlite's worker thread ends a moment after close() returns; joined, so that no
        # thread outlives the test (Home Assistant's harness checks).
        if (worker := getattr(connection, "_thread", None)) is not None:
            await asyncio.to_thread(worker.join)
