"""Running the tool calls of one assistant message.

Every call ends in a ToolMessage, also when the tool does not exist, the arguments are
not JSON or the tool fails: the model reads the error and can correct itself, and the
thread never holds a tool call without its answer (providers reject such a history).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
import logging
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool

from .confirmation import Released, current_tool_call
from .events import ToolCall, ToolCallFinished
from .injection import scan_data_async
from .quoting import flag_note, quoted_json

_LOGGER = logging.getLogger(__name__)


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

    async def run(call: ToolCall) -> ToolCallFinished:
        # Each call runs in a task of its own (gather), so this marks the effects of
        # this call only, and of whatever it starts (a script's steps).
        current_tool_call.set(call.id)
        return await _run_one(call, invalid.get(call.id) if call.id in invalid else None, tools)

    results = await asyncio.gather(*(run(call) for call in calls))
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
