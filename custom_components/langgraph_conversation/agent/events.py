"""What a running turn reports, in order, to whoever presents it (the ChatLog bridge)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .guard import Finding


@dataclass(frozen=True, slots=True)
class MessageStarted:
    """The model started a new assistant message (one per model call)."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of assistant text, as the model produced it."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the model asked for."""

    id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolCallsRequested:
    """The assistant message that just ended asks for these tool calls."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A tool call finished; `result` is what the model will read."""

    call: ToolCall
    result: Any
    is_error: bool = False
    # What the injection scan found in the result (see guard/injection.py); the model reads
    # the result quoted, with a note when this is not empty.
    flags: tuple[Finding, ...] = ()


@dataclass(frozen=True, slots=True)
class TextFlagged:
    """Untrusted text on its way to the model matched instruction-injection patterns.

    `source` says what kind of text ("memory", "passage", "summary", "request",
    "earlier", "speaker", "entity_name", "area_name"), `name` which one (a memory id, a
    file name, an entity or area id; "" when there is one only). The text still reaches
    the model, quoted and marked as data.
    """

    source: str
    name: str
    findings: tuple[Finding, ...]


@dataclass(frozen=True, slots=True)
class ConfirmationRequested:
    """The turn paused: these critical actions wait for the user's yes (next message)."""

    actions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ModelCallFinished:
    """A model call succeeded: which role and model answered, and the tokens it reported.

    Presenters may ignore it; the runtime counts it into the turn's summary.
    """

    role: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    # Of input_tokens, those the provider read from its prompt cache (when it says).
    cached_input_tokens: int = 0
    # False for housekeeping calls (a summary), which answer no one.
    answer: bool = True


@dataclass(frozen=True, slots=True)
class RequestTrimmed:
    """A request was trimmed to fit the model's context window (graph/window.py says how).

    Token counts are the agent's estimate, the reply budget included.
    """

    window: int
    tokens: int
    history_dropped: int = 0
    compacted: bool = False
    tools_dropped: tuple[str, ...] = ()
    # False when even the trimmed request is over the window (it is sent anyway).
    fits: bool = True


@dataclass(frozen=True, slots=True)
class PromptTruncated:
    """Ollama read clearly fewer prompt tokens than were sent: it cut the prompt.

    `sent` is the agent's estimate of the prompt, `evaluated` Ollama's own count.
    """

    window: int
    sent: int
    evaluated: int


type AgentEvent = (
    MessageStarted
    | TextDelta
    | ToolCallsRequested
    | ToolCallFinished
    | ConfirmationRequested
    | ModelCallFinished
    | TextFlagged
    | RequestTrimmed
    | PromptTruncated
)
