"""Turn hooks: once per turn, also on error; a failing hook never breaks a turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
import logging
from typing import Any

from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
import pytest

from custom_components.langgraph_conversation.agent.errors import TurnError
from custom_components.langgraph_conversation.agent.events import TextDelta
from custom_components.langgraph_conversation.agent.hooks import (
    TurnFailed,
    TurnHooks,
    TurnStarted,
    TurnSummary,
)
from custom_components.langgraph_conversation.agent.models import ModelAccess, ModelSettings
from custom_components.langgraph_conversation.agent.runtime import AgentRuntime, AgentSettings, Turn
from fakes import FakeOllamaServer, FakeOpenAIServer, ToolCall

MODEL = "openai/gpt-test"


class Recorder(TurnHooks):
    """Writes down every hook call, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def on_turn_start(self, started: TurnStarted) -> None:
        self.calls.append(("start", started))

    def on_tool_start(self, call: Any) -> None:
        self.calls.append(("tool_start", call))

    def on_tool_end(self, done: Any) -> None:
        self.calls.append(("tool_end", done))

    def on_error(self, failed: TurnFailed) -> None:
        self.calls.append(("error", failed))

    def on_turn_end(self, summary: TurnSummary) -> None:
        self.calls.append(("end", summary))

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


class AsyncRecorder(Recorder):
    """The same, with coroutine hooks."""

    async def on_turn_start(self, started: TurnStarted) -> None:  # type: ignore[override]
        super().on_turn_start(started)

    async def on_turn_end(self, summary: TurnSummary) -> None:  # type: ignore[override]
        super().on_turn_end(summary)


class Broken(TurnHooks):
    """Every hook raises."""

    def on_turn_start(self, started: TurnStarted) -> None:
        raise RuntimeError("start hook broke")

    def on_tool_start(self, call: Any) -> None:
        raise RuntimeError("tool hook broke")

    def on_tool_end(self, done: Any) -> None:
        raise RuntimeError("tool hook broke")

    def on_error(self, failed: TurnFailed) -> None:
        raise RuntimeError("error hook broke")

    async def on_turn_end(self, summary: TurnSummary) -> None:  # type: ignore[override]
        raise RuntimeError("end hook broke")


@pytest.fixture
async def server(socket_enabled: None) -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as fake:
        yield fake


def _runtime(server: FakeOpenAIServer) -> AgentRuntime:
    return AgentRuntime(ModelAccess(MODEL, "key", server.api_base), InMemorySaver())


async def _lookup(query: str) -> dict[str, Any]:
    return {"found": query.upper()}


LOOKUP = StructuredTool(
    name="lookup",
    description="Look something up.",
    args_schema={
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
    coroutine=_lookup,
)


AGENT = AgentSettings(settings=ModelSettings(), max_tool_rounds=3)


def _turn(text: str, *hooks: TurnHooks, tools: list[Any] | None = None) -> Turn:
    return Turn(
        thread_id="t", text=text, system_prompt="You are a test.", tools=tools or [], hooks=hooks
    )


async def _run(runtime: AgentRuntime, turn: Turn) -> str:
    return "".join(
        [
            event.text
            async for event in runtime.run_turn(AGENT, turn)
            if isinstance(event, TextDelta)
        ]
    )


async def test_hooks_fire_once_per_turn_in_order(server: FakeOpenAIServer) -> None:
    """Start, each tool's start and end, end: once each, with the turn's summary."""
    runtime = _runtime(server)
    every_turn, this_turn = Recorder(), AsyncRecorder()
    runtime.hooks.append(every_turn)
    server.add_tool_calls(
        [ToolCall("lookup", {"query": "x"})], prompt_tokens=50, completion_tokens=7
    )
    server.add_text("Found it.", prompt_tokens=70, completion_tokens=3)

    assert await _run(runtime, _turn("find x", this_turn, tools=[LOOKUP])) == "Found it."

    for recorder in (every_turn, this_turn):
        assert recorder.names == ["start", "tool_start", "tool_end", "end"]
    started = this_turn.calls[0][1]
    assert started == TurnStarted(thread_id="t", request="find x", model=MODEL)
    assert this_turn.calls[1][1].name == "lookup"
    assert this_turn.calls[2][1].result == {"found": "X"}
    summary = this_turn.calls[3][1]
    assert summary.error is None
    assert summary.answer == "Found it."
    assert (summary.model, summary.role) == (MODEL, "main")
    assert (summary.model_calls, summary.tool_calls) == (2, 1)
    # The tokens the provider reported in the stream's usage chunks, summed.
    assert (summary.input_tokens, summary.output_tokens) == (120, 10)
    assert summary.duration >= 0

    # A second turn fires its own hooks once more, not twice.
    server.add_text("Again.")
    await _run(runtime, _turn("again"))
    assert every_turn.names == ["start", "tool_start", "tool_end", "end", "start", "end"]
    assert this_turn.names == ["start", "tool_start", "tool_end", "end"]


async def test_hooks_fire_once_on_error(server: FakeOpenAIServer) -> None:
    """A failed turn: start, error, end, each once; the end carries the error's kind."""
    runtime = _runtime(server)
    recorder = Recorder()
    server.add_error(500, "down")

    with pytest.raises(TurnError) as raised:
        await _run(runtime, _turn("hello", recorder))

    assert raised.value.kind == "server"
    assert recorder.names == ["start", "error", "end"]
    failed, summary = recorder.calls[1][1], recorder.calls[2][1]
    assert (failed.thread_id, failed.kind) == ("t", "server")
    assert "key" not in failed.detail.split()
    assert summary.error == "server"
    assert summary.model is None
    assert summary.model_calls == 0


async def test_empty_answer_is_an_error_for_hooks(server: FakeOpenAIServer) -> None:
    """A turn that fails after the model answered still ends once, naming the model."""
    runtime = _runtime(server)
    recorder = Recorder()
    server.add_empty()

    with pytest.raises(TurnError):
        await _run(runtime, _turn("hello", recorder))

    assert recorder.names == ["start", "error", "end"]
    summary = recorder.calls[2][1]
    assert summary.error == "empty_answer"
    assert (summary.model, summary.model_calls) == (MODEL, 1)


async def test_failing_hooks_never_break_a_turn(
    server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Every hook of one observer raises: the turn answers, the others still hear it."""
    runtime = _runtime(server)
    after = Recorder()
    server.add_tool_calls([ToolCall("lookup", {"query": "y"})])
    server.add_text("Done.")

    with caplog.at_level(logging.ERROR):
        answer = await _run(runtime, _turn("find y", Broken(), after, tools=[LOOKUP]))

    assert answer == "Done."
    assert after.names == ["start", "tool_start", "tool_end", "end"]
    logged = [r.getMessage() for r in caplog.records if "hook of Broken failed" in r.getMessage()]
    assert len(logged) == 4
    assert "start hook broke" in caplog.text
    assert "end hook broke" in caplog.text

    # And on a failing turn the turn's own error is what the caller gets.
    server.add_error(401, "bad key")
    with pytest.raises(TurnError) as raised:
        await _run(runtime, _turn("hello", Broken(), after))
    assert raised.value.kind == "auth"
    assert after.names[-3:] == ["start", "error", "end"]


async def test_tokens_reported_by_ollama(socket_enabled: None) -> None:
    """Ollama's own counts (prompt_eval_count, eval_count) reach the summary too."""
    async with FakeOllamaServer() as ollama:
        runtime = AgentRuntime(
            ModelAccess("ollama_chat/llama3.2", None, ollama.base_url), InMemorySaver()
        )
        recorder = Recorder()
        ollama.add_text("Hello from Ollama.", prompt_tokens=33, completion_tokens=5)
        assert await _run(runtime, _turn("hi", recorder)) == "Hello from Ollama."
    summary = recorder.calls[-1][1]
    assert (summary.model, summary.input_tokens, summary.output_tokens) == (
        "ollama_chat/llama3.2",
        33,
        5,
    )


async def test_turn_end_fires_when_the_consumer_stops(server: FakeOpenAIServer) -> None:
    """A consumer that stops reading ends the turn once, as cancelled; the thread is free."""
    runtime = _runtime(server)
    recorder = Recorder()
    server.add_text("A long answer that nobody reads to the end.", chunk_size=2)
    events = runtime.run_turn(AGENT, _turn("hello", recorder))
    while not isinstance(await anext(events), TextDelta):
        pass
    await events.aclose()
    assert recorder.names == ["start", "end"]
    assert recorder.calls[-1][1].error == "cancelled"

    # The thread's lock was released: the next turn on it runs.
    server.add_text("Next.")
    assert await _run(runtime, _turn("again", recorder)) == "Next."
    assert recorder.calls[-1][1].error is None
