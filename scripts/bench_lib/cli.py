"""Command line: which figures, how many runs; prints the table, writes bench/ outputs.

    python -m scripts.bench_lib [--quick] [--runs N] [--only NAME[,NAME...]] [--profile]

Figures (by name or number): 1 overhead, 2 first_delta, 3 setup, 4 memory, 5 storage,
6 prompt, 7 concurrency, 8 round_trips, 9 hostile, 10 local_prefill, 11 tokens, 12 reloads,
13 outage, 14 history, 15 imports.
The bench
reports; it never fails on a missed target (exit 0), only on a crash of the bench itself.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
import cProfile
import datetime as dt
import importlib.metadata
import io
import logging
import os
from pathlib import Path
import platform
import pstats
import sys
import time
from typing import Any

from . import (
    concurrency,
    fresh,
    history,
    hostile,
    imports,
    latency,
    local_prefill,
    outage,
    plot,
    prompt,
    reloads,
    storage,
    tokens,
)
from .context import Bench, Settings, running_bench
from .report import Row, markdown_table, notes_block, write_results

_LOGGER = logging.getLogger("bench")

FIGURES = {
    "overhead": 1,
    "first_delta": 2,
    "setup": 3,
    "memory": 4,
    "storage": 5,
    "prompt": 6,
    "concurrency": 7,
    "round_trips": 8,
    "hostile": 9,
    "local_prefill": 10,
    "tokens": 11,
    "reloads": 12,
    "outage": 13,
    "history": 14,
    "imports": 15,
}
# The order figures run in: in-process ones first, the fresh processes last.
RUN_ORDER = (
    "latency",
    "prompt",
    "tokens",
    "local_prefill",
    "concurrency",
    "hostile",
    "history",
    "storage",
    "outage",
    "fresh",
    "reloads",
    "imports",
)
QUIET_LOGGERS = ("homeassistant.loader", "aiohttp_fast_zlib", "homeassistant.components.camera")


def parse_figures(values: list[str] | None) -> set[str]:
    """--only values (names or numbers, comma- or space-separated) to figure names."""
    if not values:
        return set(FIGURES)
    by_number = {str(number): name for name, number in FIGURES.items()}
    chosen = set()
    for value in values:
        for part in value.replace(",", " ").split():
            name = by_number.get(part, part)
            if name not in FIGURES:
                raise SystemExit(
                    f"unknown figure {part!r}; choose from "
                    + ", ".join(f"{n} ({name})" for name, n in FIGURES.items())
                )
            chosen.add(name)
    return chosen


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options."""
    parser = argparse.ArgumentParser(
        prog="scripts/bench", description="LangGraph Conversation against core Ollama."
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a few runs and smaller counts (under 90 s): proves the bench works",
    )
    parser.add_argument("--runs", type=int, help="measured runs per variant (default 20, quick 3)")
    parser.add_argument("--warmup", type=int, help="warm-up runs (default 3, quick 1)")
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="FIGURE",
        help="figures to run: " + ", ".join(f"{n}={name}" for name, n in FIGURES.items()),
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also write cProfile summaries of warm turns (bench/profile-*.txt)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench"), help="output directory")
    return parser.parse_args(argv)


async def _latency_rows(bench: Bench, figures: set[str]) -> list[Row]:
    selected = figures & set(latency.NEEDS)
    if not selected:
        return []
    samples = await latency.measure(bench, selected)
    rows: list[Row] = []
    if "overhead" in selected:
        rows += latency.overhead_rows(samples)
    if "first_delta" in selected:
        rows += latency.first_delta_rows(samples)
    if "round_trips" in selected:
        rows += latency.round_trip_rows(samples)
    return rows


def _steps(figures: set[str]) -> dict[str, Callable[[Bench], Awaitable[list[Row]]]]:
    steps: dict[str, Callable[[Bench], Awaitable[list[Row]]]] = {
        "latency": lambda bench: _latency_rows(bench, figures),
        "prompt": prompt.measure,
        "local_prefill": local_prefill.measure,
        "tokens": tokens.measure,
        "concurrency": concurrency.measure,
        "hostile": hostile.measure,
        "storage": storage.measure,
        "fresh": lambda bench: fresh.measure(bench, figures),
        "reloads": reloads.measure,
        "outage": outage.measure,
        "history": history.measure,
        "imports": lambda bench: imports.measure(bench, with_rows="imports" in figures),
    }
    wanted = {
        "latency": bool(figures & set(latency.NEEDS)),
        "prompt": "prompt" in figures,
        "local_prefill": "local_prefill" in figures,
        "tokens": "tokens" in figures,
        "concurrency": "concurrency" in figures,
        "hostile": "hostile" in figures,
        "storage": "storage" in figures,
        "fresh": bool(figures & {"setup", "memory"}),
        "reloads": "reloads" in figures,
        "outage": "outage" in figures,
        "history": "history" in figures,
        # Figure 4's breakdown by library is made of figure 15's steps.
        "imports": bool(figures & {"imports", "memory"}),
    }
    return {name: steps[name] for name in RUN_ORDER if wanted[name]}


STEP_FIGURES = {
    "latency": (1, "turn overhead / first delta / round trips"),
    "prompt": (6, "prompt tokens"),
    "local_prefill": (10, "first-request prefill on llama-server"),
    "tokens": (11, "tokens by home shape, re-read per follow-up"),
    "concurrency": (7, "concurrency"),
    "hostile": (9, "loop stalls under hostile model answers"),
    "storage": (5, "storage"),
    "fresh": (3, "setup and memory (fresh processes)"),
    "reloads": (12, "memory over entry reloads (fresh processes)"),
    "outage": (13, "a PostgreSQL outage while running"),
    "history": (14, "loop stall while the history tool answers"),
    "imports": (15, "RSS and time each library adds at import (fresh interpreters)"),
}


async def profile_turns(bench: Bench, out: Path) -> list[str]:
    """cProfile of warm turns of each agent (text and one-tool, thread length 1)."""
    written = []
    turns = 10 if bench.settings.quick else 40
    for variant in (latency.VARIANTS[0], latency.VARIANTS[1]):
        for agent in (bench.ours, bench.core):
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(turns):
                await latency.one_turn(bench, agent, variant, None)
            profiler.disable()
            buffer = io.StringIO()
            stats = pstats.Stats(profiler, stream=buffer)
            buffer.write(f"# {agent.label}, {variant.label}, {turns} turns\n\n")
            buffer.write("## by cumulative time\n")
            stats.sort_stats("cumulative").print_stats(45)
            buffer.write("## by own time\n")
            stats.sort_stats("tottime").print_stats(30)
            path = out / f"profile-{agent.label}-{variant.key}.txt"
            path.write_text(buffer.getvalue())
            profiler.dump_stats(out / f"profile-{agent.label}-{variant.key}.pstats")
            written.append(str(path))
    return written


async def run(settings: Settings, figures: set[str]) -> tuple[list[Row], dict[str, Any]]:
    """Every selected figure against one running Home Assistant."""
    rows: list[Row] = []
    timings: dict[str, float] = {}
    async with running_bench(settings) as bench:
        for name, step in _steps(figures).items():
            started = time.perf_counter()
            _LOGGER.warning("bench: %s ...", name)
            try:
                rows += await step(bench)
            except Exception as err:
                _LOGGER.exception("bench: %s failed", name)
                number, label = STEP_FIGURES[name]
                rows.append(
                    Row(
                        figure=number,
                        name=label,
                        unit="",
                        ours=None,
                        core=None,
                        target="",
                        outcome="error",
                        detail=f"{type(err).__name__}: {err}"[:200],
                    )
                )
            timings[name] = time.perf_counter() - started
        if settings.profile:
            bench.raw["profiles"] = await profile_turns(bench, settings.out)
        bench.raw["step_seconds"] = timings
        raw = bench.raw
    return sorted(rows, key=lambda row: row.figure), raw


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git_state(repo: Path) -> dict[str, Any]:
    """HEAD of the repository (read from .git: the leg has no git binary)."""
    git = repo / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head.removeprefix("ref: ")
            ref_file = git / ref
            if ref_file.exists():
                return {"ref": ref, "commit": ref_file.read_text().strip()}
            for line in (git / "packed-refs").read_text().splitlines():
                if line.endswith(" " + ref):
                    return {"ref": ref, "commit": line.split()[0]}
            return {"ref": ref}
        return {"commit": head}
    except OSError:
        return {}


def _overhead_panels(raw: dict[str, Any]) -> list[tuple[str, dict[str, list[float]]]]:
    panels = []
    latency_raw = raw.get("latency", {})
    for key, label in latency_raw.get("variants", {}).items():
        samples = latency_raw["samples"][key]
        panels.append(
            (
                label,
                {
                    agent: [s["overhead_ms"] for s in samples[agent] if not s.get("error")]
                    for agent in ("ours", "core")
                },
            )
        )
    if "concurrency" in raw:
        concurrency_raw = raw["concurrency"]
        label = (
            f"{concurrency_raw['conversations']} conversations x "
            f"{concurrency_raw['turns']} turns in parallel"
        )
        panels.append(
            (
                label,
                {a: concurrency_raw[a]["parallel"]["overhead_ms"] for a in ("ours", "core")},
            )
        )
    return panels


def main(argv: list[str] | None = None) -> int:
    """Run, print the table, write results.json and latency.png."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    figures = parse_figures(args.only)
    runs = args.runs if args.runs is not None else (3 if args.quick else 20)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 3)
    if runs < 1 or warmup < 0:
        raise SystemExit("--runs must be at least 1 and --warmup at least 0")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    settings = Settings(runs=runs, warmup=warmup, quick=args.quick, out=out, profile=args.profile)
    started = time.perf_counter()
    rows, raw = asyncio.run(run(settings, figures))
    duration = time.perf_counter() - started

    table = markdown_table(rows)
    notes = notes_block(rows)
    meta = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "duration_s": round(duration, 1),
        "quick": args.quick,
        "runs": runs,
        "warmup": warmup,
        "figures": sorted(figures, key=FIGURES.__getitem__),
        "git": _git_state(Path(__file__).resolve().parents[2]),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "versions": {
            p: _version(p)
            for p in ("homeassistant", "litellm", "langgraph", "langchain-litellm", "ollama")
        },
        "table": table,
    }
    results = out / "results.json"
    write_results(results, meta, rows, raw)
    panels = _overhead_panels(raw)
    png = out / "latency.png"
    if panels:
        plot.draw(png, panels, "Turn overhead (wall time minus the model server's own time)")
    print(table)
    breakdown = (
        imports.memory_breakdown(raw["imports"]["steps"], raw["memory"])
        if "memory" in raw and "imports" in raw
        else ""
    )
    if breakdown:
        print()
        print(breakdown)
    if "imports" in raw and "imports" in figures:
        print()
        print(raw["imports"]["table"])
    if notes:
        print()
        print(notes)
    print()
    print(
        f"{runs} measured runs after {warmup} warm-up; {duration:.0f} s; "
        f"wrote {results}" + (f" and {png}" if panels else "")
    )
    return 0
