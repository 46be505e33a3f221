"""One streamed model answer: gathered in linear time, bounded in size and in time.

A model's answer arrives as chunks (text pieces, tool-call fragments). langchain-core's
`add_ai_message_chunks` merges tool-call fragments by searching everything merged so far
for each new one, twice over (the fragments and the raw OpenAI-style calls): quadratic in
the number of calls. `AnswerBuilder` keeps what it needs (text pieces, one entry per
call, its argument fragments) in lists and dicts instead, with the same merge rules, and
never looks back.

Bounds, whatever the model sends: an answer longer than MAX_ANSWER_CHARS (text, tool
names and arguments; each call also costs CALL_COST) is cut, and so is one still streaming
after its deadline (see `answer_deadline`); the turn then fails with a sentence for the
user, and the runtime removes it from the thread. A model stuck in a loop would otherwise
hold the turn, the thread's lock and memory for as long as it liked: the request timeout
only bounds each read.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
import json
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.messages.ai import UsageMetadata, add_usage
from langchain_core.messages.base import merge_content
from langchain_core.messages.tool import InvalidToolCall, ToolCall, invalid_tool_call, tool_call

from ..guard import clean_text, clean_value
from ..upstream.langchain_core import merge_metadata

# Longest answer read from a model, in characters of text, tool names and arguments. A
# spoken answer is a few hundred; max_tokens (1,024 by default) stops a well-behaved
# model long before this.
MAX_ANSWER_CHARS = 64_000
# What each tool call counts towards MAX_ANSWER_CHARS besides its name and arguments, so
# a stream of empty calls is bounded too.
CALL_COST = 16
# The whole answer may take this many times the agent's request timeout (which bounds
# each read): 120 s with the default 60 s.
ANSWER_DEADLINE_FACTOR = 2.0
# Seconds of stream work after which the node lets the event loop run other things:
# chunks already buffered are read without waiting, so without a pause a long burst
# would hold the loop.
YIELD_INTERVAL = 0.005

ANSWER_TOO_LONG = "answer_too_long"
ANSWER_TOO_SLOW = "answer_too_slow"


def answer_deadline(request_timeout: float) -> float:
    """Seconds one model answer may stream in all, for an agent's request timeout."""
    return ANSWER_DEADLINE_FACTOR * request_timeout


class AnswerLimitExceeded(Exception):
    """The model's answer went past a bound; `kind` is ANSWER_TOO_LONG or ANSWER_TOO_SLOW."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


def chunk_text(chunk: AIMessageChunk) -> str:
    """The text of a streamed chunk (providers send a string or a list of blocks)."""
    content = chunk.content
    if isinstance(content, str):
        return content
    return "".join(
        block.get("text", "")
        for block in content
        if isinstance(block, dict) and block.get("type") == "text"
    )


@dataclass(slots=True)
class _Call:
    """One tool call being streamed: its merged name and id, its argument fragments."""

    index: Any
    id: str | None
    name: str | None
    args: list[str] = field(default_factory=list)


def _mergeable(index: Any) -> bool:
    """langchain merges fragments by index only for int indexes and "lc_" strings."""
    return isinstance(index, int) or (isinstance(index, str) and index.startswith("lc_"))


class _CallsByIndex:
    """Where the next fragment of an index goes, as langchain's `merge_lists` decides:
    the first call of that index whose id is empty or the same, without a search."""

    __slots__ = ("by_id", "empty", "first")

    def __init__(self) -> None:
        self.first: int | None = None  # position of the first call with this index
        self.by_id: dict[str, int] = {}  # id → position of the first call with it
        self.empty: deque[int] = deque()  # positions of calls without an id, in order


class AnswerBuilder:
    """Gathers one answer's chunks; `message()` is the AIMessage the thread stores."""

    def __init__(self, max_chars: int = MAX_ANSWER_CHARS) -> None:
        self.max_chars = max_chars
        self.size = 0
        self._text: list[str] = []
        # Content as langchain blocks, when a provider streams lists instead of strings.
        self._blocks: list[Any] | None = None
        self._calls: list[_Call] = []
        self._indexes: dict[Any, _CallsByIndex] = {}
        self._metadata: dict[str, Any] = {}
        self._usage: UsageMetadata | None = None
        self._id: str | None = None
        self._id_rank = -1
        self.chunks = 0

    def add(self, chunk: AIMessageChunk) -> str:
        """Take one chunk; returns its text (cleaned) for the listener.

        Raises AnswerLimitExceeded once the answer is longer than `max_chars`.
        """
        self.chunks += 1
        content = chunk.content
        if isinstance(content, str):
            text = clean_text(content)
            if self._blocks is None:
                self._text.append(text)
            else:
                self._blocks.append(text)
        else:
            text = clean_text(chunk_text(chunk))
            if self._blocks is None:
                self._blocks = ["".join(self._text)] if self._text else []
            self._blocks.append(clean_value(content))
        self.size += len(text)
        for fragment in chunk.tool_call_chunks:
            self._add_fragment(fragment)
        if chunk.response_metadata:
            self._metadata = merge_metadata(self._metadata, chunk.response_metadata)
        if chunk.usage_metadata is not None:
            self._usage = add_usage(self._usage, chunk.usage_metadata)
        self._take_id(chunk.id)
        if self.size > self.max_chars:
            raise AnswerLimitExceeded(
                ANSWER_TOO_LONG, f"the answer passed {self.max_chars:,} characters"
            )
        return text

    def _take_id(self, id_: str | None) -> None:
        # langchain's preference: a provider's id, else an lc_run- id, else any.
        if not id_ or self._id_rank == 2:
            return
        rank = 1 if id_.startswith("lc_run-") else 0 if id_.startswith("lc_") else 2
        if rank > self._id_rank:
            self._id, self._id_rank = id_, rank

    def _add_fragment(self, fragment: Any) -> None:
        index = fragment.get("index")
        id_ = fragment.get("id") or None
        name = fragment.get("name")
        args = fragment.get("args")
        self.size += len(name or "") + len(args or "")
        position = self._position(index, id_) if _mergeable(index) else None
        if position is None:
            self.size += CALL_COST
            call = _Call(index=index, id=id_, name=name, args=[args] if args else [])
            self._calls.append(call)
            if _mergeable(index):
                self._register(index, len(self._calls) - 1, id_)
            return
        call = self._calls[position]
        if name:
            call.name = (call.name or "") + name
        if args:
            call.args.append(args)
        if id_ and call.id is None:
            call.id = id_
            slot = self._indexes[index]
            slot.empty.popleft()  # the first call without an id is the one chosen
            slot.by_id.setdefault(id_, position)

    def _position(self, index: Any, id_: str | None) -> int | None:
        slot = self._indexes.get(index)
        if slot is None:
            return None
        if id_ is None:
            return slot.first
        same = slot.by_id.get(id_)
        without = slot.empty[0] if slot.empty else None
        if same is None or without is None:
            return same if without is None else without
        return min(same, without)

    def _register(self, index: Any, position: int, id_: str | None) -> None:
        slot = self._indexes.setdefault(index, _CallsByIndex())
        if slot.first is None:
            slot.first = position
        if id_ is None:
            slot.empty.append(position)
        else:
            slot.by_id.setdefault(id_, position)

    @property
    def usage_metadata(self) -> UsageMetadata | None:
        """The tokens the provider reported in the stream, if any."""
        return self._usage

    def _content(self) -> Any:
        if self._blocks is None:
            return "".join(self._text)
        # Rare (a provider streaming content blocks): langchain's own merge, bounded by
        # max_chars like everything else.
        return merge_content("", *self._blocks)

    def tool_calls(self) -> tuple[list[ToolCall], list[InvalidToolCall]]:
        """The calls whose arguments are complete JSON objects, and the rest.

        langchain-core parses streamed arguments leniently (`parse_partial_json`), so a
        truncated `{"name": "Kitch` would become a call for "Kitch". A call must never
        run on arguments the model did not finish writing.
        """
        valid: list[ToolCall] = []
        invalid: list[InvalidToolCall] = []
        for call in self._calls:
            raw = "".join(call.args)
            name = clean_text(call.name or "")
            try:
                args = json.loads(raw) if raw.strip() else {}
            except ValueError:
                args = None
            if isinstance(args, dict):
                valid.append(tool_call(name=name, args=clean_value(args), id=call.id))
            else:
                error = "arguments are not JSON" if args is None else "arguments are not an object"
                invalid.append(
                    invalid_tool_call(name=name, args=clean_text(raw), id=call.id, error=error)
                )
        return valid, invalid

    def message(self, *, with_tools: bool) -> AIMessage | None:
        """The answer as one message; None when no chunk came at all.

        Without tools, calls a model invents are dropped: the kinds without a tools node
        must not leave a call without its result in the thread.
        """
        if not self.chunks:
            return None
        valid, invalid = self.tool_calls() if with_tools else ([], [])
        return AIMessage(
            content=self._content(),
            id=self._id,
            tool_calls=valid,
            invalid_tool_calls=invalid,
            usage_metadata=self._usage,
            response_metadata=self._metadata,
        )


def cached_input_tokens(usage: Any) -> int:
    """Input tokens the provider served from its prompt cache, 0 when it does not say.

    langchain-litellm files LiteLLM's `prompt_tokens_details.cached_tokens` (OpenAI,
    Gemini, DeepSeek) and Anthropic's `cache_read_input_tokens` under
    `input_token_details.cache_read`.
    """
    details = (usage or {}).get("input_token_details") or {}
    return int(details.get("cache_read") or 0)
