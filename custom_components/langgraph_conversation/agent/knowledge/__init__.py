"""The agent's documents: a folder indexed into passages (text and PDF, the PDF read by a
worker process of its own), searched per turn and by a tool.

The names here are what code outside this folder may use.
"""

from __future__ import annotations

from ..lazy_face import lazy_face

__getattr__, __dir__, __all__ = lazy_face(
    __name__,
    {
        "source": ("KnowledgeSource",),
        "index": (
            "IndexReport",
            "KnowledgeIndex",
            "Passage",
            "forget_knowledge",
            "knowledge_block",
            "passage_flags",
            "search_knowledge_tool",
        ),
    },
)
