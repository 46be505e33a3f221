"""Contract of agent/upstream/litellm_stream.py: LiteLLM's Ollama parser inside its stream
wrapper, the parser's output shape, and the wrapper's error mapping.

That the lean stream gives LangGraph what LiteLLM's wrapper gives is checked end to end in
tests/agent/models/test_lean_stream.py.
"""

from __future__ import annotations

from contextlib import aclosing
import json
from typing import Any

import httpx
import litellm
from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper
from litellm.llms.ollama.chat.transformation import OllamaChatCompletionResponseIterator
from litellm.types.utils import ModelResponseStream
import pytest

from custom_components.langgraph_conversation.agent.upstream import litellm_stream, versions
from fakes import FakeOllamaServer

from ...loop_closings import nothing_left_for_the_loop


def _line(content: str = "", *, done: bool = False, **message: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "model": "llama3.2",
        "created_at": "2026-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": content, **message},
        "done": done,
    }
    if done:
        line |= {"done_reason": "stop", "prompt_eval_count": 12, "eval_count": 3}
    return line


def _parser() -> OllamaChatCompletionResponseIterator:
    return OllamaChatCompletionResponseIterator(
        streaming_response=None, sync_stream=False, json_mode=False
    )


def test_the_installed_litellm_is_the_checked_one() -> None:
    """An upgrade lands here first: review agent/upstream/litellm_stream.py for it."""
    assert versions.installed("litellm") in litellm_stream.CHECKED_VERSIONS
    assert litellm_stream.ACTIVE


async def test_the_wrapper_still_holds_the_parser_over_the_response(
    ollama_server: FakeOllamaServer,
) -> None:
    ollama_server.add_text("Hello there.")
    wrapper = await litellm.acompletion(
        model="ollama_chat/llama3.2",
        api_base=ollama_server.base_url,
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
    )
    assert isinstance(wrapper, CustomStreamWrapper)
    raw = litellm_stream.lean_source(wrapper)
    assert isinstance(raw, OllamaChatCompletionResponseIterator)
    assert raw is wrapper.completion_stream
    items = [item async for item in litellm_stream.ollama_stream(raw)]
    texts = [item for item in items if isinstance(item, str)]
    assert "".join(texts) == "Hello there."
    # The last line (done) went through the parser: finish reason and usage.
    final = items[-1]
    assert isinstance(final, ModelResponseStream)
    assert final.choices[0].finish_reason == "stop"
    await wrapper.aclose()


@pytest.mark.parametrize("content", ["It is 21", " degrees.", "", "a { b } c"])
def test_a_plain_line_is_exactly_the_parsers_content(content: str) -> None:
    parser = _parser()
    data = _line(content)
    assert litellm_stream.plain_text(data, parser) == content
    chunk = parser.chunk_parser(data)
    assert isinstance(chunk, ModelResponseStream)
    [choice] = chunk.choices
    assert (choice.delta.content or "") == content
    assert not choice.delta.tool_calls
    assert not getattr(choice.delta, "reasoning_content", None)
    assert choice.finish_reason is None


def test_lines_the_parser_must_read_are_left_to_it() -> None:
    parser = _parser()
    call = {"function": {"name": "HassTurnOn", "arguments": {"name": "Kitchen"}}}
    tool_line = _line(tool_calls=[call])
    assert litellm_stream.plain_text(tool_line, parser) is None
    [parsed_call] = parser.chunk_parser(tool_line).choices[0].delta.tool_calls
    assert parsed_call.function.name == "HassTurnOn"
    assert json.loads(parsed_call.function.arguments) == {"name": "Kitchen"}

    thinking = _line(thinking="Which room?")
    assert litellm_stream.plain_text(thinking, parser) is None
    assert parser.chunk_parser(thinking).choices[0].delta.reasoning_content == "Which room?"

    done = _line(done=True)
    assert litellm_stream.plain_text(done, parser) is None
    final = parser.chunk_parser(done)
    assert final.choices[0].finish_reason == "stop"
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (12, 3)


def test_think_tags_set_the_parsers_reasoning_state() -> None:
    parser = _parser()
    opening = _line("<think>Which")
    assert litellm_stream.plain_text(opening, parser) is None
    assert parser.chunk_parser(opening).choices[0].delta.reasoning_content == "Which"
    assert parser.started_reasoning_content is True
    # Once reasoning started, even a plain-looking line is the parser's to read (its state
    # decides where the text goes).
    assert litellm_stream.plain_text(_line(" room?"), parser) is None


def test_a_line_that_is_not_bare_json_is_read_by_the_parser() -> None:
    data = _line("Hi")
    assert (
        OllamaChatCompletionResponseIterator._string_to_dict_parser("data: " + json.dumps(data))
        == data
    )
    assert OllamaChatCompletionResponseIterator._string_to_dict_parser("event: ping") is None


async def test_a_failure_mid_stream_becomes_litellms_mapped_exception(
    ollama_server: FakeOllamaServer,
) -> None:
    ollama_server.add_text("Hello there.")
    wrapper = await litellm.acompletion(
        model="ollama_chat/llama3.2",
        api_base=ollama_server.base_url,
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
    )
    try:
        with pytest.raises(litellm.exceptions.MidStreamFallbackError) as raised:
            litellm_stream.raise_mapped(wrapper, RuntimeError("Error receiving chunk"))
        # What classify_error reads: LiteLLM's connection error underneath.
        assert isinstance(raised.value.original_exception, litellm.APIConnectionError)
        assert "Error receiving chunk" in str(raised.value)
    finally:
        await wrapper.aclose()


async def test_an_answer_cut_short_is_closed_with_its_response(
    ollama_server: FakeOllamaServer,
) -> None:
    """The parser reads httpx's `aiter_lines()` of the response (its frame's `self`):
    close_response closes that response and ends every generator under the lines."""
    ollama_server.add_text("la " * 200, chunk_size=3)
    wrapper = await litellm.acompletion(
        model="ollama_chat/llama3.2",
        api_base=ollama_server.base_url,
        messages=[{"role": "user", "content": "Sing"}],
        stream=True,
    )
    raw = litellm_stream.lean_source(wrapper)
    assert raw is not None
    lines = raw.streaming_response
    response = lines.ag_frame.f_locals["self"]
    assert isinstance(response, httpx.Response)
    with nothing_left_for_the_loop():
        async with aclosing(litellm_stream.ollama_stream(raw)) as text:
            assert await anext(text) == "la "
        await litellm_stream.close_response(raw)
    assert response.is_closed
    assert lines.ag_frame is None  # ended, not left suspended
