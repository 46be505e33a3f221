"""Home Assistant's side of the agent's tools: the only code that acts on the home."""

from __future__ import annotations

from . import entities, history, lights, media, weather
from .critical_devices import (  # the agent form's suggestion
    labelled as labelled,
    suggested_confirm_entities as suggested_confirm_entities,
)
from .registry import ToolRegistry

# Every tool of ours; agents choose by category ("entities", "lights", "media", "weather",
# "history").
TOOLS = ToolRegistry([*entities.SPECS, *lights.SPECS, *media.SPECS, *weather.SPECS, *history.SPECS])
