"""The weather tool: current conditions and forecasts of the home's weather entities.

The Assist API only knows a weather entity's current state; forecasts need the
`weather.get_forecasts` action, which returns far more than a spoken answer needs. These tools
pick the right entity, ask only for a forecast kind the entity offers, cut the forecast to what
the user asked for and name every unit once, so the model never guesses °C against °F.
"""

from __future__ import annotations

from typing import Any

from homeassistant.components.weather import WeatherEntityFeature
from homeassistant.const import ATTR_SUPPORTED_FEATURES, STATE_UNAVAILABLE, STATE_UNKNOWN
from homeassistant.core import State
from homeassistant.util import dt as dt_util

from ..agent.errors import ToolFailure
from .registry import ToolContext, ToolSpec
from .targets import resolve_targets

CATEGORY = "weather"
WEATHER_DOMAIN = "weather"

# What a forecast kind needs from the entity's supported features.
FORECAST_FEATURES = {
    "daily": WeatherEntityFeature.FORECAST_DAILY,
    "twice_daily": WeatherEntityFeature.FORECAST_TWICE_DAILY,
    "hourly": WeatherEntityFeature.FORECAST_HOURLY,
}
DEFAULT_DAYS = 3
DEFAULT_HOURS = 12
MAX_DAYS = 14
MAX_HOURS = 48

# Current-condition attributes worth saying, in the order a person would say them.
CURRENT_FIELDS = (
    "temperature",
    "apparent_temperature",
    "humidity",
    "dew_point",
    "wind_speed",
    "wind_gust_speed",
    "wind_bearing",
    "pressure",
    "visibility",
    "cloud_coverage",
    "uv_index",
    "ozone",
)
# Forecast entry keys folded into one readable local time (`when`).
FORECAST_TIME_KEYS = frozenset({"datetime", "is_daytime"})

# The state attribute holding each quantity's unit. HA converts every value of a weather
# entity, forecasts included, to these display units.
UNIT_ATTRIBUTES = {
    "temperature": "temperature_unit",
    "templow": "temperature_unit",
    "apparent_temperature": "temperature_unit",
    "dew_point": "temperature_unit",
    "pressure": "pressure_unit",
    "wind_speed": "wind_speed_unit",
    "wind_gust_speed": "wind_speed_unit",
    "visibility": "visibility_unit",
    "precipitation": "precipitation_unit",
}
PERCENT_FIELDS = frozenset({"humidity", "precipitation_probability", "cloud_coverage"})

# Another weather entity by name; without one, the home's (the tool says which it read).
NAME_PROPERTY = {"type": "string"}


async def _weather_entity(tool_context: ToolContext, name: str | None) -> tuple[State, list[str]]:
    """The weather entity meant, and the names of the other exposed ones (to offer them)."""
    if name:
        states = await resolve_targets(
            tool_context, name=name, domains={WEATHER_DOMAIN}, single=True
        )
        return states[0], []
    states = await resolve_targets(tool_context, domains={WEATHER_DOMAIN})
    chosen = _home_weather(states, tool_context.hass.config.location_name)
    return chosen, [state.name for state in states if state is not chosen]


def _home_weather(states: list[State], location_name: str) -> State:
    """With several weather entities, the one named after the home, else the first."""
    home_words = {"home", location_name.casefold()}
    for state in states:
        if any(word and word in state.name.casefold() for word in home_words):
            return state
    return states[0]


def _check_available(state: State) -> None:
    if state.state in (STATE_UNAVAILABLE, STATE_UNKNOWN):
        raise ToolFailure(
            {
                "error": "unavailable",
                "error_text": f"The weather source {state.name} is unavailable right now.",
            }
        )


def _units(tool_context: ToolContext, state: State, fields: set[str]) -> dict[str, str]:
    """The unit of each quantity present; temperature falls back to HA's unit system."""
    units: dict[str, str] = {}
    for field in sorted(fields):
        if field in PERCENT_FIELDS:
            units[field] = "%"
        elif unit_attribute := UNIT_ATTRIBUTES.get(field):
            unit = state.attributes.get(unit_attribute)
            if unit is None and unit_attribute == "temperature_unit":
                unit = tool_context.hass.config.units.temperature_unit
            if unit is not None:
                units[field] = str(unit)
    return units


async def _current(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    state, others = await _weather_entity(tool_context, arguments.get("name"))
    _check_available(state)
    values = {
        field: state.attributes[field]
        for field in CURRENT_FIELDS
        if state.attributes.get(field) is not None
    }
    result: dict[str, Any] = {"weather": state.name, "condition": state.state, **values}
    result["units"] = _units(tool_context, state, set(values))
    if others:
        result["other_weather_entities"] = others
    return result


def _forecast_kind(state: State, requested: str | None, hours: int | None) -> str:
    """The forecast kind to ask for: the one requested, else the best one the entity has."""
    supported = state.attributes.get(ATTR_SUPPORTED_FEATURES, 0)
    offered = [kind for kind, feature in FORECAST_FEATURES.items() if supported & feature]
    if requested:
        if requested not in offered:
            raise ToolFailure(
                {
                    "error": "unsupported_forecast",
                    "error_text": f"{state.name} has no {requested} forecast. "
                    f"It offers: {', '.join(offered) or 'no forecast at all'}.",
                }
            )
        return requested
    preferred = ["hourly"] if hours else ["daily", "twice_daily", "hourly"]
    for kind in (*preferred, *offered):
        if kind in offered:
            return kind
    raise ToolFailure(
        {"error": "unsupported_forecast", "error_text": f"{state.name} offers no forecast."}
    )


def _entry_count(kind: str, days: int | None, hours: int | None) -> int:
    """How many forecast entries cover what the user asked for."""
    if kind == "hourly":
        return min(hours or (days * 24 if days else DEFAULT_HOURS), MAX_HOURS)
    days = min(days or DEFAULT_DAYS, MAX_DAYS)
    return days * 2 if kind == "twice_daily" else days


def _when(kind: str, entry: dict[str, Any]) -> str:
    """The entry's time, local and readable: 'Wed 2026-12-02' (+ ' 14:00' or ' night')."""
    moment = dt_util.parse_datetime(str(entry["datetime"]))
    if moment is None:
        return str(entry["datetime"])
    local = dt_util.as_local(moment)
    day = local.strftime("%a %Y-%m-%d")
    if kind == "hourly":
        return f"{day} {local:%H:%M}"
    if kind == "twice_daily" and "is_daytime" in entry:
        return f"{day} {'day' if entry['is_daytime'] else 'night'}"
    return day


def _compact_entry(kind: str, entry: dict[str, Any]) -> dict[str, Any]:
    values = {
        key: value
        for key, value in entry.items()
        if key not in FORECAST_TIME_KEYS and value is not None
    }
    return {"when": _when(kind, entry), **values}


def _count_argument(arguments: dict[str, Any], key: str) -> int | None:
    """A day or hour count; some models send 2.0 or "2" for an integer."""
    value = arguments.get(key)
    return max(1, int(float(value))) if value not in (None, "") else None


async def _forecast(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    days, hours = _count_argument(arguments, "days"), _count_argument(arguments, "hours")
    state, others = await _weather_entity(tool_context, arguments.get("name"))
    _check_available(state)
    kind = _forecast_kind(state, arguments.get("type"), hours)
    response = await tool_context.hass.services.async_call(
        WEATHER_DOMAIN,
        "get_forecasts",
        {"entity_id": state.entity_id, "type": kind},
        blocking=True,
        context=tool_context.context,
        return_response=True,
    )
    raw_entries = response[state.entity_id]["forecast"][: _entry_count(kind, days, hours)]
    entries = [_compact_entry(kind, entry) for entry in raw_entries]
    fields = {key for entry in entries for key in entry}
    result: dict[str, Any] = {
        "weather": state.name,
        "type": kind,
        "forecast": entries,
        "units": _units(tool_context, state, fields),
    }
    if others:
        result["other_weather_entities"] = others
    return result


_FORECAST_ARGUMENTS = ("days", "hours", "type")


async def _weather(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """The weather now, or the forecast when a span or kind is asked for."""
    if any(arguments.get(key) not in (None, "") for key in _FORECAST_ARGUMENTS):
        return await _forecast(tool_context, arguments)
    return await _current(tool_context, arguments)


# One tool for now and later: one name, description and schema in every request instead
# of two. It stays next to Assist's HassGetWeather, which has no forecast.
SPECS: list[ToolSpec] = [
    ToolSpec(
        name="home_weather",
        description=(
            "Weather now; with days (today included) or hours, the forecast only as far as "
            "asked. templow is the low."
        ),
        parameters={
            "type": "object",
            "properties": {
                "name": NAME_PROPERTY,
                "type": {"type": "string", "enum": ["daily", "hourly", "twice_daily"]},
                # No bounds in the schema (tokens in every request): the counts are
                # clamped to 1..MAX_DAYS / MAX_HOURS when read.
                "days": {"type": "integer"},
                "hours": {"type": "integer"},
            },
        },
        category=CATEGORY,
        handler=_weather,
        domains=frozenset({WEATHER_DOMAIN}),
    ),
]
