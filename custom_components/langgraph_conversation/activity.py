"""Visible activity: a turn's hooks become conversation trace entries and bus events.

Every turn reports `turn_start`, `tool_start` / `tool_end` per tool call, `camera_viewed`
for each camera the agent looked through (which one, for whom; never the image), `flagged`
when untrusted text on its way to the model looks like an injection attempt, `error` if it
fails, and `turn_end` with its summary (its `flags` list everything flagged in the
turn), as `langgraph_conversation_activity` events (for dashboards and automations)
and in the Assist debug trace. The payload is documented in the README. It never holds
a key or a base URL, and holds the words of requests, answers, tool arguments and
results only when the agent enables it; even then, secrets (known keys, the credentials
of any URL) are redacted.
"""

from __future__ import annotations

import json
from typing import Any

from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.util import ulid as ulid_util

from .agent.events import PromptTruncated, RequestTrimmed, TextFlagged, ToolCall, ToolCallFinished
from .agent.guard import Finding, pattern_ids, redact_data
from .agent.hooks import TurnFailed, TurnHooks, TurnStarted, TurnSummary
from .const import EVENT_ACTIVITY

# Key of our entries in the conversation trace's agent details.
TRACE_KEY = "langgraph_conversation_activity"


def _where(findings: tuple[Finding, ...]) -> list[dict[str, Any]]:
    """Where each finding is: pattern id, path in a structured value, character offsets."""
    return [
        {"pattern": f.pattern, "where": f.where, "start": f.start, "end": f.end} for f in findings
    ]


def flag_entry(flagged: TextFlagged) -> dict[str, Any]:
    """One flagged text, without its words: what kind, which one, which patterns."""
    return {
        "source": flagged.source,
        "name": flagged.name,
        "patterns": list(pattern_ids(flagged.findings)),
    }


class ActivityReporter(TurnHooks):
    """Reports one turn of one agent; created per turn by the conversation entity."""

    def __init__(
        self,
        hass: HomeAssistant,
        chat_log: conversation.ChatLog,
        *,
        agent_id: str,
        context: Context,
        device_id: str | None,
        include_contents: bool,
    ) -> None:
        """Bind the reporter to the turn's chat log and the person's context."""
        self._hass = hass
        self._chat_log = chat_log
        self._context = context
        self._include_contents = include_contents
        self._common: dict[str, Any] = {
            "agent_id": agent_id,
            "conversation_id": chat_log.conversation_id,
            # Ties the events of one turn together.
            "turn_id": ulid_util.ulid_now(),
            "device_id": device_id,
        }

    def _report(
        self, kind: str, data: dict[str, Any], contents: dict[str, Any] | None = None
    ) -> None:
        payload = {"type": kind, **self._common, **data}
        if self._include_contents and contents:
            # Tool arguments and results may hold objects the recorder cannot store.
            payload.update(json.loads(json.dumps(contents, default=str)))
        # Events reach every automation and the recorder; no key or URL password may.
        payload = redact_data(payload)
        # The trace is per turn and the event is fired as the person's action.
        self._chat_log.async_trace({TRACE_KEY: payload})
        self._hass.bus.async_fire(EVENT_ACTIVITY, payload, context=self._context)

    def on_turn_start(self, started: TurnStarted) -> None:
        """The turn began with the main model."""
        self._report("turn_start", {"model": started.model}, {"request": started.request})

    def on_tool_start(self, call: ToolCall) -> None:
        """A tool call runs."""
        self._report(
            "tool_start",
            {"tool_name": call.name, "tool_call_id": call.id},
            {"tool_args": call.args},
        )

    def on_tool_end(self, done: ToolCallFinished) -> None:
        """A tool call finished; its error code (not its text) is no content."""
        error = None
        if done.is_error:
            error = done.result.get("error") if isinstance(done.result, dict) else "error"
        self._report(
            "tool_end",
            {
                "tool_name": done.call.name,
                "tool_call_id": done.call.id,
                "success": not done.is_error,
                "error": str(error) if error is not None else None,
                "flags": list(pattern_ids(done.flags)),
            },
            {"tool_result": done.result}
            | ({"flag_positions": _where(done.flags)} if done.flags else {}),
        )

    def on_camera_viewed(self, entity_id: str, person_id: str | None) -> None:
        """A camera was looked through for this turn (tools/cameras.py): which one, and
        for whom (the user and their person); the image is never reported."""
        self._report(
            "camera_viewed",
            {"entity_id": entity_id, "user_id": self._context.user_id, "person_id": person_id},
        )

    def on_flagged(self, flagged: TextFlagged) -> None:
        """Untrusted text (a memory, a passage, the summary...) looked like injection."""
        self._report(
            "flagged",
            {"flags": [flag_entry(flagged)]},
            {"flag_positions": _where(flagged.findings)},
        )

    def on_request_trimmed(self, trimmed: RequestTrimmed) -> None:
        """A request was trimmed to fit the model's context window (what, not words)."""
        self._report(
            "request_trimmed",
            {
                "window": trimmed.window,
                "tokens": trimmed.tokens,
                "history_dropped": trimmed.history_dropped,
                "compacted": trimmed.compacted,
                "tools_dropped": list(trimmed.tools_dropped),
                "fits": trimmed.fits,
            },
        )

    def on_prompt_truncated(self, truncated: PromptTruncated) -> None:
        """The model's server cut the prompt to its window."""
        self._report(
            "prompt_truncated",
            {
                "window": truncated.window,
                "sent_tokens": truncated.sent,
                "evaluated_tokens": truncated.evaluated,
            },
        )

    def on_error(self, failed: TurnFailed) -> None:
        """The turn failed: its kind only, the detail may quote the provider."""
        self._report("error", {"error": failed.kind})

    def on_turn_end(self, summary: TurnSummary) -> None:
        """The turn's summary; the tokens also go where core agents put them in the trace."""
        self._chat_log.async_trace(
            {
                "stats": {
                    "input_tokens": summary.input_tokens,
                    "cached_input_tokens": summary.cached_input_tokens,
                    "output_tokens": summary.output_tokens,
                }
            }
        )
        self._report(
            "turn_end",
            {
                "model": summary.model,
                "model_role": summary.role,
                "input_tokens": summary.input_tokens,
                "cached_input_tokens": summary.cached_input_tokens,
                "output_tokens": summary.output_tokens,
                "model_calls": summary.model_calls,
                "tool_calls": summary.tool_calls,
                "duration": round(summary.duration, 3),
                "error": summary.error,
                "flags": [flag_entry(flagged) for flagged in summary.flags],
            },
            {"answer": summary.answer},
        )
