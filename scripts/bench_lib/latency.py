"""Figures 1, 2 and 8: turn overhead, time to first ChatLog delta, model round trips.

Every run goes through every selected variant; inside a variant the two agents alternate
and swap who goes first on every run, so drift on a shared machine hits both alike.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
import logging
import time
from typing import Any

from fakes import ToolCall

from .context import ANSWER, TOOL_ANSWER, TOOL_TURN_TEXT, Bench
from .home import KITCHEN_LIGHT, AgentHandle
from .report import Row, Stat, judged, ratio_of
from .turns import TurnResult, converse

_LOGGER = logging.getLogger(__name__)

LONG_THREAD = 50
# Measured turns per long conversation in a full run (text and tool turns alternate).
TURNS_PER_LONG_THREAD = 6
SLOW_FIRST_BYTE = 0.200
# Tokens arriving like a local model's, for the first-delta diagnosis (not in figure 1).
PACED_CHUNKS = 0.020
TEXT_TURN = "How warm is it in the kitchen?"
OVERHEAD_TARGET = 1.5
FIRST_DELTA_TARGET_MS = 5.0
ROUND_TRIP_TARGET = 2
SETTLE = 0.010


@dataclass(frozen=True, slots=True)
class Variant:
    """One kind of measured turn."""

    key: str
    label: str
    tool: bool
    long_thread: bool
    first_byte_delay: float = 0.0
    chunk_delay: float = 0.0  # seconds between streamed chunks (0: all at once)


VARIANTS = (
    Variant("text_len1", "text turn, thread length 1", tool=False, long_thread=False),
    Variant("tool_len1", "one-tool turn, thread length 1", tool=True, long_thread=False),
    Variant("text_len50", "text turn, thread length 50", tool=False, long_thread=True),
    Variant("tool_len50", "one-tool turn, thread length 50", tool=True, long_thread=True),
    Variant(
        "text_len1_slow",
        "text turn, thread length 1, 200 ms first byte",
        tool=False,
        long_thread=False,
        first_byte_delay=SLOW_FIRST_BYTE,
    ),
    Variant(
        "text_len1_paced",
        "text turn, thread length 1, chunks 20 ms apart",
        tool=False,
        long_thread=False,
        chunk_delay=PACED_CHUNKS,
    ),
)

# Which variants each figure needs.
NEEDS = {
    "overhead": {"text_len1", "tool_len1", "text_len50", "tool_len50", "text_len1_slow"},
    "first_delta": {"text_len1", "text_len1_slow", "text_len1_paced"},
    "round_trips": {"tool_len1"},
}


def agents_in_order(bench: Bench, run: int) -> list[AgentHandle]:
    """Ours then core on even runs, core then ours on odd ones."""
    pair = [bench.ours, bench.core]
    return pair if run % 2 == 0 else pair[::-1]


async def one_turn(
    bench: Bench, agent: AgentHandle, variant: Variant, conversation_id: str | None
) -> TurnResult:
    """Script the server for the variant, run the turn, check it did what it should."""
    server = bench.server
    server.first_byte_delay = variant.first_byte_delay
    lights_before = len(bench.lights.calls)
    if variant.tool:
        server.add_tool_calls([ToolCall(bench.turn_on_tool, {"name": "Kitchen Light"})])
        server.add_text(TOOL_ANSWER)
        text = TOOL_TURN_TEXT
        bench.hass.states.async_set(
            KITCHEN_LIGHT, "off", bench.hass.states.get(KITCHEN_LIGHT).attributes
        )
    else:
        text = TEXT_TURN
        if variant.chunk_delay:
            server.add_text(ANSWER, chunk_delay=variant.chunk_delay)
    cpu_start = time.process_time()
    try:
        result = await converse(bench.hass, server, agent, text, conversation_id)
    finally:
        server.first_byte_delay = 0.0
    # A short pause so work a turn leaves behind (LiteLLM's logging threads) is charged
    # to that turn's CPU time, not to the other agent's next turn.
    await asyncio.sleep(SETTLE)
    result.extra["cpu_ms"] = (time.process_time() - cpu_start) * 1000
    expected = TOOL_ANSWER if variant.tool else ANSWER
    if result.error is None and result.speech != expected:
        result.error = f"unexpected answer {result.speech!r}"
    if variant.tool:
        result.extra["light_calls"] = len(bench.lights.calls) - lights_before
        if result.error is None and result.extra["light_calls"] != 1:
            result.error = f"light.turn_on called {result.extra['light_calls']} times"
    if server.pending_replies:
        result.error = result.error or f"{server.pending_replies} scripted replies left unused"
        server.clear_replies()
    return result


@dataclass
class LongThread:
    """A conversation built up to a length; every measured turn makes it one longer."""

    conversation_id: str
    turns: int
    measured_at: list[int]


async def build_long_threads(bench: Bench, length: int, count: int) -> dict[str, list[LongThread]]:
    """`count` conversations per agent holding `length - 1` text turns already."""
    threads: dict[str, list[LongThread]] = {"ours": [], "core": []}
    for _ in range(count):
        for agent in (bench.ours, bench.core):
            conversation_id: str | None = None
            for _ in range(length - 1):
                result = await converse(bench.hass, bench.server, agent, TEXT_TURN, conversation_id)
                if result.error:
                    raise RuntimeError(f"building a long thread of {agent.label}: {result.error}")
                conversation_id = result.conversation_id
            assert conversation_id is not None
            threads[agent.label].append(LongThread(conversation_id, length - 1, []))
    return threads


def _sample(result: TurnResult) -> dict[str, Any]:
    return {
        "wall_ms": result.wall * 1000,
        "server_ms": result.server_time * 1000,
        "overhead_ms": result.overhead * 1000,
        "first_delta_lag_ms": None
        if result.first_delta_lag is None
        else result.first_delta_lag * 1000,
        "chat_requests": result.chat_requests,
        "summary_requests": result.requests_of_kind("summary"),
        "other_requests": result.other_requests,
        "error": result.error,
        **result.extra,
    }


async def measure(bench: Bench, figures: set[str]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Samples per variant and agent: {variant: {"ours": [...], "core": [...]}}."""
    keys = set().union(*(NEEDS[f] for f in figures if f in NEEDS))
    variants = [v for v in VARIANTS if v.key in keys]
    settings = bench.settings
    long_threads: dict[str, list[LongThread]] = {}
    # Several long conversations per agent, used in turn, so each grows only a little
    # while it is measured (a thread is one turn longer after every measured turn).
    long_count = max(1, settings.runs // TURNS_PER_LONG_THREAD)
    if any(v.long_thread for v in variants):
        long_threads = await build_long_threads(bench, LONG_THREAD, long_count)
    samples: dict[str, dict[str, list[dict[str, Any]]]] = {
        v.key: {"ours": [], "core": []} for v in variants
    }
    for run in range(settings.warmup + settings.runs):
        measured = run >= settings.warmup
        for variant in variants:
            for agent in agents_in_order(bench, run):
                thread = None
                if variant.long_thread:
                    thread = long_threads[agent.label][run % long_count]
                result = await one_turn(
                    bench, agent, variant, thread.conversation_id if thread else None
                )
                if thread is not None:
                    thread.turns += 1
                    if measured:
                        thread.measured_at.append(thread.turns)
                if result.error:
                    _LOGGER.warning("%s %s: %s", agent.label, variant.key, result.error)
                if measured:
                    samples[variant.key][agent.label].append(_sample(result))
    bench.raw["latency"] = {
        "variants": {v.key: v.label for v in variants},
        "long_thread_length": LONG_THREAD,
        "long_threads_per_agent": long_count,
        "long_thread_lengths_measured": {
            label: [n for thread in threads for n in thread.measured_at]
            for label, threads in long_threads.items()
        },
        "samples": samples,
    }
    return samples


def _values(samples: list[dict[str, Any]], key: str) -> list[float]:
    return [s[key] for s in samples if s.get(key) is not None and not s.get("error")]


def _errors(samples: dict[str, list[dict[str, Any]]]) -> int:
    return sum(1 for agent in samples.values() for s in agent if s.get("error"))


LENGTH_NOTE = (
    "figure 1: thread length 50 = the 50th turn of a conversation; each long conversation "
    "grows by one turn per measured turn, and several are used in turn (their lengths at "
    "measurement are in results.json)"
)


def overhead_rows(samples: dict[str, dict[str, list[dict[str, Any]]]]) -> list[Row]:
    """Figure 1: ours ≤ 1.5 x core (judged on p50), per variant."""
    rows = []
    for variant in VARIANTS:
        if variant.key not in samples or variant.key not in NEEDS["overhead"]:
            continue
        ours = Stat.of(_values(samples[variant.key]["ours"], "overhead_ms"))
        core = Stat.of(_values(samples[variant.key]["core"], "overhead_ms"))
        ratio = ratio_of(ours, core)
        errors = _errors(samples[variant.key])
        summaries = sum(s.get("summary_requests", 0) for s in samples[variant.key]["ours"])
        notes = [LENGTH_NOTE] if variant.long_thread else []
        notes += (
            [
                "figure 1: at thread length 50+ our agent summarises old turns when the thread "
                "outgrows its history token budget (agent/graph/history.py); those model calls are "
                "answered by the fake server, their server time is subtracted like any other"
            ]
            if summaries
            else []
        )
        row = Row(
            figure=1,
            name=f"turn overhead, {variant.label}",
            unit="ms",
            ours=ours,
            core=core,
            ratio=ratio,
            target=f"ours ≤ {OVERHEAD_TARGET} x core (p50)",
            outcome="error" if errors else judged(None if ratio is None else ratio <= 1.5),
            detail=f"{errors} failed turns" if errors else "",
            notes=notes,
        )
        rows.append(row)
    if "text_len1" in samples:
        ours = Stat.of(_values(samples["text_len1"]["ours"], "cpu_ms"))
        core = Stat.of(_values(samples["text_len1"]["core"], "cpu_ms"))
        rows.append(
            Row(
                figure=1,
                name="process CPU time per text turn (all threads, fake server included)",
                unit="ms",
                ours=ours,
                core=core,
                ratio=ratio_of(ours, core),
                target="(information)",
                outcome="info",
            )
        )
    return rows


def first_delta_rows(samples: dict[str, dict[str, list[dict[str, Any]]]]) -> list[Row]:
    """Figure 2: ours - core ≤ 5 ms at p50."""
    rows = []
    for key, label in (
        ("text_len1", "first ChatLog text delta after the server's first byte"),
        ("text_len1_slow", "first text delta after first byte, 200 ms first-byte delay"),
        ("text_len1_paced", "first text delta after first byte, chunks 20 ms apart"),
    ):
        if key not in samples:
            continue
        ours = Stat.of(_values(samples[key]["ours"], "first_delta_lag_ms"))
        core = Stat.of(_values(samples[key]["core"], "first_delta_lag_ms"))
        difference = None if ours is None or core is None else ours.p50 - core.p50
        errors = _errors(samples[key])
        diagnostic = key == "text_len1_paced"
        rows.append(
            Row(
                figure=2,
                name=label,
                unit="ms",
                ours=ours,
                core=core,
                ratio=ratio_of(ours, core),
                target="(diagnosis: tokens paced like a local model)"
                if diagnostic
                else f"ours - core ≤ {FIRST_DELTA_TARGET_MS:.0f} ms (p50)",
                outcome="error"
                if errors
                else "info"
                if diagnostic
                else judged(None if difference is None else difference <= FIRST_DELTA_TARGET_MS),
                detail=f"{errors} failed turns"
                if errors
                else ("" if difference is None else f"Δp50 {difference:+.1f} ms"),
            )
        )
    return rows


def _summary_rows(samples: dict[str, dict[str, list[dict[str, Any]]]]) -> list[Row]:
    """How often a long thread costs an extra model call to summarise old turns."""
    rows = []
    for key in ("text_len50", "tool_len50"):
        if key not in samples:
            continue

        def share(label: str, key: str = key) -> Stat | None:
            turns = samples[key][label]
            if not turns:
                return None
            return Stat.single(sum(s.get("summary_requests", 0) for s in turns) / len(turns))

        rows.append(
            Row(
                figure=8,
                name=f"summarisation calls per turn, {key.split('_')[0]} turn, thread length 50+",
                unit="requests",
                ours=share("ours"),
                core=share("core"),
                target="(information)",
                outcome="info",
                single=True,
            )
        )
    return rows


def round_trip_rows(samples: dict[str, dict[str, list[dict[str, Any]]]]) -> list[Row]:
    """Figure 8: chat requests for "turn on the kitchen light" (and other HTTP calls)."""
    if "tool_len1" not in samples:
        return []
    tool = samples["tool_len1"]

    def chat(label: str) -> Stat | None:
        return Stat.of([float(s["chat_requests"]) for s in tool[label]])

    def other(label: str) -> Stat | None:
        return Stat.of([float(len(s["other_requests"])) for s in tool[label]])

    ours, core = chat("ours"), chat("core")
    errors = _errors(tool)
    return [
        Row(
            figure=8,
            name='model round trips, "turn on the kitchen light"',
            unit="requests",
            ours=ours,
            core=core,
            ratio=ratio_of(ours, core),
            target=f"≤ {ROUND_TRIP_TARGET} (every turn)",
            outcome="error"
            if errors
            else judged(None if ours is None else ours.max <= ROUND_TRIP_TARGET),
            detail=f"{errors} failed turns" if errors else "",
        ),
        *_summary_rows(samples),
        Row(
            figure=8,
            name="other HTTP requests to the model server in that turn",
            unit="requests",
            ours=other("ours"),
            core=other("core"),
            target="(information)",
            outcome="info",
        ),
    ]
