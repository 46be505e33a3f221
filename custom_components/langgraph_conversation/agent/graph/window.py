"""Fitting each request into the model's context window (Ollama's native API).

Ollama reads at most its window of tokens (the `num_ctx` the agent sends); a longer
prompt is cut from the start (the system prompt and the home's instructions go first)
or refused. So every request is planned to fit: counted tokens of the system prompt,
the tools, the messages and the reply budget (`max_tokens`) stay within the window.

The counting is an estimate made before sending, with no tokenizer at hand: one token
per `CHARS_PER_TOKEN` characters, fewer characters than the tokenizers of current local
models need on English and JSON (about four), so the estimate errs on the side of a
request that fits; Ollama's own count comes back in `prompt_eval_count` and is checked
afterwards (see `truncation`).

When the request is too long, it is trimmed in this order, each step only when the
previous one was not enough:

1. older history: whole earlier turns, oldest first, from what this request sends (the
   thread keeps them; the summary of old turns still rides along);
2. the home's entity listing, replaced by its compact form (when the agent offers one),
   which brings the tools that search the home (offered only when the listing is gone);
3. optional tools (the agent's own and the memory tool; Home Assistant's Assist API tools
   stay), last offered first, never one the instructions name.

Steps 2 and 3 are planned once per turn (`plan_turn`), step 1 before every model call
(`WindowPlan.fit`). What was trimmed is logged and reported as a `RequestTrimmed`
event; when even that cannot fit, the turn fails with one sentence saying what to change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
import json
import logging
import math
from typing import Any

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool

from ..events import RequestTrimmed
from .prompts import KNOWLEDGE_ID, SUMMARY_ID, PromptLayers, is_note

_LOGGER = logging.getLogger(__name__)

# Characters per token assumed when counting (see the module's docstring).
CHARS_PER_TOKEN = 3.5
# Tokens a chat template adds around each message (role markers, separators).
MESSAGE_OVERHEAD = 4
# The reply budget when the agent sets no `max_tokens`.
DEFAULT_REPLY_BUDGET = 1024
# Ollama's `prompt_eval_count` below this share of the estimate means the prompt was cut.
# Runners that cut an over-long prompt to about half the window leave at most
# (window / 2) / (window - reply) of a planned request: 0.57 of an 8,192 window, 0.67 of
# a 4,096 one with the default reply budget, both below it. A prompt read in full comes to
# about 0.8-1.0 of the estimate (current tokenizers need four characters or more per
# token, the estimate assumes CHARS_PER_TOKEN), so this stays clear of it.
TRUNCATION_RATIO = 0.7


def text_tokens(text: str) -> int:
    """The estimated tokens of a text."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def message_tokens(message: BaseMessage) -> int:
    """The estimated tokens of one message as a chat template renders it."""
    content = message.content if isinstance(message.content, str) else json.dumps(message.content)
    calls = getattr(message, "tool_calls", None)
    extra = json.dumps([[c["name"], c["args"]] for c in calls], default=str) if calls else ""
    return text_tokens(content + extra) + MESSAGE_OVERHEAD


def messages_tokens(messages: Iterable[BaseMessage]) -> int:
    """The estimated tokens of messages."""
    return sum(message_tokens(message) for message in messages)


def tools_tokens(tools: Sequence[dict[str, Any]]) -> int:
    """The estimated tokens of tool definitions (in OpenAI's format, as sent)."""
    return text_tokens(json.dumps(list(tools))) if tools else 0


@dataclass(frozen=True, slots=True)
class WindowPlan:
    """One turn's window: what every model call of the turn may spend on what."""

    window: int
    reply: int
    tools: int  # estimated tokens of the tools offered
    compacted: bool = False
    tools_dropped: tuple[str, ...] = field(default_factory=tuple)

    @property
    def prompt_room(self) -> int:
        """Tokens left for the system prompt and the messages."""
        return self.window - self.reply - self.tools

    def fit(self, prompt: list[AnyMessage]) -> tuple[list[AnyMessage], RequestTrimmed | None]:
        """The prompt with the oldest whole turns left out until it fits.

        The leading system messages and the summary after them stay, and so does the
        latest turn (its context note, retrieved passages, the request and its tool
        round). Cuts are made only where a turn begins, so a request keeps its note and
        a tool call its result. Returns the report when anything of the turn's request
        was trimmed.
        """
        lead = 0
        while lead < len(prompt) and isinstance(prompt[lead], SystemMessage):
            lead += 1
        if lead < len(prompt) and prompt[lead].id == SUMMARY_ID:
            lead += 1
        sizes = [message_tokens(message) for message in prompt]
        fixed = sum(sizes[:lead])
        starts = _turn_starts(prompt, lead)
        current = starts[-1] if starts else len(prompt)
        cut = lead
        for start in (lead, *(s for s in starts if s > lead)):
            cut = start
            if fixed + sum(sizes[start:]) <= self.prompt_room or start >= current:
                break
        used = fixed + sum(sizes[cut:])
        fits = used <= self.prompt_room
        dropped = cut - lead
        trimmed = prompt if not dropped else [*prompt[:lead], *prompt[cut:]]
        if not fits:
            _LOGGER.warning(
                "A request of about %d tokens is over its window of %d even without earlier "
                "turns; Ollama may cut it",
                used + self.tools + self.reply,
                self.window,
            )
        if not (dropped or self.compacted or self.tools_dropped or not fits):
            return trimmed, None
        if dropped:
            _LOGGER.debug("Left %d earlier messages out to fit the window", dropped)
        return trimmed, RequestTrimmed(
            self.window,
            used + self.tools + self.reply,
            dropped,
            self.compacted,
            self.tools_dropped,
            fits,
        )


def _turn_starts(prompt: list[AnyMessage], lead: int) -> list[int]:
    """Where each turn after `lead` begins: a person's request, or the context note and
    passages right before it (they belong to that request)."""
    starts = []
    for index in range(lead, len(prompt)):
        message = prompt[index]
        if not isinstance(message, HumanMessage) or _precedes_request(message):
            continue
        start = index
        while start > lead and _precedes_request(prompt[start - 1]):
            start -= 1
        starts.append(start)
    return starts


def _precedes_request(message: AnyMessage) -> bool:
    """A context note or retrieved passages: a user message that is not the person's."""
    return isinstance(message, HumanMessage) and (is_note(message) or message.id == KNOWLEDGE_ID)


class WindowTooSmall(Exception):
    """Even trimmed as far as it goes, the request does not fit the window."""

    def __init__(self, window: int, tokens: int) -> None:
        super().__init__(
            f"the request needs about {tokens} tokens with its reply, the window is {window}"
        )
        self.window = window
        self.tokens = tokens


@dataclass(frozen=True, slots=True)
class TurnFit:
    """What `plan_turn` decided: the prompt layers and tools to use, and the plan."""

    prompt: PromptLayers
    tools: list[BaseTool]
    plan: WindowPlan
    # Tokens left for earlier turns once everything else of the request is counted.
    history_room: int


def plan_turn(
    window: int,
    reply: int | None,
    prompt: PromptLayers,
    tools: list[BaseTool],
    formatted: Callable[[BaseTool], dict[str, Any]],
    request: Sequence[BaseMessage],
    *,
    optional_tools: frozenset[str] = frozenset(),
    compact_instructions: Callable[[], str] | None = None,
    compact_tools: Sequence[BaseTool] = (),
) -> TurnFit:
    """Fit the turn's fixed part (system prompt, tools, request, reply) into the window.

    Earlier turns are not counted here: they are the first to go, call by call. Raises
    WindowTooSmall when compacting and dropping optional tools are not enough.
    """
    reply = reply or DEFAULT_REPLY_BUDGET
    schemas = {tool.name: formatted(tool) for tool in (*tools, *compact_tools)}
    request_tokens = messages_tokens(request)

    def needed(layers: PromptLayers, kept: list[BaseTool]) -> tuple[int, int]:
        """The tokens the turn's fixed part needs, and those of its tools among them."""
        tools_part = tools_tokens([schemas[t.name] for t in kept])
        system = text_tokens(layers.render()) + MESSAGE_OVERHEAD
        return system + tools_part + request_tokens + reply, tools_part

    # Counted again only after something changed: each count renders the whole prompt
    # and writes out every tool, and most turns fit at once.
    compacted = False
    kept = list(tools)
    total, tools_part = needed(prompt, kept)
    if total > window and compact_instructions is not None:
        prompt = replace(prompt, instructions=compact_instructions())
        compacted = True
        # Without the listing the model finds names with these; they are never dropped.
        kept += compact_tools
        total, tools_part = needed(prompt, kept)
    dropped: list[str] = []
    if total > window:
        instructions = prompt.render()
        for tool in reversed(tools):
            if total <= window:
                break
            if tool.name in optional_tools and tool.name not in instructions:
                kept.remove(tool)
                dropped.append(tool.name)
                total, tools_part = needed(prompt, kept)
    if total > window:
        raise WindowTooSmall(window, total)
    if compacted or dropped:
        _LOGGER.warning(
            "The request did not fit the context window of %d tokens: %s (about %d tokens "
            "now); raise the agent's context window to keep them",
            window,
            " and ".join(
                part
                for part in (
                    "the entity listing is sent in compact form" if compacted else "",
                    f"tools left out: {', '.join(dropped)}" if dropped else "",
                )
                if part
            ),
            total,
        )
    plan = WindowPlan(window, reply, tools_part, compacted, tuple(dropped))
    return TurnFit(prompt, kept, plan, window - total)


def truncated(sent: int, evaluated: int | None) -> bool:
    """Whether Ollama read clearly fewer prompt tokens than were sent (it cut the prompt).

    `sent` is the estimate of the prompt (without the reply budget).
    """
    return bool(evaluated) and evaluated < TRUNCATION_RATIO * sent
