"""Home Assistant's side of the agent's tools: the only code that acts on the home.

A lazy face (agent/lazy_face.py): the agent form's suggestions of critical devices need
none of the tools' libraries, and the tools load with the entry's stack (stack.py).
"""

from __future__ import annotations

from ..agent.lazy_face import lazy_face

__getattr__, __dir__, __all__ = lazy_face(
    __name__,
    {
        # Every tool of ours, by category.
        "all_tools": ("TOOLS",),
        # The agent form's suggestion.
        "critical_devices": ("labelled", "suggested_confirm_entities"),
    },
)
