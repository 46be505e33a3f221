"""Which entities a tool call means: Home Assistant's own matcher, with errors a model can relay.

Names, aliases, areas, floors and exposure are resolved by `intent.async_match_targets`, the
matcher Assist's intents use, so our tools understand the home exactly as HA's do. What we add
is the satellite's room as the default target and failures the model can read out or act on:
nothing matched, not exposed (without ever naming the hidden entity), or ambiguous (with the
candidates, so the model can ask back).
"""

from __future__ import annotations

from dataclasses import replace

from homeassistant.core import HomeAssistant, State
from homeassistant.helpers import area_registry as ar, device_registry as dr, entity_registry as er
from homeassistant.helpers.intent import (
    MatchFailedReason,
    MatchTargetsConstraints,
    MatchTargetsPreferences,
    MatchTargetsResult,
    async_match_targets,
)

from ..agent.errors import ToolFailure
from .registry import ToolContext

# Ambiguity errors list at most this many candidates: enough to ask back, short for voice.
MAX_CANDIDATES = 10


async def resolve_targets(
    tool_context: ToolContext,
    *,
    name: str | None = None,
    area: str | None = None,
    floor: str | None = None,
    domains: set[str],
    device_classes: set[str] | None = None,
    single: bool = False,
) -> list[State]:
    """Exposed entities matching what the user said (name/alias, area, floor).

    Limited to `domains` (an empty set means any domain). When no name/area/floor is given
    and the request came from a device with an area, prefer that area (the satellite's
    room). Raises ToolFailure with a clear message the model can relay: nothing matched
    ("no_match"), only unexposed entities matched ("not_exposed": not available to the
    assistant, never naming it), or several matched while `single` is True, or a name is
    shared ("ambiguous", listing the candidates' names so the model can ask back).
    """
    hass = tool_context.hass
    name, area, floor = _clean(name), _clean(area), _clean(floor)
    device_area_id = device_area(hass, tool_context.device_id)
    constraints = MatchTargetsConstraints(
        name=name,
        area_name=area,
        floor_name=floor,
        domains=domains or None,
        device_classes=device_classes,
        assistant=tool_context.assistant,
        single_target=single,
    )
    preferences = MatchTargetsPreferences(area_id=device_area_id)

    room = ar.async_get(hass).async_get_area(device_area_id) if device_area_id else None
    if room is not None and not (name or area or floor):
        # "Turn off the lights" said to a satellite means the lights of its room; only
        # when that room has none does the request reach the rest of the home.
        room_constraints = replace(constraints, area_name=room.name)
        in_room = async_match_targets(hass, room_constraints, preferences)
        if in_room.is_match:
            return in_room.states
        if in_room.no_match_reason is MatchFailedReason.MULTIPLE_TARGETS:
            raise _failure(hass, room_constraints, preferences, in_room)

    result = async_match_targets(hass, constraints, preferences)
    if result.is_match:
        return result.states
    raise _failure(hass, constraints, preferences, result)


def device_area(hass: HomeAssistant, device_id: str | None) -> str | None:
    """The area of the device a request came from (a satellite's room), if any."""
    if device_id is None or (device := dr.async_get(hass).async_get(device_id)) is None:
        return None
    # Since 2026.9 a child device without its own area inherits its parent's.
    effective_area = getattr(dr, "async_get_effective_area_id", None)
    return effective_area(hass, device) if effective_area else device.area_id


def entity_area(hass: HomeAssistant, entity_id: str) -> ar.AreaEntry | None:
    """The area of an entity: its own, else its device's (as Assist sees it)."""
    entry = er.async_get(hass).async_get(entity_id)
    if entry is None:
        return None
    area_id = entry.area_id or device_area(hass, entry.device_id)
    return ar.async_get(hass).async_get_area(area_id) if area_id else None


def _clean(value: str | None) -> str | None:
    """Blank strings (models send "" for "not given") mean no constraint."""
    if value is None:
        return None
    return value.strip() or None


def _described(constraints: MatchTargetsConstraints) -> str:
    """What the user asked for, in their own words (never an entity we found)."""
    text = " or ".join(sorted(constraints.domains)) if constraints.domains else "entity"
    if constraints.name:
        text += f" named '{constraints.name}'"
    if constraints.area_name:
        text += f" in area '{constraints.area_name}'"
    if constraints.floor_name:
        text += f" on floor '{constraints.floor_name}'"
    return text


def _failure(
    hass: HomeAssistant,
    constraints: MatchTargetsConstraints,
    preferences: MatchTargetsPreferences,
    result: MatchTargetsResult,
) -> ToolFailure:
    reason = result.no_match_reason
    asked = _described(constraints)
    if reason is MatchFailedReason.ASSISTANT:
        return ToolFailure(
            {
                "error": "not_exposed",
                "error_text": f"No {asked} is available to the assistant (not exposed to it).",
            }
        )
    if reason is MatchFailedReason.INVALID_AREA:
        known = ", ".join(sorted(a.name for a in ar.async_get(hass).async_list_areas()))
        return _no_match(f"There is no area '{result.no_match_name}'. Areas: {known or 'none'}.")
    if reason is MatchFailedReason.INVALID_FLOOR:
        return _no_match(f"There is no floor '{result.no_match_name}'.")
    if reason is MatchFailedReason.DUPLICATE_NAME:
        # The matcher does not say which entities share the name; ask again allowing them.
        duplicates = async_match_targets(
            hass, replace(constraints, allow_duplicate_names=True, single_target=False), preferences
        )
        return _ambiguous(hass, asked, duplicates.states)
    if reason is MatchFailedReason.MULTIPLE_TARGETS:
        return _ambiguous(hass, asked, result.states)
    return _no_match(f"No {asked} was found.")


def _no_match(text: str) -> ToolFailure:
    return ToolFailure({"error": "no_match", "error_text": text})


def _ambiguous(hass: HomeAssistant, asked: str, states: list[State]) -> ToolFailure:
    candidates = [_candidate(hass, state) for state in states[:MAX_CANDIDATES]]
    listed = "; ".join(
        f"{c['name']} in {c['area']}" if c.get("area") else c["name"] for c in candidates
    )
    return ToolFailure(
        {
            "error": "ambiguous",
            "error_text": f"Several matches for {asked}: {listed}. Ask which one is meant.",
            "candidates": candidates,
        }
    )


def _candidate(hass: HomeAssistant, state: State) -> dict[str, str]:
    candidate = {"entity_id": state.entity_id, "name": state.name}
    if area := entity_area(hass, state.entity_id):
        candidate["area"] = area.name
    return candidate
