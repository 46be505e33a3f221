"""The agent runtime: one per config entry (AgentRuntime, a face over a thread
directory, a turn runner, a knowledge library and housekeeping), and the turn it runs.

The names here are what code outside this folder may use.
"""

from __future__ import annotations

from .agent_runtime import AgentRuntime
from .thread_directory import MEMORY_THREADS, memory_checkpointer
from .turn import AgentSettings, Turn

__all__ = ["MEMORY_THREADS", "AgentRuntime", "AgentSettings", "Turn", "memory_checkpointer"]
