"""What the agent remembers: memories and their tools, recall, learning facts from an
exchange, which thread a conversation continues, and ratings of answers.

The names here are what code outside this folder may use.
"""

from __future__ import annotations

from .extraction import learn_from_exchange
from .feedback import RATINGS, MemoryRatingStore, RatingStore, answers
from .memories import (
    HOUSEHOLD,
    MEMORY_INSTRUCTIONS,
    MEMORY_ROOT,
    MemoryPresence,
    MemoryScope,
    memory_block,
    memory_flags,
    memory_tools,
    person_label,
    personal_namespaces,
    recall,
)
from .threads import (
    LinkStore,
    MemoryLinkStore,
    Party,
    ThreadChoice,
    ThreadRequest,
    choose_thread,
    continue_window,
    find_thread,
    forget_thread,
)

__all__ = [
    "HOUSEHOLD",
    "MEMORY_INSTRUCTIONS",
    "MEMORY_ROOT",
    "RATINGS",
    "LinkStore",
    "MemoryLinkStore",
    "MemoryPresence",
    "MemoryRatingStore",
    "MemoryScope",
    "Party",
    "RatingStore",
    "ThreadChoice",
    "ThreadRequest",
    "answers",
    "choose_thread",
    "continue_window",
    "find_thread",
    "forget_thread",
    "learn_from_exchange",
    "memory_block",
    "memory_flags",
    "memory_tools",
    "person_label",
    "personal_namespaces",
    "recall",
]
