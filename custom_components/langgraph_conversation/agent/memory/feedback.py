"""Feedback on answers: which messages are a thread's answers, and where ratings live.

A turn's answer is its last assistant message, the one that calls no tool. Ratings are
kept by the answer's message id (threads.db, storage/sqlite/ratings.py; in memory when that file
is unavailable), so they stay with the answer whatever happens to older turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from langchain_core.messages import AIMessage


def answers(messages: Sequence[Any]) -> list[AIMessage]:
    """The thread's answers, oldest first: assistant messages that call no tool."""
    return [
        message
        for message in messages
        if isinstance(message, AIMessage)
        and not message.tool_calls
        and not message.invalid_tool_calls
        and message.id
    ]


class RatingStore(Protocol):
    """Where ratings are kept."""

    async def rate(
        self, thread_id: str, message_id: str, rating: str, comment: str, now: float
    ) -> None:
        """Record (or replace) the rating of one answer."""

    async def of_thread(self, thread_id: str) -> dict[str, dict[str, str]]:
        """Message id → {"rating", "comment"} of a thread's rated answers."""


class MemoryRatingStore:
    """Ratings in memory, while conversations are (threads.db unavailable)."""

    def __init__(self) -> None:
        self._ratings: dict[str, dict[str, dict[str, str]]] = {}

    async def rate(
        self, thread_id: str, message_id: str, rating: str, comment: str, now: float
    ) -> None:
        self._ratings.setdefault(thread_id, {})[message_id] = {
            "rating": rating,
            "comment": comment,
        }

    async def of_thread(self, thread_id: str) -> dict[str, dict[str, str]]:
        return dict(self._ratings.get(thread_id, {}))

    def forget(self, thread_id: str) -> None:
        """The thread was deleted."""
        self._ratings.pop(thread_id, None)
