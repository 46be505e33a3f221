"""Running the tool calls of one assistant message.

Every call ends in a ToolMessage, also when the tool does not exist, the arguments are
not JSON or the tool fails: the model reads the error and can correct itself, and the
thread never holds a tool call without its answer (providers reject such a history).

Bounds, so that no message can keep the home busy: at most MAX_TOOL_CALLS_PER_MESSAGE
calls of a message run; the calls after them are answered with an error each (the model
can ask again in its next message), and a message keeps at most MAX_TOOL_CALLS_KEPT calls
(the rest are dropped from it, and the last kept call's error says how many). A call with
an argument longer than MAX_ARGUMENT_CHARS, or arguments longer than MAX_ARGUMENTS_CHARS
in all, is answered with an error and not run. Results are cleaned of invalid Unicode
before the model (and Home Assistant's trace) read them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import replace
import json
import logging
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool

from .events import ToolCall, ToolCallFinished
from .text import clean_value

_LOGGER = logging.getLogger(__name__)

# Calls of one message that run; a model turning on twenty lights one by one is told to
# ask for the rest in its next message (the agent's tool rounds allow for that).
MAX_TOOL_CALLS_PER_MESSAGE = 16
# Calls a message keeps (each answered); beyond this a message is a runaway, not a plan.
MAX_TOOL_CALLS_KEPT = 64
# Characters of one argument (its JSON) and of one call's arguments: names, numbers and
# sentences fit easily; a tool never needs a document.
MAX_ARGUMENT_CHARS = 4096
MAX_ARGUMENTS_CHARS = 16384
# Key of an assistant message's response_metadata: calls dropped beyond MAX_TOOL_CALLS_KEPT.
DROPPED_CALLS = "dropped_tool_calls"


class ToolFailure(Exception):
    """Raised by a tool to hand the model a structured error instead of a result."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data.get("error_text") or data.get("error") or "tool failed")
        self.data = data


def requested_calls(message: AIMessage) -> tuple[ToolCall, ...]:
    """The calls of a message, valid ones and those whose arguments did not parse."""
    calls = [ToolCall(c["id"] or "", c["name"], dict(c["args"])) for c in message.tool_calls]
    calls += [
        ToolCall(c.get("id") or "", c.get("name") or "", {}) for c in message.invalid_tool_calls
    ]
    return tuple(calls)


def _error(kind: str, text: str) -> dict[str, Any]:
    return {"error": kind, "error_text": text}


def with_kept_calls(message: AIMessage) -> AIMessage:
    """The message with at most MAX_TOOL_CALLS_KEPT calls (valid ones first, in order);
    how many were dropped is noted in its response_metadata under DROPPED_CALLS."""
    valid, invalid = message.tool_calls, message.invalid_tool_calls
    total = len(valid) + len(invalid)
    if total <= MAX_TOOL_CALLS_KEPT:
        return message
    kept_valid = valid[:MAX_TOOL_CALLS_KEPT]
    kept_invalid = invalid[: MAX_TOOL_CALLS_KEPT - len(kept_valid)]
    _LOGGER.warning(
        "The model asked for %d tool calls in one message; %d were dropped",
        total,
        total - MAX_TOOL_CALLS_KEPT,
    )
    return message.model_copy(
        update={
            "tool_calls": kept_valid,
            "invalid_tool_calls": kept_invalid,
            "response_metadata": {
                **message.response_metadata,
                DROPPED_CALLS: total - MAX_TOOL_CALLS_KEPT,
            },
        }
    )


def _too_many(call_number: int, total: int, dropped: int) -> dict[str, Any]:
    text = (
        f"Not run: a message may ask for at most {MAX_TOOL_CALLS_PER_MESSAGE} tool calls, "
        f"and this was call {call_number} of {total + dropped:,}."
    )
    if dropped and call_number == total:
        text += f" The {dropped:,} calls after this one were dropped from your message."
    return _error("too_many_calls", text + " Ask for what is still needed in your next message.")


def _oversized(call: ToolCall) -> dict[str, Any] | None:
    """The error for a call whose arguments are too long, None if they fit."""
    total = 0
    for name, value in call.args.items():
        size = len(json.dumps(value, ensure_ascii=False, default=str))
        total += size + len(name)
        if size > MAX_ARGUMENT_CHARS:
            return _error(
                "argument_too_long",
                f"Not run: the argument '{name[:40]}' has {size:,} characters; at most "
                f"{MAX_ARGUMENT_CHARS:,} are allowed.",
            )
    if total > MAX_ARGUMENTS_CHARS:
        return _error(
            "arguments_too_long",
            f"Not run: the arguments have {total:,} characters; at most "
            f"{MAX_ARGUMENTS_CHARS:,} are allowed.",
        )
    return None


def calls_to_run(message: AIMessage) -> tuple[ToolCall, ...]:
    """The calls of a message that may run: within the count and size limits."""
    calls = requested_calls(message)[:MAX_TOOL_CALLS_PER_MESSAGE]
    return tuple(call for call in calls if _oversized(call) is None)


async def _run_one(
    call: ToolCall, invalid_args: str | None, tools: Mapping[str, BaseTool]
) -> ToolCallFinished:
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return ToolCallFinished(
            call,
            _error(
                "unknown_tool", f"There is no tool named '{call.name}'. Available tools: {known}."
            ),
            is_error=True,
        )
    if invalid_args is None and (oversized := _oversized(call)) is not None:
        return ToolCallFinished(call, oversized, is_error=True)
    if invalid_args is not None:
        return ToolCallFinished(
            call,
            _error(
                "invalid_arguments",
                f"The arguments for '{call.name}' were not valid JSON: {invalid_args[:200]}",
            ),
            is_error=True,
        )
    try:
        result = await tool.ainvoke(call.args)
    except ToolFailure as err:
        return ToolCallFinished(call, err.data, is_error=True)
    except asyncio.CancelledError:
        raise
    except Exception as err:  # noqa: BLE001  a failing tool must not end the turn
        _LOGGER.warning("Tool %s failed: %s", call.name, err)
        return ToolCallFinished(call, _error(type(err).__name__, str(err)), is_error=True)
    return ToolCallFinished(call, result)


def _content(result: Any) -> str:
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, default=str)


def declined(call: ToolCall, reply: str) -> ToolCallFinished:
    """The result of a critical call the user did not confirm."""
    return ToolCallFinished(
        call,
        _error(
            "not_confirmed",
            f"Not done: the user did not confirm. Their reply was: {reply[:300]!r}",
        ),
        is_error=True,
    )


async def run_tool_calls(
    message: AIMessage,
    tools: Mapping[str, BaseTool],
    report: Callable[[ToolCallFinished], None],
    *,
    declined_ids: frozenset[str] = frozenset(),
    reply: str = "",
) -> list[ToolMessage]:
    """Run all calls of `message` concurrently; report each as it finishes.

    Calls in `declined_ids` are not run: they answer that the user said no.
    """
    invalid = {c.get("id") or "": c.get("args") or "" for c in message.invalid_tool_calls}
    calls = requested_calls(message)
    dropped = int(message.response_metadata.get(DROPPED_CALLS, 0))

    async def run_and_report(number: int, call: ToolCall) -> ToolCallFinished:
        if number > MAX_TOOL_CALLS_PER_MESSAGE:
            finished = ToolCallFinished(call, _too_many(number, len(calls), dropped), True)
        elif call.id in declined_ids:
            finished = declined(call, reply)
        else:
            finished = await _run_one(
                call, invalid.get(call.id) if call.id in invalid else None, tools
            )
        # Entity names, states and attributes come from anywhere in the home; an error
        # may quote the arguments.
        finished = replace(finished, result=clean_value(finished.result))
        report(finished)
        return finished

    results = await asyncio.gather(
        *(run_and_report(number, call) for number, call in enumerate(calls, start=1))
    )
    return [
        ToolMessage(
            content=_content(done.result),
            tool_call_id=done.call.id,
            name=done.call.name,
            status="error" if done.is_error else "success",
        )
        for done in results
    ]
