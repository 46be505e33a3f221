"""A fresh interpreter for figures 3, 4 and 12: `python -m scripts.bench_lib.worker '<spec>'`.

The integration under test has not been imported when a worker starts, so the config entry
setup pays for its imports as it would at Home Assistant's start. The fake model server
runs in the parent process (at `base_url`): this process holds only Home Assistant, which
keeps its memory figures clean and keeps the server's own event loop away from Home
Assistant's blocking-call detector. The result is one JSON line, "BENCH-RESULT {...}".
"""

from __future__ import annotations

import asyncio
from collections import Counter
import cProfile
import gc
import io
import json
import logging
from pathlib import Path
import pstats
import sys
import time
from typing import Any

from homeassistant import block_async_io
from homeassistant.const import EVENT_HOMEASSISTANT_STARTED
from homeassistant.core import CoreState

from .context import TOOL_TURN_TEXT
from .fresh import RESULT_PREFIX
from .home import (
    ServiceCounter,
    agent_handles,
    core_entry,
    create_home,
    home_assistant,
    our_entry,
    setup_base,
    setup_entry,
)
from .imports import STEPS
from .latency import TEXT_TURN
from .probe import BlockingCallCounter, GcPauses, LoopLagProbe, rss_bytes
from .reloads import reload_task
from .turns import converse


def _entry(hass: Any, spec: dict[str, Any]) -> Any:
    if spec["agent"] == "ours":
        return our_entry(hass, spec["base_url"], {"ours": spec["agent_options"]})
    return core_entry(hass, spec["base_url"])


class SlowCallbacks(logging.Handler):
    """asyncio's debug-mode reports of callbacks that held the loop too long."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep "Executing <...> took N seconds"."""
        message = record.getMessage()
        if message.startswith("Executing"):
            self.messages.append(message[:600])


def _profile_summary(profiler: cProfile.Profile, title: str) -> str:
    buffer = io.StringIO()
    buffer.write(f"# {title}\n\n## by cumulative time\n")
    stats = pstats.Stats(profiler, stream=buffer)
    stats.sort_stats("cumulative").print_stats(60)
    buffer.write("## by own time\n")
    stats.sort_stats("tottime").print_stats(30)
    return buffer.getvalue()


def _packages(modules: set[str]) -> Counter[str]:
    """Module names grouped by package (Home Assistant's by component)."""
    return Counter(
        ".".join(name.split(".")[:3])
        if name.startswith("homeassistant.components.")
        else name.split(".")[0]
        for name in modules
    )


async def fresh_task(spec: dict[str, Any]) -> dict[str, Any]:
    """Figures 3 and/or 4 in this fresh interpreter.

    Figure 3 (spec["setup"]): with Home Assistant's blocking-call detector fully on, the
    entry's setup time and longest loop stall, the stalls of a first text and tool turn and
    of `warm_turns` more, and the detector's reports. With spec["profile"] the setup also
    runs under cProfile and asyncio's debug mode names callbacks that held the loop over
    20 ms (slower: such a run's figures are not the benchmark's).

    Figure 4 (spec["memory"]): RSS before the setup, after `turns_first` turns and after
    `turns_total` turns (conversations of `turns_per_conversation` turns), after
    gc.collect(). Turns of figure 3 count as the first turns.

    Figure 12 (spec["reloads"]): reloads.reload_task after the setup.
    """
    with_setup, memory = bool(spec.get("setup")), spec.get("memory")
    counter = BlockingCallCounter()
    logging.getLogger().addHandler(counter)
    profile = bool(spec.get("profile"))
    slow = SlowCallbacks()
    if profile:
        loop = asyncio.get_running_loop()
        loop.set_debug(True)
        loop.slow_callback_duration = 0.020
        logging.getLogger("asyncio").addHandler(slow)
        logging.getLogger("asyncio").setLevel(logging.WARNING)
    profiler = cProfile.Profile()
    result: dict[str, Any] = {"errors": []}
    errors: list[str] = result["errors"]
    async with home_assistant() as hass:
        if with_setup:
            # As Home Assistant itself runs: the detector on, with every check (the test
            # plugin's import makes it skip some, as under pytest).
            block_async_io._IN_TESTS = False
            block_async_io.enable()
        await setup_base(hass)
        create_home(hass)
        lights = ServiceCounter()
        lights.register(hass)
        base_reports = len(counter.messages)
        entry = _entry(hass, spec)
        await hass.async_block_till_done()
        gc.collect()
        baseline = rss_bytes()
        modules_before = set(sys.modules)
        probe = LoopLagProbe()
        probe.start()
        # Which stalls were the garbage collector's (diagnosis, not a figure).
        pauses = GcPauses()
        pauses.start()
        await asyncio.sleep(0.05)

        # As at Home Assistant's start: the entry sets up while Home Assistant starts, and
        # whatever an integration leaves for "started" runs after the setup is measured.
        hass.set_state(CoreState.starting)
        setup_start = time.perf_counter()
        if profile:
            profiler.enable()
        await setup_entry(hass, entry)
        if profile:
            profiler.disable()
        setup_end = time.perf_counter()
        hass.set_state(CoreState.running)
        hass.bus.async_fire(EVENT_HOMEASSISTANT_STARTED)
        if profile:
            await asyncio.to_thread(
                Path(spec["out"], f"profile-setup-{spec['agent']}.txt").write_text,
                _profile_summary(profiler, f"{spec['agent']}: config entry setup, fresh process"),
            )
        imported = _packages(set(sys.modules) - modules_before)
        # Figure 4's breakdown (imports.memory_breakdown) leaves out the libraries that
        # were loaded before the baseline (numpy: by the bench's own modules).
        result["loaded_before"] = sorted(
            step.label for step in STEPS if step.modules and step.modules[0] in modules_before
        )
        result.update(
            setup_s=setup_end - setup_start,
            setup_stall_ms=probe.max_lag(setup_start, setup_end) * 1000,
            setup_longest_gc=pauses.longest(setup_start, setup_end),
            modules_imported_by_setup=sum(imported.values()),
            modules_by_package=dict(imported.most_common(25)),
            blocking_reports_setup=len(counter.messages) - base_reports,
        )
        agent = agent_handles(hass, entry)[spec["agent"]]
        turns_done = 0

        if with_setup:
            cold_start = time.perf_counter()
            text = await converse(hass, None, agent, TEXT_TURN)
            tool = await converse(hass, None, agent, TOOL_TURN_TEXT)
            cold_end = time.perf_counter()
            errors.extend(f"cold {r.error}" for r in (text, tool) if r.error)
            if len(lights.calls) != 1:
                errors.append(f"the cold tool turn called light services {len(lights.calls)}x")
            warm_start = time.perf_counter()
            warm_walls = []
            for _ in range(spec["warm_turns"]):
                warm = await converse(hass, None, agent, TEXT_TURN)
                warm_walls.append(warm.wall * 1000)
                if warm.error:
                    errors.append(f"warm {warm.error}")
            warm_end = time.perf_counter()
            await asyncio.sleep(0.03)
            turns_done = 2 + spec["warm_turns"]
            result.update(
                cold_turn_stall_ms=probe.max_lag(cold_start, cold_end) * 1000,
                cold_turn_wall_ms=[text.wall * 1000, tool.wall * 1000],
                warm_turn_stall_ms=probe.max_lag(warm_start, warm_end) * 1000,
                cold_turn_longest_gc=pauses.longest(cold_start, cold_end),
                warm_turn_longest_gc=pauses.longest(warm_start, warm_end),
                warm_turn_wall_ms=warm_walls,
                blocking_reports_total=len(counter.messages) - base_reports,
                blocking_reports_base=base_reports,
                blocking_messages=counter.messages[base_reports:][:10],
                slow_callbacks=slow.messages,
            )
        await probe.stop()
        pauses.stop()

        if reloads := spec.get("reloads"):
            reloaded = await reload_task(hass, entry, agent, reloads)
            errors.extend(reloaded.pop("errors"))
            result.update(reloaded)

        if memory:
            first, total = memory["turns_first"], memory["turns_total"]
            per_conversation = memory["turns_per_conversation"]
            samples: list[tuple[int, int]] = []
            conversation_id: str | None = None
            for turn in range(turns_done + 1, total + 1):
                turned = await converse(hass, None, agent, TEXT_TURN, conversation_id)
                conversation_id = None if turn % per_conversation == 0 else turned.conversation_id
                if turned.error and len(errors) < 10:
                    errors.append(turned.error)
                if turn in (first, total) or turn % 100 == 0:
                    gc.collect()
                    samples.append((turn, rss_bytes()))
            at_first = next(rss for turn, rss in samples if turn == first)
            # ...and those never loaded at all (LiteLLM and the OpenAI SDK for an Ollama
            # entry, agent/models/chat.py).
            result["never_loaded"] = sorted(
                step.label
                for step in STEPS
                if step.modules and not any(name in sys.modules for name in step.modules)
            )
            result.update(
                baseline_rss=baseline,
                rss_samples=samples,
                added_bytes=at_first - baseline,
                growth_bytes=samples[-1][1] - at_first,
                turns_first=first,
                turns_total=total,
            )
    return result


def main() -> None:
    """Run the spec and print its result line."""
    spec = json.loads(sys.argv[1])
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    result = asyncio.run(fresh_task(spec))
    print(RESULT_PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
