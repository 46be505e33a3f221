"""What a fake model server answers: scripted replies, shared by every wire protocol.

A test queues replies in the order the model is expected to be called; each chat
request takes the next one. The replies say *what* the model answers (text, tool
calls, an HTTP error, a damaged stream); each server module says *how* that looks
on its own wire protocol.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
import json
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the model asks for.

    `arguments` is normally an object; a string is sent verbatim as the encoded
    arguments, which is how a test scripts a model that emits malformed JSON.
    """

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)

    @property
    def arguments_json(self) -> str:
        """The arguments as the JSON text OpenAI-style APIs carry."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


class StreamFault(Enum):
    """A way for an otherwise normal answer to go wrong on the wire."""

    # The connection is closed after the text, without the final chunk or [DONE].
    DISCONNECT = "disconnect"
    # One chunk after the text is not valid JSON; the stream then ends normally.
    INVALID_JSON = "invalid_json"
    # The connection is reset before the status line: not one byte of an answer (a
    # server restarting, a proxy dropping the request).
    RESET = "reset"


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """A successful-looking answer: text, then tool calls, optionally damaged.

    Streaming requests get the text in pieces of `chunk_size` characters, with
    `chunk_delay` seconds between chunks; non-streaming requests get it whole.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    chunk_size: int = 4
    chunk_delay: float = 0.0
    # Seconds before the response headers; None uses the server's first_byte_delay.
    first_byte_delay: float | None = None
    # None lets the protocol pick its usual value ("stop", or "tool_calls" on OpenAI).
    finish_reason: str | None = None
    # Token counts reported in usage; None means a rough estimate (characters / 4).
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    fault: StreamFault | None = None
    # A model that never stops: a streamed answer goes on with its text, numbered ("la 1
    # la 2 ..."), until the client hangs up; no finish chunk ever comes. (Identical
    # chunks over and over would trip LiteLLM's own check for a stuck model.)
    endless: bool = False

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        if self.endless and not self.text:
            raise ValueError("an endless reply needs text to repeat")

    def text_pieces(self) -> list[str]:
        """The text as streamed, one piece per chunk."""
        return pieces(self.text, self.chunk_size)

    def streamed_pieces(self) -> Iterator[str]:
        """The text pieces a stream sends: once, or over and over if `endless`."""
        yield from self.text_pieces()
        repeat = 0
        while self.endless:
            repeat += 1
            yield from pieces(f"{self.text}{repeat} ", self.chunk_size)

    def usage(self, request: Mapping[str, Any]) -> tuple[int, int]:
        """(prompt_tokens, completion_tokens) to report for this answer to `request`."""
        prompt = self.prompt_tokens
        if prompt is None:
            prompt = estimate_tokens(json.dumps(request.get("messages", [])))
        completion = self.completion_tokens
        if completion is None:
            produced = self.text + "".join(c.name + c.arguments_json for c in self.tool_calls)
            completion = estimate_tokens(produced)
        return prompt, completion


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorReply:
    """An HTTP error in the provider's own error format."""

    status: int
    message: str
    # OpenAI's error.code (e.g. "model_not_found"); Ollama has no such field.
    code: str | None = None
    # OpenAI's error.type (Ollama has none); None picks one from the status.
    error_type: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    first_byte_delay: float | None = None


# Anything a test can queue.
AnyReply = Reply | ErrorReply


def pieces(text: str, size: int) -> list[str]:
    """`text` cut into consecutive pieces of at most `size` characters."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def estimate_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: about four characters per token."""
    return max(1, len(text) // 4)


class ScriptedReplies:
    """The reply queue and the methods tests use to fill it.

    Mixed into every fake server, so a test writes `server.add_text(...)`.
    """

    def __init__(self) -> None:
        self._queue: deque[AnyReply] = deque()
        # Answer to a request when the queue is empty; None turns such a request
        # into an HTTP 500 that says it was not scripted.
        self.default_reply: AnyReply | None = Reply(text="OK")
        # Answers a request when the queue is empty, from what the request says (e.g. an
        # echo of the last user message); takes precedence over default_reply.
        self.responder: Callable[[Mapping[str, Any]], AnyReply] | None = None

    @property
    def pending_replies(self) -> int:
        """How many scripted replies no request has taken yet."""
        return len(self._queue)

    def add(self, reply: AnyReply) -> None:
        """Queue a reply built by hand (any field of Reply or ErrorReply)."""
        self._queue.append(reply)

    def add_text(self, text: str, **options: Any) -> None:
        """Queue a text answer; options are Reply fields (chunk_size, first_byte_delay...)."""
        self.add(Reply(text=text, **options))

    def add_empty(self, **options: Any) -> None:
        """Queue an answer with no text and no tool calls."""
        self.add(Reply(**options))

    def add_tool_calls(
        self, tool_calls: Iterable[ToolCall], text: str | None = None, **options: Any
    ) -> None:
        """Queue an answer calling the tools (in parallel if several), after optional text."""
        self.add(Reply(text=text or "", tool_calls=tuple(tool_calls), **options))

    def add_raw_tool_call(self, name: str, raw_arguments: str, **options: Any) -> None:
        """Queue one tool call whose arguments are exactly `raw_arguments` (may be invalid)."""
        self.add(Reply(tool_calls=(ToolCall(name, raw_arguments),), **options))

    def add_error(
        self,
        status: int,
        message: str = "error scripted by the test",
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        """Queue an HTTP error; e.g. add_error(429, headers={"Retry-After": "1"})."""
        self.add(
            ErrorReply(status=status, message=message, code=code, headers=headers or {}, **options)
        )

    def add_broken_stream(self, text_before: str = "Partial ans", **options: Any) -> None:
        """Queue an answer whose connection drops after `text_before`."""
        self.add(Reply(text=text_before, fault=StreamFault.DISCONNECT, **options))

    def add_reset(self) -> None:
        """Queue a request whose connection is reset before any byte of the answer."""
        self.add(Reply(fault=StreamFault.RESET))

    def add_invalid_json_chunk(self, text_before: str = "", **options: Any) -> None:
        """Queue an answer with one chunk that is not JSON, after `text_before`."""
        self.add(Reply(text=text_before, fault=StreamFault.INVALID_JSON, **options))

    def clear_replies(self) -> None:
        """Drop every scripted reply not taken yet."""
        self._queue.clear()

    def reply_to(self, request: Mapping[str, Any]) -> AnyReply | None:
        """The reply for `request`: the queue's head, else the responder's, else the default."""
        if self.responder is not None and not self._queue:
            return self.responder(request)
        return self.next_reply()

    def next_reply(self) -> AnyReply | None:
        """The reply for the next request: the queue's head, else the default."""
        if self._queue:
            return self._queue.popleft()
        return self.default_reply
