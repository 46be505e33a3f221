"""Figure 9: the event loop's longest stall while a model sends hostile answers.

Answers a confused or injected model could send, each in its own turn of our agent: one
message with 2,000 tool calls (HassTurnOn on the kitchen light), one call of the memory
tool with a 1 MB text (a tool every assistant is offered; the issue measured the same size
on home_find_entities, which is now offered only without the entity listing), one message of 500
calls, small enough for the answer's size bound, so the per-message cap decides, and an
answer that never ends (cut at the size bound). tests/reliability/test_bounds.py checks
what these answers do; the stalls are measured only here. The stall
is measured as figure 3 measures it (probe.LoopLagProbe: a task asking to wake every 10 ms,
and how late it wakes) from the turn's start to its end. Core's agent is not run: the
figure is about what our agent lets a model do (Home Assistant's own agent has no such
tools).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from fakes import Reply, ToolCall

from .context import ANSWER, Bench
from .probe import LoopLagProbe
from .report import Row, Stat, judged
from .turns import converse

_LOGGER = logging.getLogger(__name__)

STALL_TARGET_MS = 50.0
CALLS = 2_000
CAPPED_CALLS = 500
ARGUMENT_CHARS = 1_000_000


def _many_calls(bench: Bench, calls: int = CALLS) -> Reply:
    call = ToolCall(bench.turn_on_tool, {"name": "Kitchen Light"})
    return Reply(tool_calls=(call,) * calls)


def _capped_calls(bench: Bench) -> Reply:
    # Under the answer's size bound: the per-message cap decides (16 run, the rest are
    # answered or dropped).
    return _many_calls(bench, CAPPED_CALLS)


def _endless_text(_bench: Bench) -> Reply:
    # A model that never stops talking, in small chunks: cut at the answer's size bound.
    return Reply(text="la ", endless=True, chunk_size=20)


def _huge_argument(_bench: Bench) -> Reply:
    text = ("kitchen light " * (ARGUMENT_CHARS // 14 + 1))[:ARGUMENT_CHARS]
    return Reply(tool_calls=(ToolCall("memory", {"action": "remember", "text": text}),))


CASES = (
    ("many_calls", f"loop stall, one message of {CALLS:,} tool calls", _many_calls),
    ("huge_argument", "loop stall, 1 MB memory tool argument", _huge_argument),
    ("capped_calls", f"loop stall, one message of {CAPPED_CALLS} tool calls", _capped_calls),
    ("endless_text", "loop stall, an answer that never ends (20-char chunks)", _endless_text),
)


async def _one(bench: Bench, reply: Reply) -> dict[str, Any]:
    """One turn answered with `reply` (then a plain answer); its longest stall."""
    server = bench.server
    server.clear_replies()
    server.add(reply)
    server.add_text(ANSWER)
    lights_before = len(bench.lights.calls)
    probe = LoopLagProbe()
    probe.start()
    try:
        start = time.perf_counter()
        result = await converse(bench.hass, server, bench.ours, "Turn everything on")
        end = time.perf_counter()
        await bench.hass.async_block_till_done()
    finally:
        await probe.stop()
        server.clear_replies()
        server.forget()
    return {
        "stall_ms": probe.max_lag(start, end) * 1000,
        "turn_s": end - start,
        "service_calls": len(bench.lights.calls) - lights_before,
        "speech": result.speech[:200],
    }


async def measure(bench: Bench) -> list[Row]:
    """Figure 9: each hostile answer `runs` times (once when quick)."""
    runs = 1 if bench.settings.quick else max(1, min(bench.settings.runs, 5))
    raw: dict[str, Any] = {}
    rows: list[Row] = []
    for key, label, reply in CASES:
        samples = [await _one(bench, reply(bench)) for _ in range(runs)]
        raw[key] = samples
        stat = Stat.of([s["stall_ms"] for s in samples])
        last = samples[-1]
        rows.append(
            Row(
                figure=9,
                name=label,
                unit="ms",
                ours=stat,
                core=None,
                target=f"≤ {STALL_TARGET_MS:.0f} ms (p50 of runs)",
                outcome=judged(None if stat is None else stat.p50 <= STALL_TARGET_MS),
                detail=(f"turn {last['turn_s']:.1f} s, {last['service_calls']} service calls"),
            )
        )
        _LOGGER.warning("bench: %s: %s", key, samples)
    bench.raw["hostile"] = raw
    return rows
