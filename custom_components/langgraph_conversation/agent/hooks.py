"""Lifecycle hooks of a turn: what observers (activity events, traces) learn, and when.

Per turn, in order: `on_turn_start` once; `on_tool_start` / `on_tool_end` per tool call;
`on_flagged` whenever untrusted text on its way to the model (a memory, a passage, the
summary, a request without a person...) looks like an injection attempt (a flagged tool
result comes with its `on_tool_end`); `on_error` once if the turn fails; `on_turn_end`
once, also after a failure. A hook may
be a plain function or a coroutine function. A hook that raises is logged and skipped:
observing a turn must never cost the user their answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
import inspect
import logging
import time

from .events import (
    AgentEvent,
    MessageStarted,
    ModelCallFinished,
    PromptTruncated,
    RequestTrimmed,
    TextDelta,
    TextFlagged,
    ToolCall,
    ToolCallFinished,
    ToolCallsRequested,
)

_LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TurnStarted:
    """A turn began (before it waits for its thread)."""

    thread_id: str
    # The user's words; observers decide whether they may show them.
    request: str
    # The main model's LiteLLM model string.
    model: str


@dataclass(frozen=True, slots=True)
class TurnFailed:
    """A turn could not finish. `detail` is safe to log (no keys), not to show."""

    thread_id: str
    kind: str
    detail: str


@dataclass(frozen=True, slots=True)
class TurnSummary:
    """How a turn went, when it ended (answered, paused for a confirmation, or failed)."""

    thread_id: str
    request: str
    # The text of the turn's last assistant message.
    answer: str
    # Model string and role ("main", "fallback") of the last model call that answered;
    # None when no model answered.
    model: str | None
    role: str | None
    # Every model call of the turn, summaries by the fast model included.
    model_calls: int
    input_tokens: int
    output_tokens: int
    tool_calls: int
    # Seconds from the turn's start to its end.
    duration: float
    # The failure's kind (a ModelErrorKind value, "tool_rounds", "cancelled"...), or None.
    error: str | None = None
    # Everything the injection scan flagged during the turn, tool results included (as
    # source "tool_result", named by the tool), in the order it was seen.
    flags: tuple[TextFlagged, ...] = ()
    # Of input_tokens, those read from the provider's prompt cache (0: none, or not said).
    cached_input_tokens: int = 0


class TurnHooks:
    """Base class of turn observers: override what you need, the rest does nothing."""

    def on_turn_start(self, started: TurnStarted) -> Awaitable[None] | None:
        """A turn started."""

    def on_tool_start(self, call: ToolCall) -> Awaitable[None] | None:
        """The model asked for this tool call; it runs now."""

    def on_tool_end(self, done: ToolCallFinished) -> Awaitable[None] | None:
        """A tool call finished (also with an error, or declined by the user)."""

    def on_flagged(self, flagged: TextFlagged) -> Awaitable[None] | None:
        """Untrusted text matched injection patterns; it reaches the model quoted and marked."""

    def on_request_trimmed(self, trimmed: RequestTrimmed) -> Awaitable[None] | None:
        """A request was trimmed to fit the model's context window."""

    def on_prompt_truncated(self, truncated: PromptTruncated) -> Awaitable[None] | None:
        """The model's server read clearly less of a prompt than was sent (it cut it)."""

    def on_error(self, failed: TurnFailed) -> Awaitable[None] | None:
        """The turn failed; `on_turn_end` follows."""

    def on_turn_end(self, summary: TurnSummary) -> Awaitable[None] | None:
        """The turn ended, whatever the outcome."""


@dataclass
class TurnRecorder:
    """Follows one turn's events, calls the hooks, and sums the turn up at the end."""

    hooks: Sequence[TurnHooks]
    thread_id: str
    request: str
    started: float = field(default_factory=time.monotonic)
    answer: str = ""
    model: str | None = None
    role: str | None = None
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    tool_calls: int = 0
    flags: list[TextFlagged] = field(default_factory=list)

    async def call(self, name: str, *args: object) -> None:
        """Call one hook on every observer; a failing observer is logged, never raised."""
        for hook in self.hooks:
            try:
                result = getattr(hook, name)(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                _LOGGER.exception("The %s hook of %s failed", name, type(hook).__name__)

    async def start(self, model: str) -> None:
        """The turn began."""
        await self.call("on_turn_start", TurnStarted(self.thread_id, self.request, model))

    async def see(self, event: AgentEvent) -> None:
        """Count one event of the turn, and tell the hooks about tool calls."""
        match event:
            case MessageStarted():
                self.answer = ""
            case TextDelta(text=text):
                self.answer += text
            case ModelCallFinished():
                self.model_calls += 1
                self.input_tokens += event.input_tokens
                self.output_tokens += event.output_tokens
                self.cached_input_tokens += event.cached_input_tokens
                if event.answer:
                    self.model, self.role = event.model, event.role
            case ToolCallsRequested(calls=calls):
                for call in calls:
                    await self.call("on_tool_start", call)
            case ToolCallFinished():
                self.tool_calls += 1
                if event.flags:
                    self.flags.append(TextFlagged("tool_result", event.call.name, event.flags))
                await self.call("on_tool_end", event)
            case TextFlagged():
                self.flags.append(event)
                await self.call("on_flagged", event)
            case RequestTrimmed():
                await self.call("on_request_trimmed", event)
            case PromptTruncated():
                await self.call("on_prompt_truncated", event)

    async def fail(self, kind: str, detail: str) -> None:
        """The turn failed."""
        await self.call("on_error", TurnFailed(self.thread_id, kind, detail))

    async def end(self, error: str | None) -> None:
        """The turn ended; `error` is the failure's kind, if it failed."""
        summary = TurnSummary(
            thread_id=self.thread_id,
            request=self.request,
            answer=self.answer,
            model=self.model,
            role=self.role,
            model_calls=self.model_calls,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            tool_calls=self.tool_calls,
            cached_input_tokens=self.cached_input_tokens,
            duration=time.monotonic() - self.started,
            error=error,
            flags=tuple(self.flags),
        )
        await self.call("on_turn_end", summary)
