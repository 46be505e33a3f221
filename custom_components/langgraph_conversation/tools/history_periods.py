"""The time words of the history tool: periods, local times a model sends, and how an
answer says times and durations.

Models send times in every shape ("07:00", "7", "2026-12-05 07:00", an ISO string with a
zone, a number); each is read in the home's time zone, and a time without a date is the
most recent such moment. What the tool reads is bounded: never more than MAX_DAYS back and
never into the future. Answers say times locally and briefly ("Sat 2026-12-05 07:02") and
durations as a person would ("3 h 12 min").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
import re
from typing import Any

from homeassistant.util import dt as dt_util

from ..agent.errors import ToolFailure

# Farthest back the tool reads (Home Assistant's recorder keeps 10 days of states by
# default; long-term statistics go further).
MAX_DAYS = 31
PERIODS = (
    "today",
    "yesterday",
    "last_hour",
    "last_24_hours",
    "this_week",
    "last_7_days",
    "last_30_days",
)
# "7", "07:30", "7:30:15", "7pm", "7.30 a.m."
_TIME_OF_DAY = re.compile(
    r"(?P<hour>\d{1,2})(?:[:.](?P<minute>\d{2}))?(?::(?P<second>\d{2}))?\s*"
    r"(?P<half>[ap])?\.?(?:m\.?)?",
    re.IGNORECASE,
)
_TIME_FORMS = "YYYY-MM-DD HH:MM (local time), YYYY-MM-DD or HH:MM"


@dataclass(frozen=True, slots=True)
class Span:
    """The stretch of time an answer covers (aware datetimes), and whether it was cut to
    what the tool may read."""

    start: datetime
    end: datetime
    clamped: bool = False

    def text(self) -> str:
        """'Sat 2026-12-05 00:00 to 10:32' (the end's date only when it differs)."""
        start, end = dt_util.as_local(self.start), dt_util.as_local(self.end)
        if start.date() == end.date():
            return f"{when(start)} to {end:%H:%M}"
        return f"{when(start)} to {when(end)}"


def when(moment: datetime | float) -> str:
    """A moment (datetime or UTC timestamp) in the home's time zone: 'Sat 2026-12-05 07:02'."""
    if not isinstance(moment, datetime):
        moment = dt_util.utc_from_timestamp(moment)
    return f"{dt_util.as_local(moment):%a %Y-%m-%d %H:%M}"


def duration(seconds: float) -> str:
    """'3 h 12 min', '2 d 1 h', '40 s': to the minute, seconds only under a minute."""
    if seconds < 60:
        return f"{round(max(seconds, 0))} s"
    days, rest = divmod(round(seconds / 60), 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days} d"] if days else []
    if hours:
        parts.append(f"{hours} h")
    if minutes or not parts:
        parts.append(f"{minutes} min")
    return " ".join(parts)


def text_argument(arguments: dict[str, Any], key: str) -> str | None:
    """A text argument, whatever type the model sent; blank means not given."""
    value = arguments.get(key)
    if value is None or isinstance(value, (dict, list)):
        return None
    text = str(value).strip()
    return text or None


def period_span(arguments: dict[str, Any], default: str, now: datetime) -> Span:
    """The span a question covers: `start`/`end` when given, else `period` (or the default),
    cut to the last MAX_DAYS and to now."""
    start_text, end_text = text_argument(arguments, "start"), text_argument(arguments, "end")
    if start_text or end_text:
        end = moment(end_text, now, "end") if end_text else now
        start = moment(start_text, now, "start") if start_text else end - timedelta(days=1)
    else:
        start, end = _named_period(text_argument(arguments, "period") or default, now)
    earliest = now - timedelta(days=MAX_DAYS)
    clamped = start < earliest or end > now
    start, end = max(start, earliest), min(end, now)
    if end <= start:
        raise ToolFailure(
            {
                "error": "invalid_period",
                "error_text": f"The period {when(start)} to {when(end)} is empty: the end "
                f"must come after the start, within the last {MAX_DAYS} days.",
            }
        )
    return Span(start, end, clamped)


def _named_period(name: str, now: datetime) -> tuple[datetime, datetime]:
    key = re.sub(r"[\s-]+", "_", name.casefold())
    midnight = dt_util.start_of_local_day(dt_util.as_local(now))
    starts = {
        "today": midnight,
        "last_hour": now - timedelta(hours=1),
        "last_24_hours": now - timedelta(hours=24),
        "this_week": dt_util.start_of_local_day(midnight.date() - timedelta(days=now.weekday())),
        "last_7_days": now - timedelta(days=7),
        "last_30_days": now - timedelta(days=30),
    }
    if key == "yesterday":
        return dt_util.start_of_local_day(midnight.date() - timedelta(days=1)), midnight
    if key not in starts:
        raise ToolFailure(
            {
                "error": "invalid_period",
                "error_text": f"Unknown period '{name}'. Use one of {', '.join(PERIODS)}, "
                f"or start and end ({_TIME_FORMS}).",
            }
        )
    return starts[key], now


def moment(text: str | None, now: datetime, key: str) -> datetime:
    """A time the model sent, in the home's time zone; a time of day alone is its most
    recent occurrence (07:00 asked at 06:00 is yesterday's)."""
    text = (text or "").strip()
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        parsed = None
    if parsed is not None:
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt_util.get_default_time_zone())
        return parsed
    if (match := _TIME_OF_DAY.fullmatch(text)) and (time := _time_of_day(match)):
        hour, minute, second = time
        local_now = dt_util.as_local(now)
        today = local_now.replace(hour=hour, minute=minute, second=second, microsecond=0)
        return today if today <= local_now else today - timedelta(days=1)
    raise ToolFailure(
        {
            "error": "invalid_time",
            "error_text": f"{key} '{text}' is not a time; use {_TIME_FORMS}.",
        }
    )


def _time_of_day(match: re.Match[str]) -> tuple[int, int, int] | None:
    hour = int(match["hour"])
    minute, second = int(match["minute"] or 0), int(match["second"] or 0)
    if half := (match["half"] or "").lower():
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half == "p" else 0)
    if hour > 23 or minute > 59 or second > 59:
        return None
    return hour, minute, second
