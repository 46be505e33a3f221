"""Light control beyond Assist's intents: brightness steps, colours, colour temperature, fades.

One tool switches one or many lights chosen by name, alias, area or floor. Each light only
gets what it can do (its `supported_color_modes`): asking an on/off lamp for a colour is
refused for that lamp with a sentence the model can relay, and the other lights still change.
"""

from __future__ import annotations

from dataclasses import dataclass
import json
from typing import Any, NoReturn

from homeassistant.components.light import (
    ATTR_BRIGHTNESS,
    ATTR_COLOR_MODE,
    ATTR_COLOR_TEMP_KELVIN,
    ATTR_RGB_COLOR,
    ATTR_SUPPORTED_COLOR_MODES,
    DOMAIN as LIGHT_DOMAIN,
    ColorMode,
    brightness_supported,
    color_supported,
    color_temp_supported,
)
from homeassistant.const import ATTR_ENTITY_ID, STATE_ON, STATE_UNAVAILABLE
from homeassistant.core import State
from homeassistant.util import color as color_util

from ..agent.errors import ToolFailure
from .registry import ToolContext, ToolSpec
from .targets import resolve_targets

CATEGORY = "lights"
ACTIONS = ("turn_on", "turn_off", "toggle")

# What a light must support for each kind of setting, and how a refusal reads.
_BRIGHTNESS = "brightness"
_COLOUR = "colour"
_COLOUR_TEMP = "colour temperature"
_CANNOT = {
    _BRIGHTNESS: "cannot be dimmed",
    _COLOUR: "cannot change colour",
    _COLOUR_TEMP: "cannot change colour temperature",
}
# Service fields that belong to each kind of setting.
_FIELDS = {
    _BRIGHTNESS: ("brightness_pct", "brightness_step_pct"),
    _COLOUR: ("color_name", "rgb_color"),
    _COLOUR_TEMP: ("color_temp_kelvin",),
}
_COLOUR_MODES = {ColorMode.HS, ColorMode.RGB, ColorMode.RGBW, ColorMode.RGBWW, ColorMode.XY}

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": list(ACTIONS),
            "description": "turn_on (also to change brightness or colour), turn_off or toggle",
        },
        "name": {"type": "string", "description": "Light name or alias; omit for all lights"},
        "area": {"type": "string", "description": "Area (room) name"},
        "floor": {"type": "string", "description": "Floor name"},
        "brightness_pct": {
            "type": "integer",
            "minimum": 0,
            "maximum": 100,
            "description": "Absolute brightness in percent",
        },
        "brightness_step_pct": {
            "type": "integer",
            "minimum": -100,
            "maximum": 100,
            "description": "Relative change in percent points: 10 brighter, -10 dimmer",
        },
        "color_name": {
            "type": "string",
            "description": "CSS colour name, e.g. red, orange, warmwhite, deepskyblue",
        },
        "rgb_color": {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": 255},
            "minItems": 3,
            "maxItems": 3,
            "description": "Colour as [red, green, blue], 0-255 each",
        },
        "color_temp_kelvin": {
            "type": "integer",
            "minimum": 1000,
            "maximum": 10000,
            "description": "White colour temperature in Kelvin: 2700 warm, 6500 cool",
        },
        "transition": {
            "type": "number",
            "minimum": 0,
            "maximum": 300,
            "description": "Fade duration in seconds",
        },
    },
    "required": ["action"],
}


@dataclass(frozen=True, slots=True)
class LightRequest:
    """What the model asked of the lights, validated."""

    action: str
    settings: dict[str, Any]  # turn_on service fields, e.g. {"brightness_pct": 40}
    transition: float | None

    @classmethod
    def from_arguments(cls, arguments: dict[str, Any]) -> LightRequest:
        """Validate the tool arguments; raise a ToolFailure the model can correct."""
        action = arguments.get("action")
        if action not in ACTIONS:
            _invalid(f"action must be one of {', '.join(ACTIONS)}")
        fields = [field for kind_fields in _FIELDS.values() for field in kind_fields]
        settings = {f: arguments[f] for f in fields if arguments.get(f) is not None}
        if settings and action != "turn_on":
            _invalid("brightness and colour can only be set with action turn_on")
        if len(settings.keys() & {"brightness_pct", "brightness_step_pct"}) > 1:
            _invalid("give either brightness_pct or brightness_step_pct, not both")
        if len(settings.keys() & {"color_name", "rgb_color", "color_temp_kelvin"}) > 1:
            _invalid("give one of color_name, rgb_color or color_temp_kelvin")
        if "color_name" in settings:
            settings["color_name"] = _known_colour(settings["color_name"])
        if "rgb_color" in settings:
            settings["rgb_color"] = _rgb(settings["rgb_color"])
        return cls(action, settings, arguments.get("transition"))

    @property
    def kinds(self) -> set[str]:
        """The kinds of setting requested (brightness, colour, colour temperature)."""
        return {kind for kind, fields in _FIELDS.items() if self.settings.keys() & set(fields)}


def _invalid(text: str) -> NoReturn:
    raise ToolFailure({"error": "invalid_arguments", "error_text": text})


def _known_colour(name: str) -> str:
    # Home Assistant turns an unknown colour name into white with only a log warning.
    try:
        color_util.color_name_to_rgb(name)
    except ValueError:
        _invalid(f"'{name}' is not a known colour name; use a CSS colour name or rgb_color")
    return name


def _rgb(value: Any) -> list[int]:
    if not (
        isinstance(value, list)
        and len(value) == 3
        and all(isinstance(c, int) and 0 <= c <= 255 for c in value)
    ):
        _invalid("rgb_color must be three integers from 0 to 255")
    return value


def _supports(state: State, kind: str) -> bool:
    modes = state.attributes.get(ATTR_SUPPORTED_COLOR_MODES)
    if kind == _BRIGHTNESS:
        return brightness_supported(modes)
    if kind == _COLOUR:
        return color_supported(modes)
    # Home Assistant emulates a colour temperature on colour lights.
    return color_temp_supported(modes) or color_supported(modes)


def _plan(state: State, request: LightRequest) -> tuple[dict[str, Any] | None, str | None]:
    """Service data for one light, and a refusal for what it cannot do.

    A light that can do none of the requested settings is left alone (None): turning an
    on/off lamp on in white is not what "make it red" asked for.
    """
    if state.state == STATE_UNAVAILABLE:
        return None, f"{state.name} is unavailable"
    lacking = sorted(kind for kind in request.kinds if not _supports(state, kind))
    refusal = f"{state.name} {' and '.join(_CANNOT[k] for k in lacking)}" if lacking else None
    if lacking and len(lacking) == len(request.kinds):
        return None, refusal
    dropped = {field for kind in lacking for field in _FIELDS[kind]}
    data = {k: v for k, v in request.settings.items() if k not in dropped}
    if request.transition is not None:
        data["transition"] = request.transition
    return data, refusal


async def _apply(tool_context: ToolContext, action: str, plans: dict[str, dict[str, Any]]) -> None:
    """One blocking service call per distinct service data (usually just one)."""
    groups: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for entity_id, data in plans.items():
        key = json.dumps(data, sort_keys=True)
        groups.setdefault(key, (data, []))[1].append(entity_id)
    for data, entity_ids in groups.values():
        await tool_context.hass.services.async_call(
            LIGHT_DOMAIN,
            action,
            {ATTR_ENTITY_ID: entity_ids, **data},
            blocking=True,
            context=tool_context.context,
        )


def light_summary(state: State) -> dict[str, Any]:
    """A light's state as the model needs it: on/off, brightness, colour."""
    summary: dict[str, Any] = {
        "entity_id": state.entity_id,
        "name": state.name,
        "state": state.state,
    }
    if state.state != STATE_ON:
        return summary
    if (brightness := state.attributes.get(ATTR_BRIGHTNESS)) is not None:
        summary["brightness_pct"] = round(brightness / 255 * 100)
    mode = state.attributes.get(ATTR_COLOR_MODE)
    if mode in _COLOUR_MODES and (rgb := state.attributes.get(ATTR_RGB_COLOR)):
        summary["rgb_color"] = list(rgb)
    elif mode == ColorMode.COLOR_TEMP:
        summary["color_temp_kelvin"] = state.attributes.get(ATTR_COLOR_TEMP_KELVIN)
    return summary


async def _light_control(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    request = LightRequest.from_arguments(arguments)
    lights = await resolve_targets(
        tool_context,
        name=arguments.get("name"),
        area=arguments.get("area"),
        floor=arguments.get("floor"),
        domains={LIGHT_DOMAIN},
    )
    plans: dict[str, dict[str, Any]] = {}
    refused: list[str] = []
    for light in lights:
        data, refusal = _plan(light, request)
        if data is not None:
            plans[light.entity_id] = data
        if refusal:
            refused.append(refusal)
    if not plans:
        raise ToolFailure({"error": "unsupported", "error_text": "; ".join(refused) + "."})
    await _apply(tool_context, request.action, plans)

    changed = [tool_context.hass.states.get(entity_id) for entity_id in plans]
    result: dict[str, Any] = {"lights": [light_summary(s) for s in changed if s is not None]}
    if refused:
        result["refused"] = refused
    return result


SPECS: list[ToolSpec] = [
    ToolSpec(
        name="home_light_control",
        description=(
            "Turn lights on, off or toggle them, and set brightness (absolute percent or a "
            "relative step), colour (CSS colour name or RGB), colour temperature (Kelvin) and "
            "fade time. Target one light by name or alias, or many by area or floor; with no "
            "target it acts on the lights of the room the request came from. Returns each "
            "changed light's new state and any light that could not do what was asked."
        ),
        parameters=PARAMETERS,
        category=CATEGORY,
        handler=_light_control,
        domains=frozenset({"light"}),
        covered_by=frozenset({"HassTurnOn", "HassTurnOff", "HassLightSet"}),
    )
]
