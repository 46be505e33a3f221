"""An automation read back in one short sentence: "every weekday at 07:00, turn on
Kitchen Lights".

The question before creating one (and the list of those we made) says what it will do,
from the checked draft itself, never from the model's own description of it: the yes is
given to what will be written. Entities are named as the home names them; an action
the effect gate calls critical is named in the gate's words ("unlock Front Door").
"""

from __future__ import annotations

from typing import Any

from homeassistant.core import HomeAssistant

from .effects import critical_action

# Characters of a read-back; a sentence to hear, not the automation itself.
MAX_WORDS_CHARS = 300
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_NAMES = dict(zip(WEEKDAYS, ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"), strict=True))


def _names(hass: HomeAssistant, value: Any) -> str:
    items = value if isinstance(value, list) else [value]
    names = []
    for item in items:
        for entity_id in str(item).split(","):
            entity_id = entity_id.strip()
            if not entity_id:
                continue
            state = hass.states.get(entity_id)
            names.append(state.name if state is not None else entity_id)
    return " and ".join(names) or "nothing"


def _time(value: Any) -> str:
    if isinstance(value, list):
        return " and ".join(_time(item) for item in value)
    text = str(value)
    # "07:00:00" → "07:00"
    if len(text) == 8 and text[2] == ":" and text[5] == ":" and text.endswith(":00"):
        return text[:5]
    return text


def _duration(value: Any) -> str:
    if isinstance(value, dict):
        parts = [f"{amount} {unit}" for unit, amount in value.items() if amount]
        return " ".join(parts) or "0 seconds"
    if isinstance(value, int | float):
        return f"{value:g} seconds"
    return str(value)


def _trigger(hass: HomeAssistant, trigger: dict[str, Any]) -> str:
    kind = trigger.get("trigger")
    if kind == "time":
        return f"at {_time(trigger.get('at'))}"
    if kind == "time_pattern":
        for unit in ("hours", "minutes", "seconds"):
            if unit in trigger:
                return f"every {unit[:-1]} matching {trigger[unit]}"
        return "on a time pattern"
    if kind == "sun":
        event = str(trigger.get("event", "sunset"))
        offset = f" (offset {trigger['offset']})" if trigger.get("offset") else ""
        return f"at {event}{offset}"
    if kind == "homeassistant":
        return f"when Home Assistant {'starts' if trigger.get('event') != 'shutdown' else 'stops'}"
    names = _names(hass, trigger.get("entity_id"))
    lasting = f" for {_duration(trigger['for'])}" if trigger.get("for") else ""
    if kind == "numeric_state":
        bounds = []
        if trigger.get("above") is not None:
            bounds.append(f"rises above {trigger['above']}")
        if trigger.get("below") is not None:
            bounds.append(f"drops below {trigger['below']}")
        return f"when {names} {' or '.join(bounds) or 'changes'}{lasting}"
    if trigger.get("to") is not None:
        return f"when {names} turns {_plain(trigger['to'])}{lasting}"
    return f"when {names} changes{lasting}"


def _plain(value: Any) -> str:
    if isinstance(value, list):
        return " or ".join(_plain(item) for item in value)
    if value is True:
        return "on"
    if value is False:
        return "off"
    return str(value)


def _days(weekdays: Any) -> str:
    days = [str(day) for day in (weekdays if isinstance(weekdays, list) else [weekdays])]
    if sorted(days, key=_day_order) == list(WEEKDAYS[:5]):
        return "every weekday"
    if sorted(days, key=_day_order) == list(WEEKDAYS[5:]):
        return "every weekend day"
    return "on " + ", ".join(_DAY_NAMES.get(day, day) for day in sorted(days, key=_day_order))


def _day_order(day: str) -> int:
    return WEEKDAYS.index(day) if day in WEEKDAYS else len(WEEKDAYS)


def _condition(hass: HomeAssistant, condition: dict[str, Any]) -> str:
    kind = condition.get("condition")
    if kind in ("and", "or"):
        inner = [_condition(hass, each) for each in condition.get("conditions") or []]
        return f" {kind} ".join(f"({text})" if " " in text else text for text in inner)
    if kind == "not":
        inner = [_condition(hass, each) for each in condition.get("conditions") or []]
        return "not " + " or ".join(inner)
    if kind == "time":
        parts = []
        if condition.get("after"):
            parts.append(f"after {_time(condition['after'])}")
        if condition.get("before"):
            parts.append(f"before {_time(condition['before'])}")
        if condition.get("weekday"):
            parts.append(_days(condition["weekday"]))
        return " ".join(parts) or "at any time"
    if kind == "sun":
        parts = []
        if condition.get("after"):
            parts.append(f"after {condition['after']}")
        if condition.get("before"):
            parts.append(f"before {condition['before']}")
        return " and ".join(parts) or "by the sun"
    names = _names(hass, condition.get("entity_id"))
    if kind == "numeric_state":
        bounds = []
        if condition.get("above") is not None:
            bounds.append(f"above {condition['above']}")
        if condition.get("below") is not None:
            bounds.append(f"below {condition['below']}")
        return f"{names} is {' and '.join(bounds)}"
    return f"{names} is {_plain(condition.get('state'))}"


def _details(data: dict[str, Any]) -> str:
    parts = []
    if "brightness_pct" in data:
        parts.append(f"at {data['brightness_pct']}%")
    if "temperature" in data:
        parts.append(f"to {data['temperature']}°")
    if "hvac_mode" in data:
        parts.append(f"to {data['hvac_mode']}")
    if "volume_level" in data:
        parts.append(f"to volume {data['volume_level']}")
    if "media_content_id" in data:
        parts.append(f"playing {data['media_content_id']}")
    return (" " + " ".join(parts)) if parts else ""


def _action(hass: HomeAssistant, action: dict[str, Any], marked: frozenset[str]) -> str:
    if "delay" in action:
        return f"wait {_duration(action['delay'])}"
    if "condition" in action:
        return f"only if {_condition(hass, action)}"
    domain, _, service = str(action.get("action", "")).partition(".")
    data = dict(action.get("data") or {})
    targets: list[str] = []
    for where in (action, action.get("target") or {}, data):
        value = where.get("entity_id")
        if value is not None:
            targets.extend(
                part.strip()
                for item in (value if isinstance(value, list) else [value])
                for part in str(item).split(",")
                if part.strip()
            )
    if not targets:
        message = str(data.get("message", ""))[:80]
        return (
            f"send the notification \u201c{message}\u201d"
            if message
            else f"call {domain}.{service}"
        )
    effects = []
    for entity_id in targets:
        state = hass.states.get(entity_id)
        critical = critical_action(hass, domain, service, entity_id, state, data, marked)
        effects.append(critical or f"{service.replace('_', ' ')} {_names(hass, entity_id)}")
    return " and ".join(effects) + _details(data)


def automation_words(
    hass: HomeAssistant, config: dict[str, Any], marked: frozenset[str] = frozenset()
) -> str:
    """What the automation does, in one short sentence (without its name)."""
    conditions = list(config.get("conditions") or [])
    days = ""
    # "every weekday at 07:00": a time condition of weekdays only reads with the trigger.
    for condition in conditions:
        if condition.get("condition") == "time" and set(condition) <= {"condition", "weekday"}:
            days = _days(condition.get("weekday")) + " "
            conditions.remove(condition)
            break
    when = " or ".join(_trigger(hass, trigger) for trigger in config.get("triggers") or [])
    sentence = f"{days}{when}"
    if conditions:
        sentence += ", if " + " and ".join(_condition(hass, c) for c in conditions)
    actions = [_action(hass, action, marked) for action in config.get("actions") or []]
    sentence += ", " + ", then ".join(actions)
    if len(sentence) > MAX_WORDS_CHARS:
        sentence = sentence[: MAX_WORDS_CHARS - 1].rstrip() + "\u2026"
    return sentence
