"""The integration's typed config entry: its runtime_data is the entry's `EntryStack`
(stack.py), which holds the model access at once and the `AgentRuntime` once built.

Its own module, low in the house, so that every module may name it for annotations and at
run time without importing the integration's __init__ (which imports most of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from homeassistant.config_entries import ConfigEntry

if TYPE_CHECKING:
    from .stack import EntryStack

type LangGraphConfigEntry = ConfigEntry[EntryStack]
