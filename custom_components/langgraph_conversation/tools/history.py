"""The history tool: what happened in the home, from Home Assistant's own recorder.

Assist sees the home as it is now. This tool answers five kinds of question about the past
of one exposed entity: its last changes ("when did the garage door open?"), how long and
how often it was in a state ("how long was the heating on today?"), its value at a time
("what was the temperature at 7?"), the lowest, highest and mean of a number, and what a
meter counted from the long-term statistics ("how much energy did we use yesterday?").

Names are resolved like every tool's (targets.py): an entity that is not exposed is never
read. The recorder is asked only through its own functions, in its own executor
(history_reading.py); what is read is bounded (history_periods.MAX_DAYS back,
history_reading.MAX_ROWS rows), and the answer is a few figures with local times, never
the rows themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

from homeassistant.const import ATTR_DEVICE_CLASS, ATTR_UNIT_OF_MEASUREMENT
from homeassistant.core import HomeAssistant, State
from homeassistant.util import dt as dt_util

from ..agent.errors import ToolFailure
from . import history_reading as reading
from .history_periods import (
    MAX_DAYS,
    PERIODS,
    Span,
    duration,
    moment,
    period_span,
    text_argument,
    when,
)
from .registry import ToolContext, ToolSpec
from .targets import resolve_targets

CATEGORY = "history"
RECORDER = "recorder"
ASKS = ("changes", "time_in_state", "value_at", "min_max_mean", "total")
# Other words models use for an ask.
_ASK_WORDS = {
    "last_changes": "changes",
    "history": "changes",
    "duration": "time_in_state",
    "durations": "time_in_state",
    "how_long": "time_in_state",
    "value": "value_at",
    "at": "value_at",
    "stats": "min_max_mean",
    "statistics": "min_max_mean",
    "min": "min_max_mean",
    "max": "min_max_mean",
    "mean": "min_max_mean",
    "average": "min_max_mean",
    "sum": "total",
    "energy": "total",
    "consumption": "total",
    "usage": "total",
}
DEFAULT_CHANGES = 5
MAX_CHANGES = 20
# Generic words for "on" and "off" stand for what an entity records for them (a door's
# "on", a thermostat's "heating"); any other state is matched as written.
_ON_WORDS = frozenset({"on", "open", "opened", "active", "detected", "true", "yes"})
_ON = _ON_WORDS | {"heating", "cooling", "drying"}
_OFF_WORDS = frozenset({"off", "closed", "close", "clear", "inactive", "false", "no"})
_OFF = _OFF_WORDS | {"idle"}
# Thermostats: what they did, and what the room's temperature was.
_ACTION = "hvac_action"
_ROOM_TEMPERATURE = "current_temperature"
_CLIMATE_ATTRIBUTES = (_ACTION, _ROOM_TEMPERATURE, "temperature")


def _word(value: Any) -> str:
    return str(value).strip().casefold().replace(" ", "_")


def _accepted(requested: str | None) -> Callable[[Any], bool]:
    """Which recorded values a requested state stands for (any, without one)."""
    if requested is None:
        return lambda _value: True
    word = _word(requested)
    group = _ON if word in _ON_WORDS else _OFF if word in _OFF_WORDS else {word}
    return lambda value: _word(value) in group


def _ask(arguments: dict[str, Any], state: State, tracked: str) -> str:
    """What is asked: as given, else what the arguments and the entity suggest."""
    if given := text_argument(arguments, "ask"):
        word = _word(given)
        ask = _ASK_WORDS.get(word, word)
        if ask not in ASKS:
            raise ToolFailure(
                {
                    "error": "invalid_ask",
                    "error_text": f"Unknown ask '{given}'. Use one of {', '.join(ASKS)}.",
                }
            )
        return ask
    if text_argument(arguments, "at"):
        return "value_at"
    if reading.number(reading.value_of(state, tracked)) is not None:
        return "min_max_mean"
    return "changes"


def _tracked(state: State, ask: str) -> str:
    """What of the entity's rows answers the question: a thermostat's action for changes
    and time in a state, its room temperature for numbers, otherwise the state."""
    if state.domain == "climate":
        if ask in ("changes", "time_in_state") and state.attributes.get(_ACTION) is not None:
            return _ACTION
        if ask == "min_max_mean" and state.attributes.get(_ROOM_TEMPERATURE) is not None:
            return _ROOM_TEMPERATURE
    return reading.STATE


def _unit(hass: HomeAssistant, state: State, tracked: str) -> str | None:
    if tracked == _ROOM_TEMPERATURE:
        return hass.config.units.temperature_unit
    return state.attributes.get(ATTR_UNIT_OF_MEASUREMENT)


def _rounded(value: float) -> float | int:
    """Two decimals at most; a whole number without its '.0'."""
    value = round(value, 2)
    return int(value) if value.is_integer() else value


def _count(arguments: dict[str, Any]) -> int:
    """How many changes to list; some models send 3.0 or "3" for an integer."""
    value = arguments.get("limit")
    if value in (None, ""):
        return DEFAULT_CHANGES
    try:
        return min(max(1, int(float(value))), MAX_CHANGES)
    except (TypeError, ValueError):
        raise ToolFailure(
            {"error": "invalid_limit", "error_text": f"limit '{value}' is not a number."}
        ) from None


async def _in_recorder[T](
    hass: HomeAssistant, job: Callable[..., T], *args: Any, **keywords: Any
) -> T:
    """Run a reading in the recorder's executor (its database work never runs on the loop)."""
    from homeassistant.components import recorder

    return await recorder.get_instance(hass).async_add_executor_job(
        partial(job, hass, *args, **keywords)
    )


async def _entity(tool_context: ToolContext, arguments: dict[str, Any]) -> State:
    """The one exposed, recorded entity the question is about."""
    from homeassistant.components import recorder

    if not (name := text_argument(arguments, "name")):
        raise ToolFailure({"error": "invalid_arguments", "error_text": "name is required"})
    (state,) = await resolve_targets(
        tool_context, name=name, area=text_argument(arguments, "area"), domains=set(), single=True
    )
    if not recorder.is_entity_recorded(tool_context.hass, state.entity_id):
        raise ToolFailure(
            {
                "error": "not_recorded",
                "error_text": f"The recorder keeps no history of {state.name} (it is excluded).",
            }
        )
    return state


def _heading(state: State, span: Span | None, tracked: str) -> dict[str, Any]:
    """What every answer starts with: the entity, the period, what was followed."""
    heading: dict[str, Any] = {"entity": state.name}
    if state.domain == "binary_sensor" and (kind := state.attributes.get(ATTR_DEVICE_CLASS)):
        heading["device_class"] = kind  # "on" means open for a door, detected for motion
    if tracked != reading.STATE:
        heading["of"] = tracked
    if span is not None:
        heading["period"] = span.text()
        if span.clamped:
            heading["note"] = f"Cut to the last {MAX_DAYS} days and to now."
    return heading


async def _changes(
    tool_context: ToolContext, state: State, arguments: dict[str, Any], tracked: str
) -> dict[str, Any]:
    now = dt_util.utcnow()
    span = period_span(arguments, "last_30_days", now)
    requested = text_argument(arguments, "state")
    found = await _in_recorder(
        tool_context.hass,
        reading.last_changes,
        state.entity_id,
        (span.start, span.end),
        tracked,
        _accepted(requested),
        _count(arguments),
        ends_now=span.end >= now,
    )
    result = _heading(state, span, tracked)
    result["now"] = reading.value_of(state, tracked)
    changes = []
    for moment_ts, value, lasted in found.found:
        change: dict[str, Any] = {"at": when(moment_ts), "to": value}
        if lasted is not None:
            change["for"] = duration(lasted)
        changes.append(change)
    result["changes"] = changes
    if found.cut:
        _add_note(
            result,
            f"Stopped after {reading.MAX_ROWS:,} records: changes before "
            f"{when(found.searched_back_to)} were not read.",
        )
    elif not changes:
        _add_note(result, f"No change{f' to {requested}' if requested else ''} in that period.")
    return result


def _add_note(result: dict[str, Any], note: str) -> None:
    """A note after any the answer already has."""
    result["note"] = f"{result['note']} {note}" if result.get("note") else note


async def _time_in_state(
    tool_context: ToolContext, state: State, arguments: dict[str, Any], tracked: str
) -> dict[str, Any]:
    span = period_span(arguments, "today", dt_util.utcnow())
    rows = await _in_recorder(
        tool_context.hass, reading.read_forward, state.entity_id, (span.start, span.end), tracked
    )
    held = reading.stretches(rows, tracked, (span.start, span.end))
    result = _heading(state, span, tracked) | _coverage(rows, span)
    if not held:
        _add_note(result, "Nothing recorded in that period.")
        return result
    requested = text_argument(arguments, "state")
    if requested is None:
        result["states"] = _per_value(held)
        return result
    accepted = _accepted(requested)
    matching = [s for s in held if accepted(s.value)]
    result |= {"state": requested, "total": duration(sum(s.seconds for s in matching))}
    result["times"] = len(matching)
    if matching:
        result["counted"] = sorted({str(s.value) for s in matching})
        result["longest"] = duration(max(s.seconds for s in matching))
        last = matching[-1]
        result["last"] = Span(*map(dt_util.utc_from_timestamp, (last.begin, last.end))).text()
    else:
        result["seen"] = sorted({str(s.value) for s in held})
    return result


def _per_value(held: list[reading.Stretch]) -> dict[str, dict[str, Any]]:
    """Time and count per value, longest first (the six longest)."""
    seconds: dict[str, float] = {}
    times: dict[str, int] = {}
    for stretch in held:
        key = str(stretch.value)
        seconds[key] = seconds.get(key, 0.0) + stretch.seconds
        times[key] = times.get(key, 0) + 1
    ranked = sorted(seconds, key=lambda key: -seconds[key])[:6]
    return {key: {"total": duration(seconds[key]), "times": times[key]} for key in ranked}


def _coverage(rows: reading.Rows, span: Span) -> dict[str, Any]:
    """Where the figures stop short of the period: history begun later, reading cut."""
    found: dict[str, Any] = {}
    if rows.rows and rows.rows[0].last_updated_timestamp > span.start.timestamp():
        found["recorded_from"] = when(rows.rows[0].last_updated_timestamp)
    if rows.cut_at is not None:
        found["cut"] = (
            f"Only the first {reading.MAX_ROWS:,} records were read: figures end at "
            f"{when(rows.cut_at)}."
        )
    return found


async def _value_at(
    tool_context: ToolContext, state: State, arguments: dict[str, Any], tracked: str
) -> dict[str, Any]:
    if not (at_text := text_argument(arguments, "at")):
        raise ToolFailure(
            {"error": "invalid_arguments", "error_text": "value_at needs at (a local time)."}
        )
    now = dt_util.utcnow()
    at = moment(at_text, now, "at")
    if not now - timedelta(days=MAX_DAYS) <= at <= now:
        raise ToolFailure(
            {
                "error": "invalid_time",
                "error_text": f"{when(at)} is not within the last {MAX_DAYS} days.",
            }
        )
    wanted = _ACTION if state.domain == "climate" else tracked
    row = await _in_recorder(tool_context.hass, reading.value_at, state.entity_id, at, wanted)
    result = _heading(state, None, reading.STATE) | {"at": when(at)}
    if row is None:
        return result | {"note": "Nothing was recorded before that time."}
    result["value"] = row.state
    if (unit := _unit(tool_context.hass, state, reading.STATE)) is not None:
        result["unit"] = unit
    if state.domain == "climate":
        result |= {key: row.attributes[key] for key in _CLIMATE_ATTRIBUTES if key in row.attributes}
    return result


async def _min_max_mean(
    tool_context: ToolContext, state: State, arguments: dict[str, Any], tracked: str
) -> dict[str, Any]:
    span = period_span(arguments, "today", dt_util.utcnow())
    period = (span.start, span.end)
    rows = await _in_recorder(
        tool_context.hass, reading.read_forward, state.entity_id, period, tracked
    )
    figures = reading.spread(reading.stretches(rows, tracked, period))
    result = _heading(state, span, tracked) | _coverage(rows, span)
    if tracked == reading.STATE and (figures is None or rows.cut_at is not None):
        # States older than the recorder keeps (10 days by default), or more of them than
        # one question reads, live on as hourly long-term statistics over the whole period.
        hourly = await _in_recorder(
            tool_context.hass, reading.statistics_spread, state.entity_id, period
        )
        if hourly is not None:
            figures = hourly
            result = _heading(state, span, tracked) | {"source": "hourly long-term statistics"}
    if figures is None:
        raise ToolFailure(
            {
                "error": "no_numbers",
                "error_text": f"No numbers were recorded for {state.name} in that period.",
            }
        )
    result |= {
        "min": _rounded(figures.low),
        "min_at": when(figures.low_at),
        "max": _rounded(figures.high),
        "max_at": when(figures.high_at),
        "mean": _rounded(figures.mean),
    }
    if (unit := _unit(tool_context.hass, state, tracked)) is not None:
        result["unit"] = unit
    return result


async def _total(
    tool_context: ToolContext, state: State, arguments: dict[str, Any], tracked: str
) -> dict[str, Any]:
    span = period_span(arguments, "today", dt_util.utcnow())
    period = (span.start, span.end)
    hass = tool_context.hass
    total = await _in_recorder(hass, reading.statistics_total, state.entity_id, period)
    if total is not None:
        covered = Span(
            dt_util.utc_from_timestamp(total.begin), dt_util.utc_from_timestamp(total.end)
        )
        result = _heading(state, span, reading.STATE) | {"counted": covered.text()}
        return result | {
            "total": _rounded(total.amount),
            "unit": total.unit or _unit(hass, state, tracked),
        }
    rows = await _in_recorder(hass, reading.read_forward, state.entity_id, period, reading.STATE)
    amount = reading.states_total(reading.stretches(rows, reading.STATE, period))
    if amount is None:
        raise ToolFailure(
            {
                "error": "no_total",
                "error_text": f"{state.name} keeps no running total in that period; ask "
                "min_max_mean or changes instead.",
            }
        )
    result = _heading(state, span, reading.STATE) | _coverage(rows, span)
    return result | {
        "total": _rounded(amount),
        "unit": _unit(hass, state, reading.STATE),
        "source": "recorded states",
    }


_ANSWERS = {
    "changes": _changes,
    "time_in_state": _time_in_state,
    "value_at": _value_at,
    "min_max_mean": _min_max_mean,
    "total": _total,
}


async def _history(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """One question about one exposed entity's past."""
    state = await _entity(tool_context, arguments)
    ask = _ask(arguments, state, reading.STATE)
    tracked = _tracked(state, ask)
    return await _ANSWERS[ask](tool_context, state, arguments, tracked)


_STRING = {"type": "string"}

# One tool for the five questions: one name, description and schema in every request.
SPECS: list[ToolSpec] = [
    ToolSpec(
        name="home_history",
        description=(
            "Past of one entity from the recorder. ask: changes (last ones, optionally only "
            "into state), time_in_state (how long and how often in state), value_at (at), "
            "min_max_mean (numbers), total (energy/water used). Local times: YYYY-MM-DD "
            "HH:MM or HH:MM."
        ),
        parameters={
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Entity name, alias or entity_id"},
                "area": _STRING,
                "ask": {"type": "string", "enum": list(ASKS)},
                "state": _STRING,
                "period": {"type": "string", "enum": list(PERIODS)},
                "start": _STRING,
                "end": _STRING,
                "at": _STRING,
                # No bounds in the schema (tokens in every request): clamped when read.
                "limit": {"type": "integer"},
            },
            "required": ["name"],
        },
        category=CATEGORY,
        handler=_history,
        integrations=frozenset({RECORDER}),
    ),
]
