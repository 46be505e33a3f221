"""The agent runtime: one per config entry (AgentRuntime, a face over a thread
directory, a turn runner, a knowledge library and housekeeping), and the turn it runs.

The names here are what code outside this folder may use.
"""

from __future__ import annotations

from ..lazy_face import lazy_face

__getattr__, __dir__, __all__ = lazy_face(
    __name__,
    {
        "agent_runtime": ("AgentRuntime",),
        "thread_directory": ("MEMORY_THREADS", "memory_checkpointer"),
        "settings": ("AgentSettings",),
        "turn": ("Turn",),
    },
)
