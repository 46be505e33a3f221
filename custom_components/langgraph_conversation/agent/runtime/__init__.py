"""The agent runtime: one per config entry, and the turn it runs.

The names here are what code outside this folder may use.
"""

from __future__ import annotations

from .agent_runtime import MEMORY_THREADS, AgentRuntime, memory_checkpointer
from .turn import AgentSettings, Turn

__all__ = ["MEMORY_THREADS", "AgentRuntime", "AgentSettings", "Turn", "memory_checkpointer"]
