"""The history tool against a real recorder (the test plugin's, SQLite in memory).

Three days of generated history (seeded) for many entities: doors, heating switches,
thermostats, temperature sensors, an electricity meter with long-term statistics and a
water meter without, and two entities that are not exposed. Each of the five questions is
asked of generated cases and checked against figures this file computes from what it
generated; what the recorder was asked is watched through its own functions (wrapped, so
they still answer), and the tool is driven directly and through a real conversation turn.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
import json
import random
import re
from typing import Any
from unittest.mock import MagicMock, patch

from langchain_core.tools import BaseTool
import litellm
import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry
from pytest_homeassistant_custom_component.components.recorder.common import (
    async_wait_recording_done,
)

from custom_components.langgraph_conversation.agent.errors import ToolFailure
from custom_components.langgraph_conversation.tools.history import SPECS
from custom_components.langgraph_conversation.tools.history_periods import MAX_DAYS
from custom_components.langgraph_conversation.tools.history_reading import MAX_ROWS
from custom_components.langgraph_conversation.tools.registry import ToolContext
from custom_components.langgraph_conversation.tools.schema import sanitize_schema
from custom_components.langgraph_conversation.tools.selection import LeftOut, choose_tools
from fakes import FakeOpenAIServer, ToolCall
from fakes.offline_model import OfflineModelServer
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.components.recorder import Recorder, history, statistics
from homeassistant.components.recorder.models import StatisticMeanType
from homeassistant.const import Platform
from homeassistant.core import Context, HomeAssistant
from homeassistant.setup import async_setup_component
from homeassistant.util import dt as dt_util

from ..conftest import add_test_entry, agent_entity_id
from .conftest import ASSISTANT, bind

HISTORY_TOOL = "home_history"
DAYS = 3
ELECTRICITY = "sensor.electricity_meter"
WATER = "sensor.water_meter"
HIDDEN = ("binary_sensor.vault_door", "sensor.vault_temperature")


@pytest.fixture
def mock_recorder_before_hass(async_setup_recorder_instance: Any) -> None:
    """The recorder's fixtures must be made before Home Assistant's (the plugin asks so)."""


@dataclass
class Followed:
    """One generated entity: its name and the value the tool follows, change by change."""

    entity_id: str
    name: str
    points: list[tuple[float, Any]] = field(default_factory=list)
    numbers: list[tuple[float, Any]] = field(default_factory=list)  # thermostats' room temp


@dataclass
class Home:
    """The generated home: every entity's timeline, and the meter's hourly use."""

    now: datetime
    start: datetime
    entities: dict[str, Followed]
    hourly_use: dict[float, float]  # hour start (UTC timestamp) → kWh

    def of_kind(self, domain: str, word: str = "") -> list[Followed]:
        """The generated entities of a domain whose id holds `word`."""
        return [
            e
            for e in self.entities.values()
            if e.entity_id.startswith(f"{domain}.")
            and word in e.entity_id
            and e.entity_id not in HIDDEN
        ]


def _switching(rng: random.Random, start: float, end: float, on: tuple[int, int]) -> list:
    """Alternating off/on times: on for `on` minutes (range), off for up to six hours."""
    points: list[tuple[float, str]] = [(start, "off")]
    moment = start
    while True:
        moment += rng.uniform(5, 360) * 60
        lasted = rng.uniform(*on) * 60
        if moment + lasted >= end:
            return points
        points += [(moment, "on"), (moment + lasted, "off")]
        moment += lasted


def _readings(rng: random.Random, start: float, end: float, base: float) -> list:
    """A temperature every 5-60 minutes (a random walk, one decimal), sometimes unavailable."""
    points: list[tuple[float, str]] = []
    moment, value = start, base
    while moment < end:
        if rng.random() < 0.03:
            points.append((moment, "unavailable"))
        else:
            value = round(value + rng.uniform(-0.8, 0.8), 1)
            if not points or points[-1][1] != str(value):
                points.append((moment, str(value)))
        moment += rng.uniform(5, 60) * 60
    return points


def _thermostat(rng: random.Random, start: float, end: float) -> tuple[list, list]:
    """(time, hvac_action) and (time, room temperature) updates of one thermostat; some
    updates change the temperature only."""
    actions: list[tuple[float, str]] = []
    temperatures: list[tuple[float, float]] = []
    moment, action, temperature = start, "idle", 20.0
    while moment < end:
        if rng.random() < 0.5 or not actions:
            action = "heating" if action == "idle" else "idle"
        temperature = round(temperature + rng.uniform(-0.5, 0.5), 1)
        actions.append((moment, action))
        temperatures.append((moment, temperature))
        moment += rng.uniform(10, 120) * 60
    return actions, temperatures


def _meter(rng: random.Random, start: float, end: float) -> list[tuple[float, str]]:
    """A water meter's readings (m³), rising, reset to zero once."""
    points, moment, reading = [], start, 812.0
    reset_at = start + (end - start) * rng.uniform(0.3, 0.7)
    while moment < end:
        reading = 0.0 if moment >= reset_at > moment - 3600 else reading
        reading = round(reading + rng.uniform(0, 0.05), 3)
        points.append((moment, str(reading)))
        moment += rng.uniform(20, 90) * 60
    return points


def _generate(rng: random.Random, now: datetime) -> tuple[dict[str, Followed], list[tuple]]:
    """Every entity's timeline and the records that make it: (time, entity, state, attrs)."""
    start, end = (now - timedelta(days=DAYS)).timestamp(), (now - timedelta(minutes=5)).timestamp()
    followed: dict[str, Followed] = {}
    records: list[tuple[float, str, str, dict[str, Any]]] = []

    def add(entity_id: str, name: str, points: list, attributes: dict[str, Any]) -> None:
        followed[entity_id] = Followed(entity_id, name, points)
        for moment, state in points:
            records.append((moment, entity_id, state, {"friendly_name": name, **attributes}))

    offset = iter(rng.uniform(0, 60) for _ in range(100))
    for place in ("front", "back", "garage", "patio", "cellar", "vault"):
        door = {"device_class": "door"}
        points = _switching(rng, start + next(offset), end, (1, 30))
        add(f"binary_sensor.{place}_door", f"{place.title()} door", points, door)
    for room in ("living_room", "bedroom", "office"):
        points = _switching(rng, start + next(offset), end, (10, 150))
        add(f"switch.{room}_heating", f"{room.replace('_', ' ').capitalize()} heating", points, {})
    for place, base in (("kitchen", 21), ("bedroom", 18), ("outdoor", 4), ("vault", 12)):
        unit = {"unit_of_measurement": "°C", "device_class": "temperature"}
        points = _readings(rng, start + next(offset), end, base)
        add(f"sensor.{place}_temperature", f"{place.title()} temperature", points, unit)
    for room in ("hall", "kids_room"):
        entity_id, name = (
            f"climate.{room}_thermostat",
            f"{room.replace('_', ' ').title()} thermostat",
        )
        actions, temperatures = _thermostat(rng, start + next(offset), end)
        followed[entity_id] = Followed(entity_id, name, actions, temperatures)
        for (moment, action), (_, temperature) in zip(actions, temperatures, strict=True):
            attributes = {"friendly_name": name, "hvac_action": action, "temperature": 21}
            attributes["current_temperature"] = temperature
            records.append((moment, entity_id, "heat", attributes))
    water = {"unit_of_measurement": "m³", "device_class": "water"}
    add(WATER, "Water meter", _meter(rng, start + next(offset), end), water)
    energy = {"unit_of_measurement": "kWh", "device_class": "energy"}
    add(ELECTRICITY, "Electricity meter", [(start + next(offset), "5000.0")], energy)
    return followed, sorted(records, key=lambda record: record[0])


async def _import_hourly_use(hass: HomeAssistant, rng: random.Random, now: datetime) -> dict:
    """The electricity meter's long-term statistics: one row per complete hour."""
    hour = (now - timedelta(days=DAYS)).replace(minute=0, second=0, microsecond=0)
    last = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    use: dict[float, float] = {}
    rows, total = [], 0.0
    while hour <= last:
        kwh = round(rng.uniform(0.1, 2.5), 3)
        total += kwh
        use[hour.timestamp()] = kwh
        rows.append({"start": hour, "state": 5000 + total, "sum": total})
        hour += timedelta(hours=1)
    metadata = {
        "has_sum": True,
        "mean_type": StatisticMeanType.NONE,
        "name": "Electricity meter",
        "source": "recorder",
        "statistic_id": ELECTRICITY,
        "unit_class": "energy",
        "unit_of_measurement": "kWh",
    }
    statistics.async_import_statistics(hass, metadata, rows)
    return use


async def _midday(hass: HomeAssistant) -> datetime:
    """The home's clock set near midday, whenever the test runs: "today" then never starts
    between building the home and asking (a fixed-offset zone, UTC-11 to UTC+12). Now."""
    now = dt_util.utcnow()
    offset = 12 - now.hour
    await hass.config.async_set_time_zone(
        f"Etc/GMT-{offset}" if offset >= 0 else f"Etc/GMT+{-offset}"
    )
    return now


@pytest.fixture
async def home(hass: HomeAssistant, recorder_mock: Recorder) -> Home:
    """The generated history, recorded oldest first (the recorder reads a period's opening
    state only from rows at least as old as its first), and everything exposed but the
    vault."""
    rng = random.Random(26)
    now = await _midday(hass)
    followed, records = _generate(rng, now)
    for moment, entity_id, state, attributes in records:
        hass.states.async_set(entity_id, state, attributes, timestamp=moment)
    use = await _import_hourly_use(hass, rng, now)
    await async_wait_recording_done(hass)
    assert await async_setup_component(hass, "homeassistant", {})
    for entity_id in followed:
        async_expose_entity(hass, ASSISTANT, entity_id, entity_id not in HIDDEN)
    return Home(now, now - timedelta(days=DAYS), followed, use)


# -- figures computed from the generated timelines -------------------------------------------


def _held(points: list[tuple[float, Any]], start: float, end: float) -> list[tuple]:
    """(value, begin, end) within [start, end], equal neighbours joined."""
    found: list[tuple[Any, float, float]] = []
    for index, (moment, value) in enumerate(points):
        following = points[index + 1][0] if index + 1 < len(points) else end
        begin, finish = max(moment, start), min(following, end)
        if finish <= begin:
            continue
        if found and found[-1][0] == value:
            found[-1] = (value, found[-1][1], finish)
        else:
            found.append((value, begin, finish))
    return found


def _local(moment: float | datetime) -> str:
    """How the tool writes a time: local, to the minute."""
    if not isinstance(moment, datetime):
        moment = dt_util.utc_from_timestamp(moment)
    return dt_util.as_local(moment).strftime("%a %Y-%m-%d %H:%M")


def _argument(moment: datetime) -> str:
    """A local time as a model sends it."""
    return dt_util.as_local(moment).strftime("%Y-%m-%d %H:%M")


def _seconds(spoken: str) -> float:
    """'1 d 3 h 12 min' or '40 s' back to seconds."""
    units = {"d": 86400, "h": 3600, "min": 60, "s": 1}
    parts = re.findall(r"(\d+) (d|h|min|s)\b", spoken)
    assert parts, spoken
    assert " ".join(f"{n} {u}" for n, u in parts) == spoken
    return sum(int(n) * units[u] for n, u in parts)


def _minute(rng: random.Random, start: datetime, end: datetime) -> datetime:
    """A random whole local minute between two moments."""
    moment = start + (end - start) * rng.random()
    return dt_util.as_local(moment).replace(second=0, microsecond=0)


def _today(now: datetime) -> tuple[float, float]:
    return dt_util.start_of_local_day(dt_util.as_local(now)).timestamp(), now.timestamp()


# -- driving the tool -------------------------------------------------------------------------


def _tool(hass: HomeAssistant) -> BaseTool:
    return bind(hass, SPECS)[HISTORY_TOOL]


async def _ask(hass: HomeAssistant, **arguments: Any) -> dict[str, Any]:
    return await _tool(hass).ainvoke(arguments)


async def _refused(hass: HomeAssistant, **arguments: Any) -> dict[str, Any]:
    with pytest.raises(ToolFailure) as caught:
        await _ask(hass, **arguments)
    return caught.value.data


RECORDER_READS = {
    (history, "state_changes_during_period"): 3,
    (history, "get_significant_states"): 3,
    (history, "get_last_state_changes"): 2,
    (statistics, "statistics_during_period"): 3,
}


@contextmanager
def watching_the_recorder() -> Iterator[list[str]]:
    """The entity ids the recorder's own reading functions are asked for (each still
    answers: the spy wraps the real function)."""
    asked: list[str] = []
    spies: list[MagicMock] = []
    with patch.object(statistics, "get_metadata", wraps=statistics.get_metadata) as metadata:
        patches = [
            patch.object(module, name, wraps=getattr(module, name))
            for module, name in RECORDER_READS
        ]
        for started in patches:
            spies.append(started.start())
        try:
            yield asked
        finally:
            for started in patches:
                started.stop()
            for spy, index in zip(spies, RECORDER_READS.values(), strict=True):
                for call in spy.call_args_list:
                    named = call.args[index] if len(call.args) > index else None
                    asked += [named] if isinstance(named, str) else list(named or ())
            for call in metadata.call_args_list:
                asked += list(call.kwargs.get("statistic_ids") or ())


# -- the tests ----------------------------------------------------------------------------------


def test_spec_is_provider_safe() -> None:
    """One tool, a schema every provider accepts, in its own category, needing the recorder."""
    (spec,) = SPECS
    assert sanitize_schema(spec.parameters) == spec.parameters
    assert (spec.name, spec.category, spec.integrations) == (
        HISTORY_TOOL,
        "history",
        frozenset({"recorder"}),
    )


async def test_time_in_state_today(hass: HomeAssistant, home: Home) -> None:
    """ "How long was the heating on today?": total time on and how often, for every
    heating switch and door, equal to the timelines'."""
    start, end = _today(home.now)
    for entity in [*home.of_kind("switch", "heating"), *home.of_kind("binary_sensor", "door")]:
        on = [s for s in _held(entity.points, start, end) if s[0] == "on"]
        result = await _ask(hass, name=entity.name, ask="time_in_state", state="on", period="today")
        assert result["entity"] == entity.name
        assert result["period"].startswith(_local(start))
        assert result["times"] == len(on), entity.name
        assert abs(_seconds(result["total"]) - sum(e - b for _, b, e in on)) <= 30, entity.name
        if on:
            assert result["last"].startswith(_local(on[-1][1]))
            longest = max(e - b for _, b, e in on)
            assert abs(_seconds(result["longest"]) - longest) <= 30


async def test_time_in_state_follows_what_a_thermostat_did(hass: HomeAssistant, home: Home) -> None:
    """A thermostat stays in "heat" mode; the time it was heating comes from its
    hvac_action, "on" meaning heating, over explicit local start and end times."""
    rng = random.Random(1)
    for entity in home.of_kind("climate"):
        start = _minute(rng, home.start, home.now - timedelta(days=1))
        end = start + timedelta(hours=rng.randint(2, 30))
        heating = [
            s for s in _held(entity.points, start.timestamp(), end.timestamp()) if s[0] == "heating"
        ]
        result = await _ask(
            hass,
            name=entity.name,
            ask="time_in_state",
            state="on",
            start=_argument(start),
            end=_argument(end),
        )
        assert result["of"] == "hvac_action"
        assert result["times"] == len(heating), entity.name
        assert abs(_seconds(result["total"]) - sum(e - b for _, b, e in heating)) <= 30
        assert result.get("counted", ["heating"]) == ["heating"]


async def test_time_in_every_state_without_one_asked(hass: HomeAssistant, home: Home) -> None:
    """Without a state, each value's time and count over the period."""
    entity = home.of_kind("binary_sensor", "garage")[0]
    end = dt_util.as_local(home.now - timedelta(minutes=30)).replace(second=0, microsecond=0)
    start = end - timedelta(hours=36)
    held = _held(entity.points, start.timestamp(), end.timestamp())
    result = await _ask(
        hass, name=entity.name, ask="time_in_state", start=_argument(start), end=_argument(end)
    )
    assert set(result["states"]) == {value for value, _, _ in held}
    for value, figures in result["states"].items():
        mine = [s for s in held if s[0] == value]
        assert figures["times"] == len(mine)
        assert abs(_seconds(figures["total"]) - sum(e - b for _, b, e in mine)) <= 30


async def test_last_changes_into_a_state(hass: HomeAssistant, home: Home) -> None:
    """ "When did the garage door open?": the newest openings, newest first, each with how
    long it stayed open; `limit` as models send it (3.0, "2")."""
    for entity, limit in zip(
        home.of_kind("binary_sensor", "door"), (3.0, "2", 5, 1, 4), strict=False
    ):
        openings = [(t, v) for t, v in entity.points if v == "on"]
        expected = openings[::-1][: int(float(limit))]
        result = await _ask(hass, name=entity.name, ask="changes", state="open", limit=limit)
        assert result["device_class"] == "door"
        assert [c["at"] for c in result["changes"]] == [_local(t) for t, _ in expected]
        assert {c["to"] for c in result["changes"]} <= {"on"}
        for change, (moment, _) in zip(result["changes"], expected, strict=True):
            closed = next(t for t, v in entity.points if t > moment)
            assert abs(_seconds(change["for"]) - (closed - moment)) <= 30
        assert result["now"] == "off"


async def test_last_changes_of_anything_today(hass: HomeAssistant, home: Home) -> None:
    """ "Did anyone open the front door today?": every change today, or a note saying there
    was none."""
    entity = home.of_kind("binary_sensor", "front")[0]
    start, end = _today(home.now)
    today = [(t, v) for t, v in entity.points if start < t < end]
    result = await _ask(hass, name=entity.name, period="today", limit=20)
    assert [c["at"] for c in result["changes"]] == [_local(t) for t, _ in today[::-1][:20]]
    assert [c["to"] for c in result["changes"]] == [v for _, v in today[::-1][:20]]
    if not today:
        assert result["note"] == "No change in that period."


async def test_value_at_a_time(hass: HomeAssistant, home: Home) -> None:
    """ "What was the temperature at 7?": the value in force at random times, as full local
    times and as a time of day alone (its latest occurrence)."""
    rng = random.Random(7)
    for entity in home.of_kind("sensor", "temperature"):
        for _ in range(4):
            at = _minute(rng, home.start + timedelta(hours=1), home.now)
            result = await _ask(hass, name=entity.name, at=_argument(at))
            expected = [v for t, v in entity.points if t <= at.timestamp()][-1]
            assert (result["value"], result["unit"], result["at"]) == (
                expected,
                "°C",
                _local(at),
            ), entity.name
    entity = home.of_kind("sensor", "kitchen")[0]
    clock = dt_util.as_local(home.now - timedelta(hours=5)).replace(second=0, microsecond=0)
    result = await _ask(hass, name=entity.name, ask="value_at", at=f"{clock:%H:%M}")
    expected = [v for t, v in entity.points if t <= clock.timestamp()][-1]
    assert (result["value"], result["at"]) == (expected, _local(clock))


async def test_value_at_of_a_thermostat_says_what_it_did(hass: HomeAssistant, home: Home) -> None:
    """A thermostat's value at a time: its mode, what it was doing and the room's temperature."""
    entity = home.of_kind("climate", "hall")[0]
    at = dt_util.as_local(home.now - timedelta(hours=30)).replace(second=0, microsecond=0)
    result = await _ask(hass, name=entity.name, at=_argument(at))
    action = [v for t, v in entity.points if t <= at.timestamp()][-1]
    temperature = [v for t, v in entity.numbers if t <= at.timestamp()][-1]
    assert (result["value"], result["hvac_action"], result["current_temperature"]) == (
        "heat",
        action,
        temperature,
    )


async def test_min_max_mean_of_a_number(hass: HomeAssistant, home: Home) -> None:
    """Lowest and highest with when they began, and the time-weighted mean, over random
    periods; time without a number (unavailable) does not count."""
    rng = random.Random(3)
    cases = [(e, e.points) for e in home.of_kind("sensor", "temperature")]
    cases += [(e, e.numbers) for e in home.of_kind("climate")]
    for entity, points in cases:
        start = _minute(rng, home.start + timedelta(hours=1), home.now - timedelta(hours=8))
        end = start + timedelta(hours=rng.randint(3, 40))
        end = min(end, dt_util.as_local(home.now).replace(second=0, microsecond=0))
        held = [
            (float(v), b, e)
            for v, b, e in _held(points, start.timestamp(), end.timestamp())
            if v != "unavailable"
        ]
        low = min(held, key=lambda s: s[0])
        high = max(held, key=lambda s: s[0])
        mean = sum(v * (e - b) for v, b, e in held) / sum(e - b for _, b, e in held)
        result = await _ask(
            hass, name=entity.name, ask="min_max_mean", start=_argument(start), end=_argument(end)
        )
        assert (result["min"], result["max"]) == (low[0], high[0]), entity.name
        assert (result["min_at"], result["max_at"]) == (_local(low[1]), _local(high[1]))
        assert result["mean"] == pytest.approx(mean, abs=0.006)
        assert result["unit"] == "°C"


async def test_total_energy_from_long_term_statistics(hass: HomeAssistant, home: Home) -> None:
    """ "How much energy did we use yesterday?": the sum of yesterday's hours from the
    statistics, in the statistics' unit; today's complete hours likewise."""
    today = dt_util.start_of_local_day(dt_util.as_local(home.now))
    yesterday = dt_util.start_of_local_day(today.date() - timedelta(days=1))
    used = sum(
        kwh
        for hour, kwh in home.hourly_use.items()
        if yesterday.timestamp() <= hour < today.timestamp()
    )
    result = await _ask(hass, name="Electricity meter", ask="total", period="yesterday")
    assert (result["total"], result["unit"]) == (pytest.approx(used, abs=0.006), "kWh")
    assert result["counted"] == f"{_local(yesterday)} to {_local(today)}"
    used_today = sum(kwh for hour, kwh in home.hourly_use.items() if hour >= today.timestamp())
    result = await _ask(hass, name="Electricity meter", ask="energy", period="today")
    assert result["total"] == pytest.approx(used_today, abs=0.006)


async def test_total_of_a_meter_without_statistics(hass: HomeAssistant, home: Home) -> None:
    """A meter the recorder keeps no statistics for is summed from its states; a reset
    counts what the meter shows after it."""
    entity = home.entities[WATER]
    start, end = home.start + timedelta(hours=2), home.now - timedelta(minutes=10)
    start = dt_util.as_local(start).replace(second=0, microsecond=0)
    end = dt_util.as_local(end).replace(second=0, microsecond=0)
    values = [float(v) for v, _, _ in _held(entity.points, start.timestamp(), end.timestamp())]
    used = sum(b - a if b >= a else b for a, b in pairwise(values))
    result = await _ask(
        hass, name="Water meter", ask="total", start=_argument(start), end=_argument(end)
    )
    assert (result["total"], result["unit"], result["source"]) == (
        pytest.approx(used, abs=0.006),
        "m³",
        "recorded states",
    )


async def test_a_question_reads_at_most_max_rows(hass: HomeAssistant, home: Home) -> None:
    """A sensor with more changes in the period than one question reads: the figures cover
    the first MAX_ROWS and say where they end; once the recorder keeps hourly statistics
    for it, those answer for the whole period instead."""
    rng = random.Random(50)
    entity_id, name = "sensor.busy_temperature", "Busy temperature"
    first = home.now - timedelta(days=2)
    points: list[tuple[float, str]] = []
    moment, value = first.timestamp(), 20.0
    while len(points) < MAX_ROWS + 300:
        value = round(value + rng.choice((-0.1, 0.1)), 1)
        points.append((moment, str(value)))
        moment += rng.uniform(20, 40)
    attributes = {"friendly_name": name, "unit_of_measurement": "°C"}
    for moment, value in points:
        hass.states.async_set(entity_id, value, attributes, timestamp=moment)
    await async_wait_recording_done(hass)
    async_expose_entity(hass, ASSISTANT, entity_id, True)
    start = _argument(first - timedelta(minutes=5))

    result = await _ask(hass, name=name, ask="min_max_mean", start=start)
    cut_at = points[MAX_ROWS][0]
    held = [(float(v), b, e) for v, b, e in _held(points[:MAX_ROWS], first.timestamp(), cut_at)]
    assert result["cut"] == (
        f"Only the first {MAX_ROWS:,} records were read: figures end at {_local(cut_at)}."
    )
    assert result["recorded_from"] == _local(first)
    assert (result["min"], result["max"]) == (min(held)[0], max(held)[0])
    mean = sum(v * (e - b) for v, b, e in held) / sum(e - b for _, b, e in held)
    assert result["mean"] == pytest.approx(mean, abs=0.006)

    hours = [
        first.replace(minute=0, second=0, microsecond=0) + timedelta(hours=n) for n in range(1, 47)
    ]
    rows = []
    for hour in hours:
        low = round(rng.uniform(15, 20), 1)
        rows.append({"start": hour, "min": low, "max": low + 3, "mean": low + 1.5})
    metadata = {
        "has_sum": False,
        "mean_type": StatisticMeanType.ARITHMETIC,
        "name": name,
        "source": "recorder",
        "statistic_id": entity_id,
        "unit_class": "temperature",
        "unit_of_measurement": "°C",
    }
    statistics.async_import_statistics(hass, metadata, rows)
    await async_wait_recording_done(hass)
    result = await _ask(hass, name=name, ask="min_max_mean", start=start)
    assert result["source"] == "hourly long-term statistics"
    assert "cut" not in result
    assert (result["min"], result["max"]) == (
        min(row["min"] for row in rows),
        pytest.approx(max(row["max"] for row in rows), abs=0.006),
    )
    assert result["mean"] == pytest.approx(sum(row["mean"] for row in rows) / len(rows), abs=0.006)


async def test_an_unexposed_entity_is_never_read(hass: HomeAssistant, home: Home) -> None:
    """Every ask about the vault is refused as not exposed, and the recorder is never asked
    about it; questions about exposed entities ask for those alone."""
    asks = [
        {"ask": "changes"},
        {"ask": "time_in_state", "state": "on"},
        {"ask": "value_at", "at": "07:00"},
        {"ask": "min_max_mean"},
        {"ask": "total"},
    ]
    with watching_the_recorder() as asked:
        for entity_id in HIDDEN:
            for arguments in asks:
                error = await _refused(hass, name=home.entities[entity_id].name, **arguments)
                assert error["error"] == "not_exposed"
                # By entity id: refused too (Home Assistant's matcher may not know the id).
                error = await _refused(hass, name=entity_id, **arguments)
                assert error["error"] in ("not_exposed", "no_match")
        for arguments in asks[:3]:
            await _ask(hass, name="Kitchen temperature", **arguments)
        await _ask(hass, name="Electricity meter", ask="total")
    assert asked
    assert set(asked) == {"sensor.kitchen_temperature", ELECTRICITY}


@pytest.mark.parametrize("recorder_config", [{"exclude": {"entities": ["sensor.private_power"]}}])
async def test_an_entity_the_recorder_excludes(
    hass: HomeAssistant, recorder_mock: Recorder
) -> None:
    """An exposed entity the recorder does not record is said to have no history."""
    assert await async_setup_component(hass, "homeassistant", {})
    hass.states.async_set("sensor.private_power", "3", {"friendly_name": "Private power"})
    async_expose_entity(hass, ASSISTANT, "sensor.private_power", True)
    with watching_the_recorder() as asked:
        error = await _refused(hass, name="Private power")
    assert error["error"] == "not_recorded"
    assert asked == []


async def test_bad_arguments_get_sentences_the_model_can_act_on(
    hass: HomeAssistant, home: Home
) -> None:
    """Unknown asks and periods, times that are none, empty periods, a missing time or
    name: each a clear error; a start beyond the last 31 days is cut and said so."""
    door = "Front door"
    cases = {
        "invalid_ask": {"name": door, "ask": "forecast"},
        "invalid_period": {"name": door, "ask": "time_in_state", "period": "last_decade"},
        "invalid_time": {"name": door, "at": "quarter past never"},
        "invalid_limit": {"name": door, "limit": "several"},
        "invalid_arguments": {"name": door, "ask": "value_at"},
    }
    for error, arguments in cases.items():
        refused = await _refused(hass, **arguments)
        assert refused["error"] == error, arguments
        assert refused["error_text"], arguments
    refused = await _refused(hass, ask="changes")
    assert refused["error"] == "invalid_arguments"
    too_old = _argument(home.now - timedelta(days=MAX_DAYS + 1))
    refused = await _refused(hass, name=door, at=too_old)
    assert refused["error"] == "invalid_time"
    assert refused["error_text"].endswith(f"is not within the last {MAX_DAYS} days.")
    later, earlier = (
        _argument(home.now - timedelta(hours=1)),
        _argument(home.now - timedelta(hours=2)),
    )
    refused = await _refused(hass, name=door, ask="time_in_state", start=later, end=earlier)
    assert refused["error"] == "invalid_period"
    long_ago = _argument(home.now - timedelta(days=60))
    result = await _ask(hass, name=door, ask="time_in_state", start=long_ago)
    assert result["note"] == "Cut to the last 31 days and to now."
    assert result["period"].startswith(_local(home.now - timedelta(days=MAX_DAYS))[:-6])
    assert result["recorded_from"] == _local(home.entities["binary_sensor.front_door"].points[0][0])


async def test_arguments_of_any_type(hass: HomeAssistant, home: Home) -> None:
    """Models send numbers for times, lists for words and booleans for states: a number is
    read as its text, a list or an object as not given."""
    entity = home.of_kind("sensor", "kitchen")[0]
    result = await _ask(hass, name=entity.name, at=7)
    seven = dt_util.as_local(home.now).replace(hour=7, minute=0, second=0, microsecond=0)
    if seven > dt_util.as_local(dt_util.utcnow()):
        seven -= timedelta(days=1)
    expected = [v for t, v in entity.points if t <= seven.timestamp()][-1]
    assert (result["at"], result["value"]) == (_local(seven), expected)
    result = await _ask(hass, name=entity.name, ask="min_max_mean", period=["today"])
    assert result["period"].startswith(_local(dt_util.start_of_local_day()))
    door = home.of_kind("binary_sensor", "garage")[0]
    result = await _ask(hass, name=door.name, ask="time_in_state", state=True, period="today")
    if result["times"]:
        assert result["counted"] == ["on"]  # True stands for "on"
    else:
        assert "on" not in result["seen"]
    refused = await _refused(hass, name=door.name, ask=5)
    assert refused["error"] == "invalid_ask"


async def test_offered_where_the_recorder_runs_and_something_is_exposed(
    hass: HomeAssistant, home: Home
) -> None:
    """With the recorder loaded and the category chosen, the tool is offered; with nothing
    exposed it is left out for that reason."""
    context = ToolContext(hass=hass, context=Context(), language="en", assistant=ASSISTANT)
    choice = choose_tools(context, None, ["history"], "")
    assert [tool.name for tool in choice.own_tools] == [HISTORY_TOOL]
    for entity_id in home.entities:
        async_expose_entity(hass, ASSISTANT, entity_id, False)
    choice = choose_tools(context, None, ["history"], "")
    assert choice.left_out[HISTORY_TOOL] is LeftOut.NOTHING_EXPOSED


async def test_heating_question_in_a_conversation_turn(
    hass: HomeAssistant,
    home: Home,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
) -> None:
    """A new agent (history chosen by default) offers the tool in a real turn; the model's
    call reaches the recorder and the model gets the answer back: the right figures in at
    most 200 tokens."""
    entity = home.entities["switch.living_room_heating"]
    start, end = _today(home.now)
    on = [s for s in _held(entity.points, start, end) if s[0] == "on"]
    arguments = {
        "name": "Living room heating",
        "ask": "time_in_state",
        "state": "on",
        "period": "today",
    }
    openai_server.add_tool_calls([ToolCall(HISTORY_TOOL, arguments)])
    openai_server.add_text("The heating was on for a while.")
    result = await conversation.async_converse(
        hass,
        "How long was the heating in the living room on today?",
        None,
        Context(),
        agent_id=agent_entity_id(hass, setup_integration),
    )
    assert result.response.speech["plain"]["speech"] == "The heating was on for a while."
    offered = {tool["function"]["name"] for tool in openai_server.requests[0]["tools"]}
    assert HISTORY_TOOL in offered
    tool_message = openai_server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    answer = json.loads(tool_message["content"])
    assert answer["entity"] == "Living room heating"
    assert answer["times"] == len(on)
    assert abs(_seconds(answer["total"]) - sum(e - b for _, b, e in on)) <= 30
    assert litellm.token_counter(model="gpt-4o", text=tool_message["content"]) <= 200


async def test_the_offline_stand_in_answers_a_history_question(
    hass: HomeAssistant, home: Home, agent_options: dict[str, Any], socket_enabled: None
) -> None:
    """scripts/develop --offline-model: the scripted stand-in asks the history tool and
    says its figures (the recorder's, for the generated heating)."""
    entity = home.entities["switch.living_room_heating"]
    start, end = _today(home.now)
    on = [s for s in _held(entity.points, start, end) if s[0] == "on"]
    async with OfflineModelServer() as server:
        entry = add_test_entry(hass, server.api_base, agent_options)
        assert await async_setup_component(hass, "conversation", {})
        assert await async_setup_component(hass, "intent", {})
        assert await hass.config_entries.async_setup(entry.entry_id)
        await hass.async_block_till_done()
        result = await conversation.async_converse(
            hass,
            "How long was the living room heating on today?",
            None,
            Context(),
            agent_id=agent_entity_id(hass, entry),
        )
        speech = result.response.speech["plain"]["speech"]
        assert speech.startswith("Living room heating was on for "), speech
        assert f" in all, {len(on)} times (" in speech, speech
        assert await hass.config_entries.async_unload(entry.entry_id)


async def test_the_develop_demo_history_through_the_offline_stand_in(
    hass: HomeAssistant,
    recorder_mock: Recorder,
    agent_options: dict[str, Any],
    socket_enabled: None,
) -> None:
    """What `scripts/develop --offline-model` sets up: Home Assistant's demo switches with
    the recorder on, and the stand-in as the model. Switched off and on again, the demo's
    "Decorative Lights" were on three times today; the stand-in's question reaches the
    history tool and its answer says so."""
    await _midday(hass)
    assert await async_setup_component(hass, "homeassistant", {})
    with patch(
        "homeassistant.components.demo.COMPONENTS_WITH_CONFIG_ENTRY_DEMO_PLATFORM",
        [Platform.SWITCH],
    ):
        assert await async_setup_component(hass, "demo", {})
        await hass.async_block_till_done()
    lights = "switch.decorative_lights"
    assert hass.states.get(lights).state == "on"
    for service in ("turn_off", "turn_on", "turn_off", "turn_on"):
        await hass.services.async_call("switch", service, {"entity_id": lights}, blocking=True)
    await async_wait_recording_done(hass)
    async with OfflineModelServer() as server:
        entry = add_test_entry(hass, server.api_base, agent_options)
        assert await async_setup_component(hass, "conversation", {})
        assert await hass.config_entries.async_setup(entry.entry_id)
        await hass.async_block_till_done()
        result = await conversation.async_converse(
            hass,
            "How long were the decorative lights on today?",
            None,
            Context(),
            agent_id=agent_entity_id(hass, entry),
        )
        assert await hass.config_entries.async_unload(entry.entry_id)
    speech = result.response.speech["plain"]["speech"]
    assert speech.startswith("Decorative Lights was on for "), speech
    assert " in all, 3 times (" in speech, speech
