"""What the history tool asks Home Assistant's recorder, and the few figures it makes of it.

Everything here runs in the recorder's own executor (history.py hands it there), never on
the event loop: the recorder's functions are synchronous and read the database. Only the
recorder's public functions are called (`recorder.history`, `recorder.statistics`), which
is why the tool works on every database the recorder supports. Reading is bounded: a
period is read a day at a time and stops after MAX_ROWS rows, saying where it stopped.
Each function returns plain figures (timestamps, seconds, numbers); history.py words them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
import math
from typing import Any

from homeassistant.core import HomeAssistant, State

# Rows one question may read, whatever its period: enough for a month of a door or a
# thermostat, a few days of a chatty sensor.
MAX_ROWS = 5_000
# A period is read in pieces this long, so no single query returns an unbounded result.
CHUNK = timedelta(days=1)
# What the tool follows of a row: its state, or one attribute (a thermostat's hvac_action
# says when it heated; its state only says the mode it was left in).
STATE = "state"


def value_of(row: State, tracked: str) -> Any:
    """The tracked value of a recorded row."""
    return row.state if tracked == STATE else row.attributes.get(tracked)


def number(value: Any) -> float | None:
    """A recorded value as a number, if it is one (states are text: "21.5", "unavailable")."""
    if isinstance(value, bool):
        return None
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def _read(
    hass: HomeAssistant,
    entity_id: str,
    period: tuple[datetime, datetime],
    *,
    tracked: str,
    with_start_state: bool,
    limit: int,
) -> list[State]:
    """One piece of an entity's history, oldest first; the state at the period's start
    first when asked and known. An attribute is followed through every recorded update
    (the state-change query skips updates that change attributes only)."""
    # Imported here: the recorder is loaded wherever this tool is offered, and the
    # integration's own import must not pull in the recorder (SQLAlchemy) everywhere.
    from homeassistant.components.recorder import history

    start, end = period
    if tracked == STATE:
        found = history.state_changes_during_period(
            hass,
            start,
            end,
            entity_id,
            no_attributes=True,
            limit=limit,
            include_start_time_state=with_start_state,
        )
    else:
        found = history.get_significant_states(
            hass,
            start,
            end,
            [entity_id],
            include_start_time_state=with_start_state,
            significant_changes_only=False,
        )
    return [row for row in found.get(entity_id, []) if isinstance(row, State)]


@dataclass(slots=True)
class Rows:
    """The rows of a period, oldest first, and where reading stopped if it was cut."""

    rows: list[State] = field(default_factory=list)
    cut_at: float | None = None


def read_forward(
    hass: HomeAssistant, entity_id: str, period: tuple[datetime, datetime], tracked: str
) -> Rows:
    """The entity's rows over the period, the state at its start first; at most MAX_ROWS
    (then `cut_at` is the time of the first row left unread)."""
    start, end = period
    result = Rows()
    chunk_start = start
    while chunk_start < end:
        chunk_end = min(chunk_start + CHUNK, end)
        result.rows += _read(
            hass,
            entity_id,
            (chunk_start, chunk_end),
            tracked=tracked,
            with_start_state=chunk_start == start,
            limit=MAX_ROWS + 1 - len(result.rows),
        )
        if len(result.rows) > MAX_ROWS:
            result.cut_at = result.rows[MAX_ROWS].last_updated_timestamp
            del result.rows[MAX_ROWS:]
            break
        chunk_start = chunk_end
    return result


def transitions(rows: list[State], tracked: str) -> Iterator[tuple[float, Any]]:
    """(time, value) where the tracked value changed, oldest first; repeats dropped."""
    previous: Any = object()
    for row in rows:
        value = value_of(row, tracked)
        if value != previous:
            yield row.last_updated_timestamp, value
            previous = value


@dataclass(slots=True)
class Changes:
    """The newest changes of a period, newest first: (time, value, seconds it lasted, or
    None when what came next is unknown), and how far back reading went."""

    found: list[tuple[float, Any, float | None]] = field(default_factory=list)
    searched_back_to: float = 0.0
    cut: bool = False


def last_changes(
    hass: HomeAssistant,
    entity_id: str,
    period: tuple[datetime, datetime],
    tracked: str,
    wanted: Callable[[Any], bool],
    count: int,
    *,
    ends_now: bool,
) -> Changes:
    """The newest `count` changes into a value `wanted` accepts within the period, read a
    day at a time from its end backwards. The newest one has lasted until now when the
    period ends now; otherwise what came after it is not read."""
    start, end = period
    result = Changes()
    budget = MAX_ROWS
    newer: float | None = end.timestamp() if ends_now else None
    chunk_end = end
    while chunk_end > start and len(result.found) < count:
        chunk_start = max(chunk_end - CHUNK, start)
        rows = _read(
            hass,
            entity_id,
            (chunk_start, chunk_end),
            tracked=tracked,
            with_start_state=False,
            limit=budget,
        )
        if len(rows) >= budget:
            # Only the oldest rows of this day were read: its newest changes may be missing.
            result.cut = True
            break
        budget -= len(rows)
        for moment, value in reversed(list(transitions(rows, tracked))):
            if wanted(value) and len(result.found) < count:
                result.found.append((moment, value, None if newer is None else newer - moment))
            newer = moment
        chunk_end = chunk_start
    result.searched_back_to = chunk_end.timestamp()
    return result


def stretches(rows: Rows, tracked: str, period: tuple[datetime, datetime]) -> list[Stretch]:
    """The time the tracked value held each value, within the period (up to where reading
    stopped), consecutive equal values joined."""
    start, end = period[0].timestamp(), rows.cut_at or period[1].timestamp()
    found: list[Stretch] = []
    moments = list(transitions(rows.rows, tracked))
    for index, (moment, value) in enumerate(moments):
        begin = max(moment, start)
        finish = min(moments[index + 1][0] if index + 1 < len(moments) else end, end)
        if finish > begin:
            found.append(Stretch(value, begin, finish))
    return found


@dataclass(frozen=True, slots=True)
class Stretch:
    """One value held from `begin` to `end` (UTC timestamps)."""

    value: Any
    begin: float
    end: float

    @property
    def seconds(self) -> float:
        """How long it lasted."""
        return self.end - self.begin


@dataclass(frozen=True, slots=True)
class Spread:
    """Lowest, highest and time-weighted mean of a number, with when the extremes began."""

    low: float
    low_at: float
    high: float
    high_at: float
    mean: float
    readings: int


def spread(held: list[Stretch]) -> Spread | None:
    """The spread of the numeric stretches (time without a number does not count)."""
    numeric = [(value, s) for s in held if (value := number(s.value)) is not None]
    weight = sum(s.seconds for _, s in numeric)
    if not numeric or weight <= 0:
        return None
    low_value, low = min(numeric, key=lambda item: item[0])
    high_value, high = max(numeric, key=lambda item: item[0])
    return Spread(
        low=low_value,
        low_at=low.begin,
        high=high_value,
        high_at=high.begin,
        mean=sum(value * s.seconds for value, s in numeric) / weight,
        readings=len(numeric),
    )


def value_at(hass: HomeAssistant, entity_id: str, moment: datetime, tracked: str) -> State | None:
    """The entity's recorded row in force at `moment` (None when nothing was recorded
    before it)."""
    rows = _read(
        hass,
        entity_id,
        (moment, moment + timedelta(seconds=1)),
        tracked=tracked,
        with_start_state=True,
        limit=1,
    )
    if rows and rows[0].last_updated_timestamp <= moment.timestamp():
        return rows[0]
    return None


@dataclass(frozen=True, slots=True)
class Total:
    """How much a running total grew, the stretch it covers and its unit."""

    amount: float
    begin: float
    end: float
    unit: str | None
    source: str


def statistics_total(
    hass: HomeAssistant, statistic_id: str, period: tuple[datetime, datetime]
) -> Total | None:
    """The growth of a statistic with a sum (energy, water, gas) from the long-term
    statistics, hour by hour, then five-minute statistics for the hour not compiled yet;
    None when the recorder keeps no sum for it."""
    from homeassistant.components.recorder import statistics

    metadata = statistics.get_metadata(hass, statistic_ids={statistic_id}).get(statistic_id)
    if metadata is None or not metadata[1].get("has_sum"):
        return None
    start, end = period
    hourly = statistics.statistics_during_period(
        hass, start, end, {statistic_id}, "hour", None, {"change"}
    ).get(statistic_id, [])
    rows = list(hourly)
    tail_start = max(start.timestamp(), hourly[-1]["end"]) if hourly else start.timestamp()
    if tail_start < end.timestamp():
        tail = datetime.fromtimestamp(tail_start, tz=start.tzinfo)
        rows += statistics.statistics_during_period(
            hass, tail, end, {statistic_id}, "5minute", None, {"change"}
        ).get(statistic_id, [])
    if not rows:
        return Total(0.0, start.timestamp(), end.timestamp(), None, "statistics")
    return Total(
        amount=sum(row.get("change") or 0.0 for row in rows),
        begin=rows[0]["start"],
        end=rows[-1]["end"],
        unit=metadata[1].get("unit_of_measurement"),
        source="statistics",
    )


def states_total(held: list[Stretch]) -> float | None:
    """The growth of a meter from its recorded states: each rise counts, a drop is a meter
    reset (what it shows after counts); None without two numbers."""
    values = [value for s in held if (value := number(s.value)) is not None]
    if len(values) < 2:
        return None
    total = 0.0
    for before, after in pairwise(values):
        total += after - before if after >= before else after
    return total


def statistics_spread(
    hass: HomeAssistant, statistic_id: str, period: tuple[datetime, datetime]
) -> Spread | None:
    """Lowest, highest and mean from hourly long-term statistics: for a number whose states
    are already purged from the period."""
    from homeassistant.components.recorder import statistics

    hours = statistics.statistics_during_period(
        hass, period[0], period[1], {statistic_id}, "hour", None, {"mean", "min", "max"}
    ).get(statistic_id, [])
    hours = [h for h in hours if None not in (h.get("mean"), h.get("min"), h.get("max"))]
    if not hours:
        return None
    low = min(hours, key=lambda h: h["min"])
    high = max(hours, key=lambda h: h["max"])
    return Spread(
        low=low["min"],
        low_at=low["start"],
        high=high["max"],
        high_at=high["start"],
        mean=sum(h["mean"] for h in hours) / len(hours),
        readings=len(hours),
    )
