"""Figure 15: the memory and time each library of the stack adds when imported.

Each step imports one more library on top of the ones before (cumulative, in the order
below) in a fresh interpreter of the leg, and reports its resident memory after
gc.collect() and how long its imports took. What a step adds is the difference to the
step before: Home Assistant core (what a running Home Assistant has loaded before any
integration's conversation agent: its core, the LLM helper and the conversation
component), then openai, langchain-core, langgraph (with the SQLite checkpointer our
threads use), litellm, langchain-litellm, numpy and the integration itself (its package
and the two platforms a config entry's setup loads). The interpreter alone is step 0.

A library imported by an earlier one costs nothing in its own step (openai's share of
litellm is counted under openai): the order is the one the issue's figures use. Each step
runs in several fresh interpreters (5 in a full run, 2 with --quick, about 40 s); the
median RSS and the shortest import time are reported (on a shared machine a slow sample
is another process's doing, and one slow step would make the next one's difference
negative).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
import json
import logging
from pathlib import Path
import statistics
import sys
from typing import Any

from .context import Bench
from .report import Row, Stat

_LOGGER = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
FIGURE = 15
STEP_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class Step:
    """One more library: its label and the modules importing it means."""

    label: str
    modules: tuple[str, ...]


STEPS = (
    Step("Python alone", ()),
    Step(
        "Home Assistant core",
        (
            "homeassistant.core",
            "homeassistant.helpers.llm",
            "homeassistant.components.conversation",
        ),
    ),
    Step("openai", ("openai",)),
    Step(
        "langchain-core",
        (
            "langchain_core.messages",
            "langchain_core.tools",
            "langchain_core.runnables",
            "langchain_core.language_models",
        ),
    ),
    Step("langgraph", ("langgraph.graph", "langgraph.checkpoint.sqlite.aio")),
    Step("litellm", ("litellm",)),
    Step("langchain-litellm", ("langchain_litellm",)),
    Step("numpy", ("numpy",)),
    Step(
        "the integration",
        (
            "custom_components.langgraph_conversation",
            "custom_components.langgraph_conversation.conversation",
            "custom_components.langgraph_conversation.ai_task",
        ),
    ),
)

# Run by `python -c` with the modules as arguments: prints RSS after gc.collect() and the
# seconds the imports took, as one JSON line.
_PROBE = """
import gc, importlib, json, os, sys, time
started = time.perf_counter()
for name in sys.argv[1:]:
    importlib.import_module(name)
seconds = time.perf_counter() - started
gc.collect()
with open(f"/proc/{os.getpid()}/status", encoding="ascii") as status:
    rss = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
print(json.dumps({"rss": rss, "seconds": seconds}))
"""


async def import_in_fresh_interpreter(modules: tuple[str, ...]) -> dict[str, float]:
    """RSS (bytes) and import seconds of a fresh interpreter that imported `modules`."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _PROBE,
        *modules,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), STEP_TIMEOUT)
    except BaseException:
        if process.returncode is None:
            process.kill()
            await process.wait()
        raise
    if process.returncode != 0:
        tail = stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"importing {', '.join(modules)} failed: {tail[0]}")
    return json.loads(stdout.decode().strip().splitlines()[-1])


async def measure_steps(repeats: int) -> list[dict[str, Any]]:
    """Each step's median RSS and shortest import time over `repeats` fresh interpreters."""
    cumulative: list[tuple[str, ...]] = []
    imported: tuple[str, ...] = ()
    for step in STEPS:
        imported += step.modules
        cumulative.append(imported)
    # Round after round over all steps: a busy spell of the machine spreads over the steps
    # instead of landing on one step's every sample.
    samples: list[list[dict[str, float]]] = [[] for _ in STEPS]
    for _round in range(repeats):
        for index, modules in enumerate(cumulative):
            samples[index].append(await import_in_fresh_interpreter(modules))
    results: list[dict[str, Any]] = [
        {
            "label": step.label,
            "modules": list(step.modules),
            "rss_bytes": statistics.median(s["rss"] for s in step_samples),
            "seconds": min(s["seconds"] for s in step_samples),
            "samples": step_samples,
        }
        for step, step_samples in zip(STEPS, samples, strict=True)
    ]
    previous: dict[str, Any] | None = None
    for result in results:
        result["added_bytes"] = result["rss_bytes"] - (previous or result)["rss_bytes"]
        result["added_seconds"] = result["seconds"] - (previous or result)["seconds"]
        previous = result
    return results


def breakdown_table(steps: list[dict[str, Any]]) -> str:
    """The figure as its own Markdown table: each step, what it adds, the running total."""
    lines = [
        "| figure 15: import step (cumulative) | RSS added | import time added "
        "| RSS total | import time total |",
        "|---|---:|---:|---:|---:|",
    ]
    for step in steps:
        lines.append(
            f"| {step['label']} | {step['added_bytes'] / MIB:+.1f} MiB "
            f"| {step['added_seconds']:+.2f} s | {step['rss_bytes'] / MIB:.1f} MiB "
            f"| {step['seconds']:.2f} s |"
        )
    return "\n".join(lines)


def rows(steps: list[dict[str, Any]]) -> list[Row]:
    """One information row per library in the main table: the RSS it adds (ours column)."""
    table_rows = []
    for step in steps[1:]:
        table_rows.append(
            Row(
                figure=FIGURE,
                name=f"RSS added by importing {step['label']}",
                unit="MiB",
                ours=Stat.single(step["added_bytes"] / MIB),
                core=None,
                target="",
                outcome="info",
                detail=f"{step['added_seconds']:+.2f} s; {step['rss_bytes'] / MIB:.0f} MiB in all",
                single=True,
            )
        )
    return table_rows


def memory_breakdown(steps: list[dict[str, Any]], memory: dict[str, Any]) -> str:
    """Figure 4's RSS added, by library: each library's share as figure 15 measures it
    (fresh interpreters), and the rest (warm-up, storage, the turns' own memory).

    A library the figure-4 process had loaded before its baseline (numpy: the bench's own
    modules import it, and in a default install Home Assistant's stream component does)
    is not part of figure 4, and is left out, as is one it never loaded (LiteLLM and the
    OpenAI SDK for an Ollama entry). The split is an estimate: the shares come
    from other processes, which load some of the libraries' dependencies (pydantic, httpx,
    Home Assistant's components behind the AI Task platform) that the figure-4 process had
    already; so the rest can come out below zero.
    """
    ours = memory.get("ours", {})
    if "added_bytes" not in ours:
        return ""
    added = ours["added_bytes"]
    loaded_before = set(ours.get("loaded_before", ()))
    never_loaded = set(ours.get("never_loaded", ()))
    lines = [
        f"| figure 4: RSS added by loading the integration + {ours['turns_first']} turns, "
        "by library | RSS | share |",
        "|---|---:|---:|",
    ]
    counted = 0.0
    for step in steps[2:]:  # after "Python alone" and Home Assistant core
        if step["label"] in loaded_before:
            lines.append(f"| {step['label']} (loaded before the setup: not counted) | - | - |")
            continue
        if step["label"] in never_loaded:
            lines.append(f"| {step['label']} (never loaded) | - | - |")
            continue
        counted += step["added_bytes"]
        lines.append(
            f"| {step['label']} | {step['added_bytes'] / MIB:.1f} MiB "
            f"| {step['added_bytes'] / added:.0%} |"
        )
    rest = added - counted
    lines.append(
        "| the rest: warm-up, storage, turns, less what the bench process had loaded "
        f"already | {rest / MIB:.1f} MiB | {rest / added:.0%} |"
    )
    lines.append(f"| **in all (figure 4)** | **{added / MIB:.1f} MiB** | 100% |")
    return "\n".join(lines)


async def measure(bench: Bench, *, with_rows: bool = True) -> list[Row]:
    """Figure 15 (runs no turns: the bench's own Home Assistant only waits meanwhile).

    Also run for figure 4 alone (`with_rows` False): its breakdown by library needs the
    steps, not figure 15's rows.
    """
    steps = await measure_steps(2 if bench.settings.quick else 5)
    bench.raw["imports"] = {"steps": steps, "table": breakdown_table(steps)}
    return rows(steps) if with_rows else []
