"""Figure 14: the event loop's longest stall while the history tool answers.

A Home Assistant of its own (the shared bench's would record every other figure's turns),
with Home Assistant's recorder on a SQLite file, the bench's generated home of 100
entities, and 30 days of their history written through the state machine as Home
Assistant writes it: each entity changes every 30 minutes on average, one temperature
sensor every minute (more rows than the tool reads for one question), a thermostat's
action as an attribute, and an electricity meter's hourly long-term statistics. Then the
tool (tools/history.py, as the agent's tools node calls it) answers each kind of question
over the 30 days while probe.LoopLagProbe, waking every 5 ms, measures how late the loop
runs. --quick: 3 days.
"""

from __future__ import annotations

from datetime import timedelta
import logging
from pathlib import Path
import random
import tempfile
import time
from typing import Any

from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import recorder as recorder_helper
from homeassistant.setup import async_setup_component
from homeassistant.util import dt as dt_util

from .context import Bench
from .home import create_home, home_assistant, setup_base
from .probe import GcPauses, LoopLagProbe
from .report import Row, Stat, judged

_LOGGER = logging.getLogger(__name__)

FIGURE = 14
STALL_TARGET_MS = 50.0
PROBE_INTERVAL = 0.005
DAYS, QUICK_DAYS = 30, 3
# The bench's home: every kind of entity (lights, sensors, thermostats...) in every area.
ENTITIES = 100
MEAN_GAP_MINUTES = 30
CHATTY_GAP_MINUTES = 1
# States handed to the recorder before waiting for it to write them: its queue stays far
# below the backlog at which it stops recording.
BATCH = 5_000
ELECTRICITY = "sensor.bench_electricity_meter"


async def measure(bench: Bench) -> list[Row]:
    """Figure 14's row."""
    days = QUICK_DAYS if bench.settings.quick else DAYS
    size = ENTITIES
    with tempfile.TemporaryDirectory(prefix="lgc-bench-history-") as scratch:
        async with home_assistant() as hass:
            result = await _measure(hass, Path(scratch), days, size)
    bench.raw["history"] = result
    stalls = [question["stall_ms"] for question in result["questions"]]
    stat = Stat.of(stalls)
    worst = max(stalls, default=None)
    slowest = max(result["questions"], key=lambda question: question["answer_ms"])
    return [
        Row(
            figure=FIGURE,
            name=f"history question over {days} days of {size} entities: longest loop stall",
            unit="ms",
            ours=stat,
            core=None,
            target=f"≤ {STALL_TARGET_MS:.0f} ms (max)",
            outcome=judged(None if worst is None else worst <= STALL_TARGET_MS),
            detail=(
                f"max {worst or 0:.1f} ms; {len(stalls)} questions over {result['rows']:,} "
                f"recorded states; slowest answer {slowest['answer_ms']:.0f} ms "
                f"({slowest['ask']})"
            ),
            notes=[
                f"figure 14: the history tool asked {len(stalls)} questions over {days} days "
                f"of {size} entities in Home Assistant's recorder (SQLite); a 5 ms probe "
                f"measures the loop's lateness during each; the core column is empty (Home "
                "Assistant's agent has no history tool)"
            ],
        )
    ]


async def _measure(hass: HomeAssistant, directory: Path, days: int, size: int) -> dict[str, Any]:
    await setup_base(hass)
    entity_ids = create_home(hass, size)
    recorder = await _start_recorder(hass, directory)
    started = time.perf_counter()
    rows = await _write_history(hass, recorder, entity_ids, days)
    rows += await _import_statistics(hass, recorder, days)
    _LOGGER.warning(
        "bench: history: %s states written in %.0f s", f"{rows:,}", time.perf_counter() - started
    )
    questions = [await _one(hass, ask, arguments) for ask, arguments in _questions(hass, days)]
    return {"rows": rows, "days": days, "entities": size, "questions": questions}


async def _start_recorder(hass: HomeAssistant, directory: Path) -> Any:
    """Home Assistant's recorder on a SQLite file, keeping what the bench writes."""
    from homeassistant.components import recorder

    recorder_helper.async_initialize_recorder(hass)
    config = {
        "db_url": f"sqlite:///{directory / 'home-assistant_v2.db'}",
        "commit_interval": 1,
        "auto_purge": False,
        "purge_keep_days": 60,
    }
    if not await async_setup_component(hass, recorder.DOMAIN, {recorder.DOMAIN: config}):
        raise RuntimeError("the recorder did not set up")
    await hass.data[recorder_helper.DATA_RECORDER].db_connected
    instance = recorder.get_instance(hass)
    await instance.async_block_till_done()
    return instance


def _timeline(rng: random.Random, entity_id: str, start: float, end: float) -> list[tuple]:
    """(time, state, extra attributes) of one entity, oldest first."""
    domain = entity_id.partition(".")[0]
    gap = CHATTY_GAP_MINUTES if entity_id.endswith("kitchen_temperature") else MEAN_GAP_MINUTES
    points: list[tuple[float, str, dict[str, Any]]] = []
    moment, value, on = start + rng.uniform(0, 60), 20.0, False
    while moment < end:
        on = not on
        if domain == "sensor":
            value = round(value + rng.uniform(-0.5, 0.5), 1)
            points.append((moment, str(value), {}))
        elif domain == "climate":
            action = {"hvac_action": "heating" if on else "idle", "current_temperature": value}
            points.append((moment, "heat", action))
        else:
            states = {"cover": ("open", "closed"), "lock": ("unlocked", "locked")}
            states |= {"media_player": ("playing", "idle")}
            points.append((moment, states.get(domain, ("on", "off"))[0 if on else 1], {}))
        moment += rng.expovariate(1 / (gap * 60))
    return points


async def _write_history(
    hass: HomeAssistant, recorder: Any, entity_ids: list[str], days: int
) -> int:
    """`days` of every entity's history, written oldest first (the recorder finds a
    period's opening state only among rows as old as its first)."""
    rng = random.Random(14)
    now = dt_util.utcnow().timestamp()
    start = now - days * 86400
    records = [
        (moment, entity_id, state, extra)
        for entity_id in entity_ids
        for moment, state, extra in _timeline(rng, entity_id, start, now - 60)
    ]
    records.sort(key=lambda record: record[0])
    attributes = {
        entity_id: dict(state.attributes)
        for entity_id in entity_ids
        if (state := hass.states.get(entity_id)) is not None
    }
    for index, (moment, entity_id, state, extra) in enumerate(records, 1):
        hass.states.async_set(entity_id, state, attributes[entity_id] | extra, timestamp=moment)
        if index % BATCH == 0:
            await recorder.async_block_till_done()
    await recorder.async_block_till_done()
    return len(records)


async def _import_statistics(hass: HomeAssistant, recorder: Any, days: int) -> int:
    """An electricity meter's hourly long-term statistics over the days."""
    from homeassistant.components.recorder.models import StatisticMeanType
    from homeassistant.components.recorder.statistics import async_import_statistics

    rng = random.Random(41)
    hour = dt_util.utcnow().replace(minute=0, second=0, microsecond=0)
    hours = [hour - timedelta(hours=n) for n in range(days * 24, 0, -1)]
    total, rows = 0.0, []
    for start in hours:
        total += rng.uniform(0.1, 2.5)
        rows.append({"start": start, "state": total, "sum": total})
    metadata = {
        "has_sum": True,
        "mean_type": StatisticMeanType.NONE,
        "name": "Bench electricity meter",
        "source": "recorder",
        "statistic_id": ELECTRICITY,
        "unit_class": "energy",
        "unit_of_measurement": "kWh",
    }
    hass.states.async_set(
        ELECTRICITY, str(round(total, 3)), {"friendly_name": "Bench electricity meter"}
    )
    async_import_statistics(hass, metadata, rows)
    await recorder.async_block_till_done()
    return len(rows)


def _questions(hass: HomeAssistant, days: int) -> list[tuple[str, dict[str, Any]]]:
    """One question of each kind over the whole period, on the entities that fit it."""
    from homeassistant.components.homeassistant.exposed_entities import async_expose_entity

    async_expose_entity(hass, "conversation", ELECTRICITY, True)
    local = dt_util.as_local(dt_util.utcnow())
    start = (local - timedelta(days=days) + timedelta(minutes=5)).strftime("%Y-%m-%d %H:%M")
    middle = (local - timedelta(days=days / 2)).strftime("%Y-%m-%d %H:%M")
    over = {"start": start}
    asked = [
        ("time_in_state", {"name": "Kitchen Light", "ask": "time_in_state", "state": "on"}),
        ("changes", {"name": "Kitchen Motion", "ask": "changes", "state": "on", "limit": 20}),
        ("value_at", {"name": "Kitchen Temperature", "ask": "value_at", "at": middle}),
        ("min_max_mean", {"name": "Living Room Temperature", "ask": "min_max_mean"}),
        ("min_max_mean (cut)", {"name": "Kitchen Temperature", "ask": "min_max_mean"}),
        ("time_in_state (thermostat)", {"name": "Kitchen Thermostat", "ask": "time_in_state"}),
        ("total", {"name": "Bench electricity meter", "ask": "total"}),
    ]
    return [(ask, arguments if ask == "value_at" else arguments | over) for ask, arguments in asked]


async def _one(hass: HomeAssistant, ask: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One question, its answer's time and the longest stall while it was answered."""
    from custom_components.langgraph_conversation.agent.errors import ToolFailure
    from custom_components.langgraph_conversation.tools.history import SPECS
    from custom_components.langgraph_conversation.tools.registry import (
        ToolContext,
        as_langchain_tools,
    )

    context = ToolContext(hass=hass, context=Context(), language="en", timeout=120.0)
    (tool,) = as_langchain_tools(SPECS, context)
    probe = LoopLagProbe(interval=PROBE_INTERVAL)
    collections = GcPauses()
    probe.start()
    collections.start()
    try:
        start = time.perf_counter()
        try:
            answer: Any = await tool.ainvoke(arguments)
        except ToolFailure as failure:
            answer = failure.data
        end = time.perf_counter()
    finally:
        collections.stop()
        await probe.stop()
    measured = {
        "ask": ask,
        "stall_ms": probe.max_lag(start, end) * 1000,
        "answer_ms": (end - start) * 1000,
        # Tells a garbage collector's pause (any thread holds the GIL) from other stalls.
        "longest_gc": collections.longest(start, end + PROBE_INTERVAL * 2),
    }
    _LOGGER.warning("bench: history %s: %s; answer %s", ask, measured, answer)
    return measured | {"answer": answer}
