"""Which Home Assistant actions are critical, i.e. need the user's spoken yes first.

Unlocking a lock, disarming an alarm and opening a garage door or gate are hard to undo
and a prompt injection must never trigger them silently. Home Assistant's Assist API does
these through its generic intents (HassTurnOff on a lock unlocks it, HassTurnOn on a cover
opens it), so the check resolves the intent's targets the way Assist does and looks at
what they are.
"""

from __future__ import annotations

from typing import Any

from homeassistant.core import HomeAssistant, State
from homeassistant.helpers import device_registry as dr, intent

from ..agent.confirmation import ConfirmationCheck

_OPENABLE_DEVICE_CLASSES = {"garage", "gate"}

# The domains in which each intent can do something critical (see critical_action). The
# check only matches targets in these: matching every entity of the home again for each
# tool call (the intent handler matches them too) cost as much as the rest of the turn.
_CRITICAL_DOMAINS = {
    "HassTurnOff": ("lock", "alarm_control_panel"),
    "HassTurnOn": ("cover",),
    "HassSetPosition": ("cover",),
}


def intent_name(tool_name: str) -> str:
    """The intent behind an Assist tool name: 2026.8+ prefixes it ("intent__HassTurnOn")."""
    return tool_name.rsplit("__", 1)[-1]


def _as_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    return [str(v) for v in value] if isinstance(value, list | tuple | set) else [str(value)]


def _device_area(hass: HomeAssistant, device_id: str | None) -> str | None:
    if device_id and (device := dr.async_get(hass).async_get(device_id)):
        return device.area_id
    return None


def matched_states(
    hass: HomeAssistant,
    assistant: str,
    device_id: str | None,
    args: dict[str, Any],
    within: tuple[str, ...] | None = None,
) -> list[State]:
    """The entities an intent call with these arguments would act on (those `within`
    these domains, if given)."""
    domains = _as_list(args.get("domain"))
    if within is not None:
        domains = [domain for domain in domains or within if domain in within]
        if not domains:
            return []
    constraints = intent.MatchTargetsConstraints(
        name=args.get("name"),
        area_name=args.get("area"),
        floor_name=args.get("floor"),
        domains=domains,
        device_classes=_as_list(args.get("device_class")),
        assistant=assistant,
        allow_duplicate_names=True,
    )
    if not (constraints.name or constraints.area_name or constraints.floor_name):
        return []
    preferences = intent.MatchTargetsPreferences(area_id=_device_area(hass, device_id))
    result = intent.async_match_targets(hass, constraints, preferences)
    return list(result.states) if result.is_match else []


def critical_action(intent_type: str, state: State, args: dict[str, Any]) -> str | None:
    """A description of the critical action, or None when the action is safe."""
    name = state.name
    if state.domain == "lock" and intent_type == "HassTurnOff":
        return f"unlock {name}"
    if state.domain == "alarm_control_panel" and intent_type == "HassTurnOff":
        return f"disarm {name}"
    if state.domain == "cover" and state.attributes.get("device_class") in _OPENABLE_DEVICE_CLASSES:
        position = args.get("position")
        opening = intent_type == "HassTurnOn" or (
            intent_type == "HassSetPosition" and isinstance(position, int | float) and position > 0
        )
        if opening:
            return f"open {name}"
    return None


def assist_tool_check(
    hass: HomeAssistant, tool_name: str, assistant: str, device_id: str | None
) -> ConfirmationCheck:
    """The confirmation check of one Home Assistant API tool."""
    intent_type = intent_name(tool_name)
    domains = _CRITICAL_DOMAINS.get(intent_type)

    async def check(args: dict[str, Any]) -> str | None:
        if domains is None:  # nothing this intent does is critical
            return None
        actions = [
            action
            for state in matched_states(hass, assistant, device_id, args, domains)
            if (action := critical_action(intent_type, state, args))
        ]
        return ", ".join(actions) or None

    return check


def always_confirm(description: str) -> ConfirmationCheck:
    """The check of a tool flagged critical: every call needs a yes."""

    async def check(args: dict[str, Any]) -> str | None:
        details = ", ".join(f"{key} {value}" for key, value in args.items())
        return f"{description} ({details})" if details else description

    return check
