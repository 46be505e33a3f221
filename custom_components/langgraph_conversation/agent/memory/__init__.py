"""What the agent remembers: memories and their tools, recall, learning facts from an
exchange, which thread a conversation continues, and ratings of answers.

The names here are what code outside this folder may use.
"""

from __future__ import annotations

from ..lazy_face import lazy_face

__getattr__, __dir__, __all__ = lazy_face(
    __name__,
    {
        "extraction": ("learn_from_exchange",),
        "ratings": ("RATINGS",),
        "feedback": ("MemoryRatingStore", "RatingStore", "answers"),
        "memories": (
            "HOUSEHOLD",
            "MEMORY_INSTRUCTIONS",
            "MEMORY_ROOT",
            "MemoryPresence",
            "MemoryScope",
            "memory_block",
            "memory_flags",
            "memory_tools",
            "person_label",
            "personal_namespaces",
            "recall",
        ),
        "threads": (
            "LinkStore",
            "MemoryLinkStore",
            "Party",
            "ThreadChoice",
            "ThreadRequest",
            "choose_thread",
            "continue_window",
            "find_thread",
            "forget_thread",
            "known_choice",
        ),
    },
)
