"""The agent runtime on its own (no Home Assistant), against the fake model server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
import inspect
from pathlib import Path
import sqlite3
import threading

from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
import pytest

from custom_components.langgraph_conversation.agent.errors import TurnError
from custom_components.langgraph_conversation.agent.events import MessageStarted, TextDelta
from custom_components.langgraph_conversation.agent.graph import build_graphs
from custom_components.langgraph_conversation.agent.models import ModelAccess, ModelSettings
from custom_components.langgraph_conversation.agent.runtime import AgentRuntime, AgentSettings, Turn
from custom_components.langgraph_conversation.storage.sqlite import (
    SqliteCheckpointSaver,
    SqliteStore,
)
from fakes import FakeOpenAIServer, Reply, ToolCall

AGENT = AgentSettings(settings=ModelSettings(), max_tool_rounds=2)


def _turn(thread_id: str, text: str) -> Turn:
    return Turn(thread_id=thread_id, text=text, system_prompt="You are a test.", tools=[])


async def _run(runtime: AgentRuntime, turn: Turn) -> list:
    return [event async for event in runtime.run_turn(AGENT, turn)]


async def test_events_and_thread_bound(socket_enabled: None) -> None:
    """Tokens arrive as events; beyond the bound the least recently used thread goes."""
    async with FakeOpenAIServer() as server:
        runtime = AgentRuntime(
            ModelAccess("openai/gpt-test", "key", server.api_base), InMemorySaver(), max_threads=2
        )
        server.add_text("Hello there", chunk_size=3)
        events = await _run(runtime, _turn("a", "hi"))
        assert isinstance(events[0], MessageStarted)
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello there"
        assert len([e for e in events if isinstance(e, TextDelta)]) == 4

        await _run(runtime, _turn("b", "hi"))
        await _run(runtime, _turn("a", "again"))  # "a" is now the most recent
        await _run(runtime, _turn("c", "hi"))  # evicts "b"
        assert len(await runtime.messages("a")) == 4
        assert await runtime.messages("b") == []
        assert len(await runtime.messages("c")) == 2


async def test_failed_first_turn_leaves_empty_thread(socket_enabled: None) -> None:
    """Even the very first turn of a thread is removed whole when it fails."""
    async with FakeOpenAIServer() as server:
        runtime = AgentRuntime(
            ModelAccess("openai/gpt-test", "key", server.api_base), InMemorySaver()
        )
        server.add_error(503, "overloaded")
        with pytest.raises(TurnError) as caught:
            await _run(runtime, _turn("t", "hi"))
        assert caught.value.kind == "server"
        assert await runtime.messages("t") == []
        server.add_text("Fine now.")
        await _run(runtime, _turn("t", "hi"))
        assert [m.type for m in await runtime.messages("t")] == ["human", "ai"]


async def test_tool_rounds_stop_at_the_limit(socket_enabled: None) -> None:
    """A model that always asks for a tool gets exactly `max_tool_rounds` rounds."""
    calls: list[str] = []

    async def clock() -> str:
        calls.append("clock")
        return "noon"

    tool = StructuredTool.from_function(coroutine=clock, name="clock", description="The time.")
    async with FakeOpenAIServer() as server:
        runtime = AgentRuntime(
            ModelAccess("openai/gpt-test", "key", server.api_base), InMemorySaver()
        )
        server.default_reply = Reply(tool_calls=(ToolCall("clock", {}),))
        turn = replace(_turn("t", "what time is it?"), tools=[tool])
        with pytest.raises(TurnError) as caught:
            await _run(runtime, turn)
        assert caught.value.kind == "tool_rounds"
        assert calls == ["clock", "clock"]
        assert len(server.requests) == 3  # the first call and one after each round
        # The failed turn is undone whole: the thread is empty again.
        assert await runtime.messages("t") == []


def test_every_node_and_branch_runs_on_the_loop() -> None:
    """Nodes emit events into an asyncio queue (TurnContext.emit), which only works on the
    loop: LangGraph runs a plain function in a thread, so every node must be a coroutine."""
    for kind, graph in build_graphs(InMemorySaver()).items():
        runnables = [spec.runnable for spec in graph.builder.nodes.values()]
        runnables += [
            branch.path
            for branches in graph.builder.branches.values()
            for branch in branches.values()
        ]
        for runnable in runnables:
            assert runnable.func is None, (kind, runnable)
            assert inspect.iscoroutinefunction(runnable.afunc), (kind, runnable)


async def _events(stream: AsyncIterator) -> list:
    return [event async for event in stream]


async def test_the_pause_is_read_while_memories_are_recalled(
    socket_enabled: None, tmp_path: Path
) -> None:
    """Before the graph runs, what the thread waits on (conversations file) and the
    turn's memories (memory file) are read at once: with the memory file's thread busy,
    the conversations file already answers; the turn then ends as usual."""
    checkpointer = await SqliteCheckpointSaver.open(tmp_path / "threads.db")
    store = await SqliteStore.open(tmp_path / "memory.db")
    threads_jobs: list[object] = []
    threads_worker = checkpointer.database._queue._worker
    submit = threads_worker.submit
    release = threading.Event()
    started = threading.Event()

    def hold(_connection: sqlite3.Connection) -> None:
        started.set()
        release.wait(timeout=30)

    try:
        async with FakeOpenAIServer() as server:
            runtime = AgentRuntime(
                ModelAccess("openai/gpt-test", "key", server.api_base), checkpointer, store=store
            )
            server.add_text("Tea it is.")
            busy = asyncio.ensure_future(store.database.read(hold))
            await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)

            def counted(*args: object, **kwargs: object) -> object:
                threads_jobs.append(args[0])
                return submit(*args, **kwargs)

            threads_worker.submit = counted  # type: ignore[method-assign]
            agent = replace(AGENT, memory=True)
            turn = asyncio.ensure_future(
                _events(runtime.run_turn(agent, _turn("t", "what tea do I like?")))
            )
            for _ in range(200):
                if threads_jobs:
                    break
                await asyncio.sleep(0.01)
            assert threads_jobs, "the conversations file was not read while memories waited"
            assert not turn.done()
            release.set()
            await busy
            events = await turn
            assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Tea it is."
            assert [m.type for m in await runtime.messages("t")] == ["human", "ai"]
    finally:
        release.set()
        await store.aclose()
        await checkpointer.aclose()
