"""Figures 3 and 4, each measured in fresh interpreters (see worker.py), ours and core alike."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
import sys
from typing import Any

from fakes import ToolCall

from .context import ANSWER, TOOL_ANSWER, Bench
from .report import Row, Stat, judged, ratio_of

# How the worker (worker.py) marks its result line in its output, read back here.
RESULT_PREFIX = "BENCH-RESULT "

_LOGGER = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
SETUP_TARGET_S = 3.0
STALL_TARGET_MS = 50.0
ADDED_TARGET_MB = 130.0  # issue #29
GROWTH_TARGET_MB = 10.0
MB = 1024 * 1024


class WorkerError(RuntimeError):
    """A worker failed or timed out."""


async def run_worker(bench: Bench, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Start a worker, wait for its result line; its stderr goes to bench/worker-*.log."""
    log_path = bench.settings.out / f"worker-{spec['name']}-{spec['agent']}.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log_path.open("w") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "scripts.bench_lib.worker",
            json.dumps(spec),
            cwd=REPO,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
        )
        try:
            stdout, _ = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise WorkerError(f"{spec['name']} worker for {spec['agent']} timed out") from None
        except BaseException:
            if process.returncode is None:
                process.kill()
                await process.wait()
            raise
    for line in reversed(stdout.decode(errors="replace").splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line.removeprefix(RESULT_PREFIX))
    raise WorkerError(
        f"{spec['name']} worker for {spec['agent']} exited {process.returncode} "
        f"without a result; see {log_path}"
    )


def _script_setup_turns(bench: Bench) -> None:
    """The replies of a setup worker's turns, in order: text, tool call and answer."""
    server = bench.server
    server.clear_replies()
    server.add_text(ANSWER)
    server.add_tool_calls([ToolCall(bench.turn_on_tool, {"name": "Kitchen Light"})])
    server.add_text(TOOL_ANSWER)


async def run_in_fresh_process(bench: Bench, agent: str, name: str, **spec: Any) -> dict[str, Any]:
    if spec.get("setup"):
        _script_setup_turns(bench)
    full_spec = {
        "name": name,
        "agent": agent,
        "base_url": bench.server.base_url,
        "agent_options": bench.agent_options,
        "out": str(bench.settings.out),
        **spec,
    }
    timeout = 900 if spec.get("memory") else 240
    try:
        return await run_worker(bench, full_spec, timeout)
    except WorkerError as err:
        return {"errors": [str(err)]}
    finally:
        bench.server.clear_replies()
        bench.server.forget()


async def measure(bench: Bench, figures: set[str]) -> list[Row]:
    """Figures 3 and 4. Quick runs measure both in one process per agent."""
    quick = bench.settings.quick
    want_setup, want_memory = "setup" in figures, "memory" in figures
    warm_turns = 3 if quick else 10
    first, total = (20, 120) if quick else (100, 1000)
    memory_spec = {"turns_first": first, "turns_total": total, "turns_per_conversation": 10}
    setup_runs: dict[str, list[dict[str, Any]]] = {"ours": [], "core": []}
    memory_runs: dict[str, dict[str, Any]] = {}
    combined = quick and want_setup and want_memory
    if want_setup:
        repeats = 1 if quick else 3
        for repeat in range(repeats):
            order = ("ours", "core") if repeat % 2 == 0 else ("core", "ours")
            for agent in order:
                result = await run_in_fresh_process(
                    bench,
                    agent,
                    "fresh" if combined else "setup",
                    setup=True,
                    warm_turns=warm_turns,
                    memory=memory_spec if combined else None,
                )
                setup_runs[agent].append(result)
                if combined:
                    memory_runs[agent] = result
    if want_memory and not combined:
        for agent in ("ours", "core"):
            memory_runs[agent] = await run_in_fresh_process(
                bench, agent, "memory", memory=memory_spec
            )
    if want_setup and bench.settings.profile:
        # Separate runs: profiling and asyncio's debug mode slow everything down.
        bench.raw["setup_profile"] = {
            agent: await run_in_fresh_process(
                bench, agent, "profile", setup=True, warm_turns=warm_turns, profile=True
            )
            for agent in ("ours", "core")
        }
    rows: list[Row] = []
    if want_setup:
        bench.raw["setup"] = {"warm_turns": warm_turns, **setup_runs}
        rows += setup_rows(setup_runs, warm_turns, combined=combined)
    if want_memory:
        bench.raw["memory"] = {"quick": quick, **memory_runs}
        rows += memory_rows(memory_runs, first, total, quick=quick, combined=combined)
    return rows


def setup_rows(
    results: dict[str, list[dict[str, Any]]], warm_turns: int, *, combined: bool
) -> list[Row]:
    """Figure 3's rows from the setup runs."""
    repeats = len(results["ours"])

    def stat(agent: str, key: str) -> Stat | None:
        return Stat.of([r[key] for r in results[agent] if key in r])

    errors = {agent: [e for r in results[agent] for e in r.get("errors", [])] for agent in results}
    notes = [
        f"figure 3: {repeats} fresh process(es) per agent, Home Assistant's blocking-call "
        "detector fully on; its reports about Home Assistant's own base components are "
        "not counted"
    ]
    if combined:
        notes.append("--quick: figures 3 and 4 share one fresh process per agent")
    rows = []
    ours, core = stat("ours", "setup_s"), stat("core", "setup_s")
    rows.append(
        Row(
            figure=3,
            name="config entry setup, fresh process, imports included",
            unit="s",
            ours=ours,
            core=core,
            ratio=ratio_of(ours, core),
            target=f"≤ {SETUP_TARGET_S:.0f} s (p50 of runs)",
            outcome="error"
            if errors["ours"]
            else judged(None if ours is None else ours.p50 <= SETUP_TARGET_S),
            detail="; ".join(errors["ours"])[:200],
            notes=notes,
        )
    )
    for key, label in (
        ("setup_stall_ms", "longest event-loop stall during setup"),
        ("cold_turn_stall_ms", "longest event-loop stall, first text + tool turn"),
        ("warm_turn_stall_ms", f"longest event-loop stall, next {warm_turns} turns"),
    ):
        ours, core = stat("ours", key), stat("core", key)
        rows.append(
            Row(
                figure=3,
                name=label,
                unit="ms",
                ours=ours,
                core=core,
                ratio=ratio_of(ours, core),
                target=f"≤ {STALL_TARGET_MS:.0f} ms (p50 of runs)",
                outcome=judged(None if ours is None else ours.p50 <= STALL_TARGET_MS),
            )
        )

    # A cold start as a person meets it: from the setup's start to the first text turn's
    # answer (the setup leaves LiteLLM's warm-up to the background; that turn waits for it).
    def cold(agent: str) -> list[dict[str, Any]]:
        return [r for r in results[agent] if "cold_turn_wall_ms" in r]

    def first_answer(agent: str) -> Stat | None:
        return Stat.of([r["setup_s"] + r["cold_turn_wall_ms"][0] / 1000 for r in cold(agent)])

    def first_turn(agent: str) -> Stat | None:
        return Stat.of([r["cold_turn_wall_ms"][0] for r in cold(agent)])

    for name, unit, measure in (
        ("first text turn after a cold start (its own wall time)", "ms", first_turn),
        ("setup start to the first text turn's answer, fresh process", "s", first_answer),
    ):
        ours, core = measure("ours"), measure("core")
        rows.append(
            Row(
                figure=3,
                name=name,
                unit=unit,
                ours=ours,
                core=core,
                ratio=ratio_of(ours, core),
                target="",
                outcome="info",
            )
        )
    ours, core = stat("ours", "blocking_reports_total"), stat("core", "blocking_reports_total")
    rows.append(
        Row(
            figure=3,
            name='"Detected blocking call" reports, setup + turns',
            unit="count",
            ours=ours,
            core=core,
            target="0 (every run)",
            outcome=judged(None if ours is None else ours.max == 0),
            single=repeats == 1,
        )
    )
    return rows


def memory_rows(
    results: dict[str, dict[str, Any]], first: int, total: int, *, quick: bool, combined: bool
) -> list[Row]:
    """Figure 4's rows."""
    notes = ["figure 4: conversations of 10 turns; RSS after gc.collect(), from /proc (MiB)"]
    if combined:
        notes.append("--quick: figures 3 and 4 share one fresh process per agent")
    if quick:
        notes.append(
            f"--quick: figure 4 measures after {first} and {total} turns "
            "(the full run: 100 and 1,000)"
        )

    def value(agent: str, key: str) -> Stat | None:
        if key not in results[agent]:
            return None
        return Stat.single(results[agent][key] / MB)

    errors = results["ours"].get("errors", [])
    added_ours, added_core = value("ours", "added_bytes"), value("core", "added_bytes")
    growth_ours, growth_core = value("ours", "growth_bytes"), value("core", "growth_bytes")
    return [
        Row(
            figure=4,
            name=f"RSS added by loading the integration + {first} turns",
            unit="MiB",
            ours=added_ours,
            core=added_core,
            ratio=ratio_of(added_ours, added_core),
            target=f"≤ {ADDED_TARGET_MB:.0f} MiB",
            outcome="error"
            if errors
            else judged(None if added_ours is None else added_ours.p50 <= ADDED_TARGET_MB),
            detail="; ".join(errors)[:200],
            single=True,
            notes=notes,
        ),
        Row(
            figure=4,
            name=f"RSS growth from turn {first} to turn {total}",
            unit="MiB",
            ours=growth_ours,
            core=growth_core,
            ratio=ratio_of(growth_ours, growth_core),
            target=f"≤ {GROWTH_TARGET_MB:.0f} MiB",
            outcome="error"
            if errors
            else judged(None if growth_ours is None else growth_ours.p50 <= GROWTH_TARGET_MB),
            single=True,
        ),
    ]
