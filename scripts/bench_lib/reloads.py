"""Figure 12: memory over 50 config entry reloads, in a fresh process per agent.

Every change of an entry's options or agents reloads it: the old runtime is unloaded and a
new one set up. Whatever an unloaded runtime leaves reachable (or out of the garbage
collector's reach: objects `gc.freeze()` moved to the permanent generation are never
collected, cycles included) stays for the life of Home Assistant. The worker sets the entry
up, has one turn, then reloads it 50 times the way an options change does (the entry is
updated; its update listener reloads it) with one turn after each reload. It reports RSS
after gc.collect() after reload 5 and after the last, the objects the garbage collector
keeps frozen, and how many of the unloaded runtimes are still alive (weak references to
each entry's runtime data).
"""

from __future__ import annotations

import contextlib
import gc
from typing import Any
import weakref

from .context import Bench
from .fresh import run_in_fresh_process
from .probe import rss_bytes
from .report import Row, Stat, judged, ratio_of
from .turns import converse

RELOADS = 50
QUICK_RELOADS = 20
FIRST_SAMPLE = 5
GROWTH_TARGET_MB = 10.0
MB = 1024 * 1024
TEXT_TURN = "How warm is it in the kitchen?"


async def reload_task(hass: Any, entry: Any, agent: Any, reloads: int) -> dict[str, Any]:
    """Run in the worker after the entry's setup; the figure's raw values."""
    errors: list[str] = []
    unloaded: list[weakref.ref[Any]] = []
    samples: list[tuple[int, int, int]] = []  # reload, RSS, frozen objects
    first = await converse(hass, None, agent, TEXT_TURN)
    if first.error:
        errors.append(first.error)
    for reload in range(1, reloads + 1):
        # Runtime data that takes no weak reference is not counted.
        with contextlib.suppress(TypeError):
            unloaded.append(weakref.ref(entry.runtime_data.runtime))
        # What an options change does: the entry's update listener reloads it.
        hass.config_entries.async_update_entry(entry, options={"reload": reload})
        await hass.async_block_till_done()
        turned = await converse(hass, None, agent, TEXT_TURN)
        if turned.error and len(errors) < 10:
            errors.append(f"after reload {reload}: {turned.error}")
        if reload in (FIRST_SAMPLE, reloads):
            gc.collect()
            samples.append((reload, rss_bytes(), gc.get_freeze_count()))
    gc.collect()
    alive = sum(ref() is not None for ref in unloaded)
    (_, rss_first, frozen_first), (_, rss_last, frozen_last) = samples[0], samples[-1]
    return {
        "errors": errors,
        "reloads": reloads,
        "samples": samples,
        "growth_bytes": rss_last - rss_first,
        "frozen_growth": frozen_last - frozen_first,
        "unloaded_runtimes_alive": alive,
        "unloaded_runtimes": len(unloaded),
    }


async def measure(bench: Bench) -> list[Row]:
    """Figure 12, one fresh worker per agent."""
    reloads = QUICK_RELOADS if bench.settings.quick else RELOADS
    results = {
        agent: await run_in_fresh_process(bench, agent, "reloads", reloads=reloads)
        for agent in ("ours", "core")
    }
    bench.raw["reloads"] = results
    return rows(results)


def rows(results: dict[str, dict[str, Any]]) -> list[Row]:
    """Figure 12's rows."""

    def value(agent: str, key: str, scale: float = 1.0) -> Stat | None:
        if key not in results[agent]:
            return None
        return Stat.single(results[agent][key] / scale)

    errors = results["ours"].get("errors", [])
    reloads = results["ours"].get("reloads", RELOADS)
    growth_ours, growth_core = value("ours", "growth_bytes", MB), value("core", "growth_bytes", MB)
    frozen = value("ours", "frozen_growth")
    alive = value("ours", "unloaded_runtimes_alive")
    notes = [
        f"figure 12: {reloads} reloads of one entry in a fresh process (an options change "
        "each), one turn after each; RSS after gc.collect(), from /proc (MiB)"
    ]
    if reloads != RELOADS:
        notes.append(f"--quick: figure 12 reloads {reloads} times (the full run: {RELOADS})")
    return [
        Row(
            figure=12,
            name=f"RSS growth from reload {FIRST_SAMPLE} to reload {reloads}",
            unit="MiB",
            ours=growth_ours,
            core=growth_core,
            ratio=ratio_of(growth_ours, growth_core),
            target=f"≤ {GROWTH_TARGET_MB:.0f} MiB",
            outcome="error"
            if errors
            else judged(None if growth_ours is None else growth_ours.p50 <= GROWTH_TARGET_MB),
            detail="; ".join(errors)[:200],
            single=True,
            notes=notes,
        ),
        Row(
            figure=12,
            name=f"objects frozen for good between reload {FIRST_SAMPLE} and {reloads}",
            unit="count",
            ours=frozen,
            core=value("core", "frozen_growth"),
            target="≤ 0",
            outcome=judged(None if frozen is None else frozen.p50 <= 0),
            single=True,
        ),
        Row(
            figure=12,
            name=f"unloaded runtimes still alive after {reloads} reloads",
            unit="count",
            ours=alive,
            core=value("core", "unloaded_runtimes_alive"),
            target="0",
            outcome=judged(None if alive is None else alive.p50 == 0),
            single=True,
        ),
    ]
