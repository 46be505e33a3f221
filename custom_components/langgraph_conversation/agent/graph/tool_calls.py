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

from ..errors import ToolFailure
from ..events import ToolCall, ToolCallFinished
from ..guard import (
    Released,
    clean_value,
    current_tool_call,
    flag_note,
    quoted_json,
    scan_data_async,
)
from ..upstream.langchain_core import run_tool

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
        result = await run_tool(tool, call.args)
    except ToolFailure as err:
        return await _scanned(call, err.data, is_error=True)
    except asyncio.CancelledError:
        raise
    except Exception as err:  # noqa: BLE001  a failing tool must not end the turn
        _LOGGER.warning("Tool %s failed: %s", call.name, err)
        return await _scanned(call, _error(type(err).__name__, str(err)), is_error=True)
    return await _scanned(call, result)


async def _scanned(call: ToolCall, result: Any, *, is_error: bool = False) -> ToolCallFinished:
    """A tool's own result (or error), with what the injection scan found in it.

    Only what a tool returned is scanned: the errors written here (unknown tool, invalid
    arguments, not confirmed) are ours.
    """
    return ToolCallFinished(call, result, is_error=is_error, flags=await scan_data_async(result))


def _content(done: ToolCallFinished) -> str:
    """What the model reads of a result: JSON that cannot close or open a prompt section,
    and a note before the result itself when the scan flagged it."""
    if done.flags:
        return quoted_json({"note": flag_note(done.flags), "result": done.result})
    return quoted_json(done.result)


async def run_tool_calls(
    message: AIMessage,
    tools: Mapping[str, BaseTool],
    report: Callable[[ToolCallFinished], None],
    *,
    held: Callable[[], frozenset[str]] | None = None,
) -> list[ToolMessage]:
    """Run all calls of `message` concurrently; report each and return their records.

    `held` names, after the calls ran, those whose effects wait for a yes: they are
    neither reported nor recorded yet (see confirmed_results).
    """
    invalid = {c.get("id") or "": c.get("args") or "" for c in message.invalid_tool_calls}
    calls = requested_calls(message)
    dropped = int(message.response_metadata.get(DROPPED_CALLS, 0))

    async def run(number: int, call: ToolCall) -> ToolCallFinished:
        if number > MAX_TOOL_CALLS_PER_MESSAGE:
            finished = ToolCallFinished(call, _too_many(number, len(calls), dropped), True)
        else:
            # Each call runs in a task of its own (gather), so this marks the effects of
            # this call only, and of whatever it starts (a script's steps).
            current_tool_call.set(call.id)
            finished = await _run_one(
                call, invalid.get(call.id) if call.id in invalid else None, tools
            )
        # Entity names, states and attributes come from anywhere in the home; an error
        # may quote the arguments.
        return replace(finished, result=clean_value(finished.result))

    results = await asyncio.gather(
        *(run(number, call) for number, call in enumerate(calls, start=1))
    )
    held_ids = held() if held is not None else frozenset()
    finished: list[ToolCallFinished] = []
    for done in results:
        if done.call.id in held_ids:
            continue  # answered once the user has said yes or no (confirmed_results)
        report(done)
        finished.append(done)
    return [tool_message(done) for done in finished]


def tool_message(done: ToolCallFinished) -> ToolMessage:
    """The thread's record of a finished call."""
    return ToolMessage(
        content=_content(done),
        tool_call_id=done.call.id,
        name=done.call.name,
        status="error" if done.is_error else "success",
    )


# Why a held effect did not run, as the model reads it.
_NOT_RUN = {
    "declined": "the user did not say yes",
    "other_requester": "the reply came from someone else or another conversation",
    "expired": "the user's yes did not come in time",
}


def confirmed_results(
    calls: dict[str, ToolCall], released: dict[str, Released] | None, reason: str
) -> list[ToolCallFinished]:
    """Results of the calls whose effects waited for a yes, once the answer is known.

    `released` is None when they did not run (the reason says why).
    """
    results: list[ToolCallFinished] = []
    for call_id, call in calls.items():
        outcome = (released or {}).get(call_id)
        if outcome is None:
            text = _NOT_RUN.get(reason, "it was not confirmed")
            results.append(
                ToolCallFinished(call, _error("not_confirmed", f"Not done: {text}."), is_error=True)
            )
        elif outcome.failed:
            failures = "; ".join(f"{action}: {why}" for action, why in outcome.failed.items())
            results.append(
                ToolCallFinished(
                    call,
                    _error("failed", f"Confirmed, but failed: {failures}")
                    | {"done": list(outcome.done)},
                    is_error=True,
                )
            )
        else:
            results.append(
                ToolCallFinished(
                    call, {"status": "done after the user's yes", "done": list(outcome.done)}
                )
            )
    return results
