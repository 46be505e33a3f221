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

    async def run_and_report(call: ToolCall) -> ToolCallFinished:
        if call.id in declined_ids:
            finished = declined(call, reply)
        else:
            finished = await _run_one(
                call, invalid.get(call.id) if call.id in invalid else None, tools
            )
        report(finished)
        return finished

    results = await asyncio.gather(*(run_and_report(call) for call in calls))
    return [
        ToolMessage(
            content=_content(done),
            tool_call_id=done.call.id,
            name=done.call.name,
            status="error" if done.is_error else "success",
        )
        for done in results
    ]
