"""Reading the OpenAI SDK's stream inside LiteLLM's wrapper, with every async generator closed
by the answer that opened it instead of by the event loop later.

Behaviour worked around (checked on LiteLLM 1.83.0 with the OpenAI SDK 2.15.0, 3.10.0 and
3.26.0, the versions of the legs):

- Per chunk. LiteLLM's stream wrapper (`CustomStreamWrapper.__anext__`) reads its
  `completion_stream` with a fresh `async for` for every chunk and returns from inside it.
  The SDK's `AsyncStream.__aiter__` is an async generator, so every chunk leaves one
  suspended generator behind. Python hands each to the event loop, which closes it in a
  task of its own: one task per chunk of every answer.
- At the end. `AsyncStream.__stream__` stops at "[DONE]" and closes the HTTP response, but
  not the generator it reads the events through (`_iter_events`, over the SSE decoder's
  `aiter_bytes` and httpx's and httpcore's byte generators, nine links). An answer closed
  early (too long, past its deadline) leaves the same chain, and `__stream__` itself. The
  loop closes the chain one link per pass, in tasks, after the turn has returned; on a busy
  machine a test's last links were still open when Home Assistant's plugin checked for
  lingering tasks.

`own(wrapper)` puts a ClosingStream in the wrapper's place for the SDK's stream (before
the first chunk is read). It is read as one iterator (`__aiter__` is itself, so LiteLLM's
`async for` leaves nothing behind), it hands `__stream__` its events through a plain
iterator over the SDK's own decoder, and at "[DONE]" it reads the response to its end, so
every generator of the chain finishes by itself. Closed early, it closes `__stream__`
(which closes the response, as the SDK does), then reads the rest of the chain until the
closed connection ends it with an error, so no link is left suspended. Both reads are
bounded (stream_ends.CLOSE_GRACE); past it, the cancellation ends the links as well.

The SDK's decoding, error mapping and chunk types stay the SDK's; LiteLLM's chunk handling
stays LiteLLM's. On other versions (or a stream of another kind) nothing is replaced (one
log line says so): the loop closes the generators later, as it always did.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from openai import AsyncStream

from .stream_ends import read_to_end
from .versions import matches

CHECKED_VERSIONS = frozenset({"2.15.0", "3.10.0", "3.26.0"})
CHECKED_LITELLM = frozenset({"1.83.0"})
ACTIVE = matches(
    "openai",
    CHECKED_VERSIONS,
    "closing the OpenAI SDK's stream generators with each answer",
    "the event loop closes them after the answer, in tasks of its own",
) and matches(
    "litellm",
    CHECKED_LITELLM,
    "closing the OpenAI SDK's stream generators with each answer",
    "the event loop closes them after the answer, in tasks of its own",
)


def own(wrapper: Any) -> None:
    """Read `wrapper`'s OpenAI SDK stream (if that is what it holds) through a ClosingStream."""
    stream = getattr(wrapper, "completion_stream", None)
    if ACTIVE and isinstance(stream, AsyncStream):
        wrapper.completion_stream = ClosingStream(stream)


class ClosingStream:
    """An OpenAI SDK AsyncStream read as one iterator whose generators it closes itself."""

    def __init__(self, stream: AsyncStream[Any]) -> None:
        self._stream = stream
        # Started by `__stream__` on the first chunk: the SDK's decoder over httpx's bytes.
        self._events: AsyncIterator[Any] | None = None
        stream._iter_events = self._open_events  # type: ignore[method-assign]

    def _open_events(self) -> _Events:
        self._events = self._stream._decoder.aiter_bytes(self._stream.response.aiter_bytes())
        return _Events(self)

    def __aiter__(self) -> ClosingStream:
        return self

    async def __anext__(self) -> Any:
        return await self._stream.__anext__()

    async def aclose(self) -> None:
        """Close the SDK's generator and its response, then end the chain below them."""
        try:
            await self._stream._iterator.aclose()
        finally:
            await self._stream.close()
            await self.finish_events()

    async def finish_events(self) -> None:
        """Read the event chain to its end (or to the error of its closed connection)."""
        events, self._events = self._events, None
        if events is not None:
            await read_to_end(events)

    def __getattr__(self, name: str) -> Any:
        # Anything else LiteLLM may read (the response, its headers) is the SDK stream's.
        return getattr(self._stream, name)


class _Events:
    """The events `__stream__` reads: a plain iterator, so the SDK's `break` at "[DONE]"
    leaves no generator suspended; the chain is read to its end before "[DONE]" is
    handed on."""

    def __init__(self, owner: ClosingStream) -> None:
        self._owner = owner

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> Any:
        events = self._owner._events
        if events is None:
            raise StopAsyncIteration
        event = await anext(events)
        if event.data.startswith("[DONE]"):
            await self._owner.finish_events()
        return event
