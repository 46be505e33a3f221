"""Bounds: no model answer and no tool argument can keep the home busy.

A model (confused, injected or broken) may ask for thousands of tool calls in one
message, write megabytes into an argument, or stream without end. Whatever it sends, at
most the per-message cap of calls reach Home Assistant, oversized arguments are answered
as errors, a runaway answer is cut with a sentence for the user, Home Assistant's event
loop keeps running, and the next turn works.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from typing import Any

from langchain_core.messages import AIMessageChunk
from langchain_core.messages.ai import add_ai_message_chunks
from langchain_core.messages.tool import tool_call_chunk
import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service

from custom_components.langgraph_conversation.agent.graph.tool_calls import (
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENTS_CHARS,
    MAX_TOOL_CALLS_KEPT,
    MAX_TOOL_CALLS_PER_MESSAGE,
)
from custom_components.langgraph_conversation.agent.models import AnswerBuilder
from custom_components.langgraph_conversation.agent.models.answer import CALL_COST, MAX_ANSWER_CHARS
from custom_components.langgraph_conversation.const import (
    CONF_LLM_HASS_API,
    CONF_REQUEST_TIMEOUT,
)
from custom_components.langgraph_conversation.tools.entities import MAX_QUERY_CHARS
from fakes import FakeOpenAIServer, Reply, ToolCall
from homeassistant.core import HomeAssistant

from ..helpers import add_light, assist_tool_name, messages_of, text_of
from .conftest import (
    ask,
    assert_responsive,
    assert_sentence,
    assert_thread_consistent,
    pairs,
    speech,
    thread_messages,
)

ANSWER = "Done."
# How long Home Assistant's loop stalls under these answers is a speed figure, measured
# by scripts/bench (figure 9, "hostile"), not asserted here on a shared machine.


def _tool_results(server: FakeOpenAIServer, request: int) -> list[dict[str, Any]]:
    """The tool results (decoded) the model received in one request."""
    return [json.loads(text_of(m)) for m in messages_of(server.requests[request], "tool")]


async def _assert_next_turn_works(
    hass: HomeAssistant, entry: MockConfigEntry, server: FakeOpenAIServer, conversation_id: str
) -> None:
    """The conversation goes on: a plain question is answered, the thread is whole."""
    server.clear_replies()
    # Every request gets the same answer: a long thread is summarised first (another
    # request to the model) before the question is answered.
    server.responder = lambda _request: Reply(text="Still here.")
    result = await ask(hass, entry, "Are you there?", conversation_id)
    server.responder = None
    assert speech(result) == "Still here."
    assert result.conversation_id == conversation_id
    messages = await thread_messages(entry, conversation_id)
    assert_thread_consistent(messages)
    assert pairs(messages)[-2:] == [("human", "Are you there?"), ("ai", "Still here.")]
    await assert_responsive(hass)


@pytest.mark.parametrize(
    "count", [MAX_TOOL_CALLS_PER_MESSAGE + 1, 23, MAX_TOOL_CALLS_KEPT, MAX_TOOL_CALLS_KEPT + 1, 300]
)
async def test_tool_calls_of_one_message_are_capped(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    count: int,
) -> None:
    """At most the cap of calls run; each extra kept call is answered as an error, the
    rest are dropped from the message and the model is told how many."""
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    turned_on = async_mock_service(hass, "light", "turn_on")
    tool = await assist_tool_name(hass, "HassTurnOn")
    openai_server.add_tool_calls([ToolCall(tool, {"name": "Kitchen Light"})] * count)
    openai_server.add_text(ANSWER)

    result = await ask(hass, setup_integration, "Turn on the kitchen light, a lot")
    await hass.async_block_till_done()

    assert speech(result) == ANSWER
    assert len(turned_on) == MAX_TOOL_CALLS_PER_MESSAGE
    kept = min(count, MAX_TOOL_CALLS_KEPT)
    results = _tool_results(openai_server, 1)
    assert len(results) == kept
    refused = [r for r in results if isinstance(r, dict) and r.get("error") == "too_many_calls"]
    assert len(refused) == kept - MAX_TOOL_CALLS_PER_MESSAGE
    assert f"call {MAX_TOOL_CALLS_PER_MESSAGE + 1} of {count:,}" in refused[0]["error_text"]
    dropped = count - kept
    assert (f"The {dropped:,} calls after this one were dropped" in refused[-1]["error_text"]) is (
        dropped > 0
    )
    # The model's own message, as sent back to it, holds exactly the calls answered.
    assistant = messages_of(openai_server.requests[1], "assistant")[-1]
    assert len(assistant["tool_calls"]) == kept
    await _assert_next_turn_works(hass, setup_integration, openai_server, result.conversation_id)


@pytest.mark.parametrize(
    "sizes",
    [
        (MAX_ARGUMENT_CHARS + 1,),
        (MAX_ARGUMENT_CHARS * 3,),
        (50_000,),
        (MAX_ARGUMENT_CHARS - 100,) * 5,
    ],
    ids=["one-over", "three-times", "50000", "five-under-each"],
)
async def test_oversized_arguments_are_answered_not_run(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    sizes: tuple[int, ...],
) -> None:
    """An argument over its limit, or arguments over theirs in all, are not run."""
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    turned_on = async_mock_service(hass, "light", "turn_on")
    tool = await assist_tool_name(hass, "HassTurnOn")
    arguments = {"name": "Kitchen Light"}
    arguments |= {f"note{i}": "x" * (size - 2) for i, size in enumerate(sizes)}
    openai_server.add_tool_calls([ToolCall(tool, arguments)], chunk_size=1000)
    openai_server.add_text(ANSWER)

    result = await ask(hass, setup_integration, "Turn on the kitchen light")
    await hass.async_block_till_done()

    assert speech(result) == ANSWER
    assert turned_on == []
    (error,) = _tool_results(openai_server, 1)
    expected = "argument_too_long" if max(sizes) > MAX_ARGUMENT_CHARS else "arguments_too_long"
    assert error["error"] == expected
    assert sum(sizes) > MAX_ARGUMENTS_CHARS or max(sizes) > MAX_ARGUMENT_CHARS
    await _assert_next_turn_works(hass, setup_integration, openai_server, result.conversation_id)


# Our tools only: the Assist API would list every entity in the prompt and its tool
# schemas, which is Home Assistant's own work on the loop, not the search's.
OWN_TOOLS_ONLY = {CONF_LLM_HASS_API: []}


@pytest.mark.parametrize("agent_overrides", [OWN_TOOLS_ONLY])
@pytest.mark.parametrize("length", [MAX_QUERY_CHARS + 1, 1_000, MAX_ARGUMENT_CHARS - 10])
async def test_long_search_query_neither_runs_nor_stalls(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    length: int,
) -> None:
    """A long query to home_find_entities is refused at once, in a home of 300 entities
    (fuzzy matching it against every name took seconds on the loop)."""
    for index in range(300):
        add_light(hass, f"lamp_{index}", f"Living Room Lamp Number {index}", exposed=True)
    query = ("living room lamp numbr " * (length // 20 + 1))[:length]
    # A first turn: what Home Assistant loads on the first one is not the search's.
    first = await ask(hass, setup_integration, "Hello")
    # In few chunks: LiteLLM's OpenAI stream costs about a millisecond per chunk and
    # rebuilds the whole answer when it ends, which is not the search's cost either.
    openai_server.add_tool_calls(
        [ToolCall("home_find_entities", {"query": query})], chunk_size=1000
    )
    openai_server.add_text(ANSWER)

    result = await ask(hass, setup_integration, "Find my lamps", first.conversation_id)

    assert speech(result) == ANSWER
    (error,) = _tool_results(openai_server, 2)
    assert error["error"] == "query_too_long"
    await _assert_next_turn_works(hass, setup_integration, openai_server, result.conversation_id)


@pytest.mark.parametrize("agent_overrides", [OWN_TOOLS_ONLY])
async def test_fuzzy_search_of_a_large_home_finds_with_typos(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The longest allowed query, with typos, over 3,000 entities: found, in slices."""
    for index in range(3000):
        add_light(hass, f"lamp_{index}", f"Hallway Ceiling Lamp {index}", exposed=True)
    query = ("halway celing lamp " * 10)[:MAX_QUERY_CHARS]
    first = await ask(hass, setup_integration, "Hello")
    openai_server.add_tool_calls(
        [
            ToolCall("home_find_entities", {"query": query}),
            ToolCall("home_find_entities", {"query": "halway celing lamp 12"}),
            ToolCall("home_find_entities", {}),
        ]
    )
    openai_server.add_text(ANSWER)

    result = await ask(hass, setup_integration, "Find my lamps", first.conversation_id)

    assert speech(result) == ANSWER
    long_typos, typos, everything = _tool_results(openai_server, 2)
    assert "error" not in long_typos
    assert typos["entities"][0]["name"] == "Hallway Ceiling Lamp 12"
    assert everything["count"] == 3000


@pytest.mark.parametrize(
    ("calls", "argument"),
    [(2_000, "K"), (1, "x" * 70_000), (1, "x" * 1_000_000)],
    ids=["2000-calls", "70k-argument", "1M-argument"],
)
async def test_runaway_tool_answer_is_cut(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    calls: int,
    argument: str,
) -> None:
    """An answer past the size bound runs nothing; the user hears why, the loop runs."""
    turned_on = async_mock_service(hass, "light", "turn_on")
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    tool = await assist_tool_name(hass, "HassTurnOn")
    size = calls * (len(tool) + len(json.dumps({"name": argument})) + CALL_COST)
    assert size > MAX_ANSWER_CHARS
    first = await ask(hass, setup_integration, "Hello")
    openai_server.add_tool_calls([ToolCall(tool, {"name": argument})] * calls, chunk_size=4096)

    result = await ask(hass, setup_integration, "Turn everything on", first.conversation_id)
    await hass.async_block_till_done()

    assert_sentence(result, "answer_too_long")
    assert turned_on == []
    messages = await thread_messages(setup_integration, first.conversation_id)
    assert pairs(messages) == [("human", "Hello"), ("ai", "OK")]
    await _assert_next_turn_works(hass, setup_integration, openai_server, first.conversation_id)


@pytest.mark.parametrize("chunk_size", [20, 500], ids=["small-chunks", "large-chunks"])
async def test_endless_text_is_cut_at_the_size_bound(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    chunk_size: int,
) -> None:
    """A model that never stops talking is cut once its answer passes the bound."""
    first = await ask(hass, setup_integration, "Hello")
    openai_server.add(Reply(text="la ", endless=True, chunk_size=chunk_size))

    result = await ask(hass, setup_integration, "Sing", first.conversation_id)

    assert_sentence(result, "answer_too_long")
    # The client hung up: the server's response ended.
    await _wait_for_responses(openai_server, 2)
    await _assert_next_turn_works(hass, setup_integration, openai_server, first.conversation_id)


@pytest.mark.parametrize(
    "agent_overrides", [{CONF_REQUEST_TIMEOUT: 1}, {CONF_REQUEST_TIMEOUT: 1.5}]
)
async def test_endless_slow_stream_is_cut_at_the_deadline(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
) -> None:
    """Every read comes in time (a chunk every 20 ms), yet the answer never ends: it is
    cut at the turn's deadline (twice the request timeout), and the user hears why.

    Asserted on the effects, not on a stopwatch (a busy machine stretches any elapsed
    time): the user gets the deadline's sentence (the text so far stays far below the
    size bound, so no other cut applies), the stream ends because the client hung up,
    nothing is retried, and the thread keeps only whole turns."""
    first = await ask(hass, setup_integration, "Hello")
    openai_server.add(Reply(text="la ", endless=True, chunk_size=3, chunk_delay=0.02))

    result = await ask(hass, setup_integration, "Sing", first.conversation_id)

    assert_sentence(result, "answer_too_slow")
    # The client hung up: the server's endless response ended; no second attempt was made.
    await _wait_for_responses(openai_server, 2)
    assert openai_server.request_count == 2
    # The cut turn left nothing half-said in the thread.
    messages = await thread_messages(setup_integration, first.conversation_id)
    assert_thread_consistent(messages)
    assert pairs(messages) == [("human", "Hello"), ("ai", "OK")]
    await _assert_next_turn_works(hass, setup_integration, openai_server, first.conversation_id)


async def _wait_for_responses(server: FakeOpenAIServer, count: int) -> None:
    """Wait until the server has finished `count` responses (the client hung up)."""
    async with asyncio.timeout(5):
        while len(server.timings) < count:  # noqa: ASYNC110  the server runs on its own thread
            await asyncio.sleep(0.01)


def _calls_stream(calls: int, pieces: int, *, shared_index: bool) -> list[AIMessageChunk]:
    """Chunks of `calls` tool calls, OpenAI style (an index per call, the id and name
    first, then argument pieces) or LiteLLM-on-Ollama style (every call at index 0 with
    its own id)."""
    chunks = [AIMessageChunk(content="Sure, ")]
    for number in range(calls):
        index = 0 if shared_index else number
        arguments = json.dumps({"name": f"Lamp {number}", "brightness": number % 100})
        step = max(1, len(arguments) // pieces)
        fragments = [arguments[i : i + step] for i in range(0, len(arguments), step)]
        chunks.append(
            AIMessageChunk(
                content="",
                tool_call_chunks=[
                    tool_call_chunk(name="light", args="", id=f"call_{number}", index=index)
                ],
            )
        )
        chunks += [
            AIMessageChunk(
                content="",
                tool_call_chunks=[tool_call_chunk(args=fragment, index=index)],
            )
            for fragment in fragments
        ]
        if shared_index:
            # Ollama's calls come whole: one chunk each.
            chunks[-len(fragments) - 1 :] = [
                AIMessageChunk(
                    content="",
                    tool_call_chunks=[
                        tool_call_chunk(
                            name="light", args=arguments, id=f"call_{number}", index=index
                        )
                    ],
                )
            ]
    chunks.append(AIMessageChunk(content="done.", response_metadata={"finish_reason": "stop"}))
    return chunks


def _built(chunks: list[AIMessageChunk]) -> tuple[Any, float]:
    builder = AnswerBuilder(max_chars=10**9)
    # Without the collector: its passes grow with the heap, not with the merge.
    gc.disable()
    try:
        # CPU time of this process: another process on a busy machine does not count.
        started = time.process_time()
        for chunk in chunks:
            builder.add(chunk)
        message = builder.message(with_tools=True)
        return message, time.process_time() - started
    finally:
        gc.enable()


@pytest.mark.parametrize("shared_index", [False, True], ids=["openai", "ollama"])
@pytest.mark.parametrize("calls", [1, 7, 60])
@pytest.mark.parametrize("pieces", [1, 5])
def test_answer_builder_merges_as_langchain_does(
    shared_index: bool, calls: int, pieces: int
) -> None:
    """The linear merge gives the message langchain's own merge gives."""
    chunks = _calls_stream(calls, pieces, shared_index=shared_index)
    ours, _ = _built(chunks)
    theirs = add_ai_message_chunks(chunks[0], *chunks[1:])
    assert ours.content == theirs.content
    assert ours.tool_calls == theirs.tool_calls
    assert ours.invalid_tool_calls == theirs.invalid_tool_calls
    assert ours.response_metadata == theirs.response_metadata


@pytest.mark.parametrize("shared_index", [False, True], ids=["openai", "ollama"])
def test_answer_builder_is_linear(shared_index: bool) -> None:
    """Four times the calls cost about four times the time, not sixteen.

    Measured in the process's CPU time, best of five, for a shared machine (linear is
    about 4, langchain's merge, quadratic here, about 16).
    """
    small = _calls_stream(500, 4, shared_index=shared_index)
    large = _calls_stream(2_000, 4, shared_index=shared_index)
    small_time = min(_built(small)[1] for _ in range(5))
    large_time = min(_built(large)[1] for _ in range(5))
    message, _ = _built(large)
    assert len(message.tool_calls) == 2_000
    assert large_time / small_time < 10, (small_time, large_time)
