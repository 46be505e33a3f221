"""Every tool of ours; agents choose by category ("entities", "lights", "media", "weather",
"history")."""

from __future__ import annotations

from . import entities, history, lights, media, weather
from .registry import ToolRegistry

TOOLS = ToolRegistry([*entities.SPECS, *lights.SPECS, *media.SPECS, *weather.SPECS, *history.SPECS])
