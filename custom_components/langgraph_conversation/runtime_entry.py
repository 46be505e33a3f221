"""The integration's typed config entry: its runtime_data is the entry's AgentRuntime.

Its own module, low in the house, so that every module may name it for annotations and at
run time without importing the integration's __init__ (which imports most of them).
"""

from __future__ import annotations

from homeassistant.config_entries import ConfigEntry

from .agent.runtime import AgentRuntime

type LangGraphConfigEntry = ConfigEntry[AgentRuntime]
