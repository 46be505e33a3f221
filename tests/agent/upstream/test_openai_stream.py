"""Contract of agent/upstream/openai_stream.py: how LiteLLM's wrapper reads the OpenAI SDK's
stream, where the SDK leaves generators behind, and that the ClosingStream reads the same
chunks while leaving none.

That whole answers and turns leave nothing for the loop is checked in
tests/agent/models/test_stream_closing.py.
"""

from __future__ import annotations

import inspect
from typing import Any

import litellm
from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper
from openai import AsyncStream
import pytest

from custom_components.langgraph_conversation.agent.upstream import openai_stream, versions
from fakes import FakeOpenAIServer

from ...conftest import TEST_KEY
from ...loop_closings import nothing_left_for_the_loop, watch_loop_closings

TEXT = "It is twenty-one degrees in the kitchen, and the light is on."


def test_the_installed_versions_are_the_checked_ones() -> None:
    """An upgrade lands here first: review agent/upstream/openai_stream.py for it."""
    assert versions.installed("openai") in openai_stream.CHECKED_VERSIONS
    assert versions.installed("litellm") in openai_stream.CHECKED_LITELLM
    assert openai_stream.ACTIVE


def test_the_sdk_stream_keeps_the_members_read() -> None:
    # __stream__ asks the instance for its events, so an instance attribute takes its place.
    assert "self._iter_events()" in inspect.getsource(AsyncStream.__stream__)
    assert '"[DONE]"' in inspect.getsource(AsyncStream.__stream__)
    assert inspect.isasyncgenfunction(AsyncStream._iter_events)
    assert "self._decoder.aiter_bytes(self.response.aiter_bytes())" in inspect.getsource(
        AsyncStream._iter_events
    )
    # The wrapper reads whatever its completion_stream is with `async for` per chunk.
    assert "async for chunk in self.completion_stream" in inspect.getsource(
        CustomStreamWrapper.__anext__
    )


async def _open(server: FakeOpenAIServer, text: str = TEXT, **options: Any) -> Any:
    server.add_text(text, **options)
    return await litellm.acompletion(
        model="openai/gpt-test",
        api_key=TEST_KEY,
        api_base=server.api_base,
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
    )


async def _text(stream: Any) -> str:
    return "".join([chunk.choices[0].delta.content or "" async for chunk in stream])


async def test_read_plainly_the_sdk_leaves_generators_for_the_loop(
    openai_server: FakeOpenAIServer,
) -> None:
    """The behaviour worked around: still there (else the workaround can go)."""
    stream = await _open(openai_server)
    assert isinstance(stream, CustomStreamWrapper)
    assert isinstance(stream.completion_stream, AsyncStream)
    with watch_loop_closings() as closings:
        assert await _text(stream) == TEXT
        await stream.aclose()
    # One per chunk (LiteLLM's `async for`), and the chain under `_iter_events` at [DONE].
    assert closings.generators.count("_streaming.py:AsyncStream.__aiter__") > 3
    assert "_streaming.py:AsyncStream._iter_events" in closings.generators


@pytest.mark.parametrize("chunk_size", [1, 7, 1000])
async def test_the_closing_stream_reads_the_same_chunks_and_leaves_none(
    openai_server: FakeOpenAIServer, chunk_size: int
) -> None:
    plain = await _open(openai_server, chunk_size=chunk_size)
    expected = [chunk.model_dump(exclude={"id", "created"}) async for chunk in plain]
    await plain.aclose()
    owned = await _open(openai_server, chunk_size=chunk_size)
    openai_stream.own(owned)
    assert isinstance(owned.completion_stream, openai_stream.ClosingStream)
    with nothing_left_for_the_loop():
        actual = [chunk.model_dump(exclude={"id", "created"}) async for chunk in owned]
        await owned.aclose()
    assert actual == expected
    assert (
        "".join(c["choices"][0]["delta"]["content"] or "" for c in actual if c["choices"]) == TEXT
    )


async def test_closed_before_its_end_the_response_is_closed_and_nothing_left(
    openai_server: FakeOpenAIServer,
) -> None:
    stream = await _open(openai_server, chunk_size=2)
    openai_stream.own(stream)
    sdk_stream = stream.completion_stream._stream
    with nothing_left_for_the_loop():
        first = await anext(stream)
        await stream.aclose()
    assert first.choices[0].delta.content
    assert sdk_stream.response.is_closed


async def test_a_stream_of_another_kind_is_left_alone() -> None:
    stream = litellm.completion(
        model="gpt-4o",
        messages=[{"role": "user", "content": "Hi"}],
        mock_response="Hello.",
        stream=True,
    )
    before = stream.completion_stream
    openai_stream.own(stream)
    assert stream.completion_stream is before
