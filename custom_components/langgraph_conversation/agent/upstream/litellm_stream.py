"""Reading an Ollama answer from LiteLLM's own parser, past its stream wrapper.

Behaviour worked around (checked on LiteLLM 1.83.0): LiteLLM's stream wrapper
(`CustomStreamWrapper`) re-creates every chunk several times over as pydantic objects and
rebuilds the whole answer at the end for its logging and cost machinery: about 8 ms of CPU
per answer on the event loop, and LiteLLM has no switch for a lean stream. For
`ollama_chat` the wrapper's `completion_stream` attribute is LiteLLM's Ollama parser
(`OllamaChatCompletionResponseIterator`) over the response lines (its
`streaming_response`). `ollama_stream` reads those lines itself: a line that is nothing
but more answer text becomes that text, every other line goes through the parser's own
`chunk_parser` (tool calls, reasoning, the final line with usage, error lines); a line
that is not bare JSON is read by the parser's `_string_to_dict_parser`, and its
`started_reasoning_content` says whether text is inside reasoning. A failure mid-stream
goes to the wrapper's `_handle_stream_fallback_error`, which raises LiteLLM's mapped
exception exactly as iterating the wrapper would have. An answer cut short is closed with
its response, found as the `self` of the parser's httpx `aiter_lines()` generator
(`close_response`).

On another version `lean_source` finds nothing (one log line says so) and the answer is
read through the wrapper, LiteLLM's plain public path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
import json
from typing import Any, NoReturn

import httpx
from litellm.llms.ollama.chat.transformation import OllamaChatCompletionResponseIterator

from .stream_ends import read_to_end
from .versions import matches

CHECKED_VERSIONS = frozenset({"1.83.0"})
ACTIVE = matches(
    "litellm",
    CHECKED_VERSIONS,
    "the lean Ollama stream",
    "Ollama answers are read through LiteLLM's stream wrapper",
)

_PLAIN_KEYS = frozenset({"role", "content"})


def lean_source(wrapper: Any) -> OllamaChatCompletionResponseIterator | None:
    """The Ollama parser inside LiteLLM's stream wrapper, if this answer can be read lean."""
    raw = getattr(wrapper, "completion_stream", None)
    if ACTIVE and isinstance(raw, OllamaChatCompletionResponseIterator):
        return raw
    return None


async def close_response(raw: OllamaChatCompletionResponseIterator) -> None:
    """Close the HTTP response of an answer cut short, with every generator it is read through.

    The parser holds only httpx's `aiter_lines()` generator (LiteLLM does not keep the
    response); the response is that generator's own `self`. Closing the lines alone would
    leave httpx's inner generators to the event loop (see stream_ends.py): the response is
    closed first, then the lines are read until the closed connection ends them.
    """
    lines = getattr(raw, "streaming_response", None)
    if lines is None:
        return
    frame = getattr(lines, "ag_frame", None)  # None once the lines have ended
    response = frame.f_locals.get("self") if frame is not None else None
    if isinstance(response, httpx.Response):
        await response.aclose()
        await read_to_end(lines)
    aclose = getattr(lines, "aclose", None)
    if aclose is not None:
        await aclose()


def raise_mapped(wrapper: Any, err: Exception) -> NoReturn:
    """Raise LiteLLM's mapped exception for a failure mid-stream, as the wrapper would."""
    wrapper._handle_stream_fallback_error(err)
    raise err  # not reached: the wrapper's handler always raises


async def ollama_stream(raw: OllamaChatCompletionResponseIterator) -> AsyncIterator[str | Any]:
    """An Ollama /api/chat stream: plain answer text as str, other lines as LiteLLM parses
    them (a ModelResponseStream, or whatever the parser returns for the line)."""
    lines = aiter(raw.streaming_response)
    while True:
        try:
            line = await anext(lines)
        except StopAsyncIteration:
            return
        except ValueError as err:  # what LiteLLM's iterator raises for this
            raise RuntimeError(f"Error receiving chunk from stream: {err}") from err
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError:
            # Not bare JSON: LiteLLM's own reading (an SSE "data:" prefix is stripped;
            # anything else is skipped).
            data = raw._string_to_dict_parser(line)
        if not isinstance(data, dict):
            continue
        if (text := plain_text(data, raw)) is not None:
            yield text
        else:
            yield raw.chunk_parser(data)


def plain_text(data: dict[str, Any], raw: OllamaChatCompletionResponseIterator) -> str | None:
    """The text of a line that is nothing but more answer text, else None.

    Exactly the lines for which LiteLLM's parser yields content and nothing else: not
    the last line, no tool calls or thinking, no think tags, not inside reasoning.
    """
    message = data.get("message")
    if (
        data.get("done") is not False
        or raw.started_reasoning_content
        or not isinstance(message, dict)
        or not message.keys() <= _PLAIN_KEYS
    ):
        return None
    content = message.get("content")
    if not isinstance(content, str) or "<think>" in content or "</think>" in content:
        return None
    return content
