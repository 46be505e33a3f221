"""The healing parts over one storage backend, and which health each part follows.

The conversations (saver), their links and ratings live in one database and fail together;
the memories live in the same database on PostgreSQL, in a file of their own with SQLite
(memory.db beside threads.db). So a backend has one health per database: the caller gives
the conversations' and the memories' (the same object for PostgreSQL).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
import logging
from typing import Any

from ..backend import ConversationLinks, StorageBackend
from .beside import HealingLinks, HealingRatings
from .health import StorageHealth
from .saver import HealingSaver
from .store import HealingStore

_LOGGER = logging.getLogger(__name__)


class HealingStorage:
    """What the agents are given: LangGraph's saver and store, the links and the ratings,
    each going on in memory while its database is down and writing back when it is up."""

    def __init__(
        self,
        backend: Callable[[], StorageBackend | None],
        *,
        threads: StorageHealth,
        memory: StorageHealth,
        memory_links: Callable[[], ConversationLinks],
    ) -> None:
        """`backend` gives the open backend (None while nothing is open); `memory_links`
        makes an in-memory link table (see beside.py)."""
        self.threads_health = threads
        self.memory_health = memory
        # Links and ratings first: their write-back comes before the saver's, whose
        # deletions of conversations also remove their links and ratings in the database.
        self.links = HealingLinks(
            lambda: part.links if (part := backend()) is not None else None,
            threads,
            memory_links,
        )
        self.ratings = HealingRatings(
            lambda: part.ratings if (part := backend()) is not None else None, threads
        )
        self.saver = HealingSaver(
            lambda: part.saver if (part := backend()) is not None else None, threads
        )
        self.store = HealingStore(
            lambda: part.store if (part := backend()) is not None else None, memory
        )
        # The close, once begun (every caller waits for the same one).
        self._closing: asyncio.Future[None] | None = None

    @property
    def healths(self) -> list[StorageHealth]:
        """Each database's health once."""
        if self.memory_health is self.threads_health:
            return [self.threads_health]
        return [self.threads_health, self.memory_health]

    def as_diagnostics(self) -> dict[str, Any]:
        """Each database's state and last outage."""
        if self.memory_health is self.threads_health:
            return {"database": self.threads_health.as_diagnostics()}
        return {
            "conversations": self.threads_health.as_diagnostics(),
            "memory": self.memory_health.as_diagnostics(),
        }

    @property
    def closing(self) -> bool:
        """Whether the close has begun."""
        return self._closing is not None

    async def aclose(self) -> None:
        """Close once; a second caller waits for the first close (see _aclose)."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._aclose())
        await self._closing

    async def _aclose(self) -> None:
        """Stop every retry. Conversations handed to the database and not yet written are
        written first (HealingSaver.settled); a database down with something in memory is
        tried once more (StorageHealth.aclose). What still waits for its database then is
        said in the log: it lives in memory only and ends here."""
        await self.saver.settled()
        # What each database holds in memory (PostgreSQL's one health holds both).
        waiting_for: dict[StorageHealth, int] = {}
        for health, count in (
            (self.threads_health, self.saver.pending() + self.links.pending()),
            (self.threads_health, self.ratings.pending()),
            (self.memory_health, self.store.pending()),
        ):
            waiting_for[health] = waiting_for.get(health, 0) + count
        for health in self.healths:
            await health.aclose(last_attempt=bool(waiting_for.get(health)))
        parts = {
            "conversations": self.saver.pending(),
            "conversation links": self.links.pending(),
            "ratings": self.ratings.pending(),
            "memory writes": self.store.pending(),
        }
        if waiting := {part: count for part, count in parts.items() if count}:
            _LOGGER.warning(
                "Closing while the storage is down: %s said meanwhile could not be written",
                ", ".join(f"{count} {part}" for part, count in waiting.items()),
            )
