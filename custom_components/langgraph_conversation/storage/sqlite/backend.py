"""The SQLite backend: conversations in one file, memories in another (storage/backend.py).

The two files open and fail independently: either part may be None while the other works
(the opener, persistence.py, retries a missing one at the next setup). Conversation links
and answer ratings live in the conversations' file, so they come and go with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
import sqlite3
from typing import Any

from ..backend import EmbedFunc
from .checkpointer import SqliteCheckpointSaver
from .database import is_file_fault
from .links import SqliteLinkStore
from .ratings import SqliteRatingStore
from .store import SqliteStore

# What a failing file raises.
SQLITE_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error,)


@dataclass(slots=True)
class SqliteStorage:
    """The conversations' file and the memories' file, each None until it opens."""

    saver: SqliteCheckpointSaver | None = None
    store: SqliteStore | None = None

    @classmethod
    async def open(cls, threads_path: Path, memory_path: Path) -> SqliteStorage:
        """Both files, opened (created and migrated if needed); raises if either fails."""
        saver = await SqliteCheckpointSaver.open(threads_path)
        try:
            store = await SqliteStore.open(memory_path)
        except BaseException:
            await saver.aclose()
            raise
        return cls(saver, store)

    def keep_reads_untouched(self) -> None:
        """Reads leave the memories' times of last use as they were (a copy reads them)."""
        if self.store is not None:
            self.store.keep_reads_untouched()

    @property
    def links(self) -> SqliteLinkStore | None:
        return SqliteLinkStore(self.saver.database) if self.saver is not None else None

    @property
    def ratings(self) -> SqliteRatingStore | None:
        return SqliteRatingStore(self.saver.database) if self.saver is not None else None

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        return SQLITE_ERRORS

    @property
    def embeds(self) -> bool:
        return self.store is not None and self.store.embedding_model is not None

    @property
    def embedding_fixed(self) -> bool:
        # The store takes another embedding function at any time.
        return False

    def keep_checkpoints(self, count: int) -> None:
        if self.saver is not None:
            self.saver.keep_last = count

    def use_embeddings(self, embed: EmbedFunc | None, model: str | None) -> None:
        if self.store is None:
            return
        if embed is None or model is None:
            self.store.configure_embeddings(None)
        else:
            self.store.configure_embeddings(embed, model)

    async def expire_threads(self, cutoff: datetime) -> int:
        if self.saver is None:
            return 0
        return await self.saver.adelete_threads_idle_since(cutoff)

    async def sweep_memories(self) -> int:
        if self.store is None:
            return 0
        return await self.store.asweep_expired()

    async def backfill_vectors(self, limit: int) -> int:
        if self.store is None:
            return 0
        return await self.store.abackfill_vectors(limit)

    async def stats(self) -> dict[str, Any]:
        return {
            "threads": await self.saver.stats() if self.saver else "unavailable",
            "memory": await self.store.stats() if self.store else "unavailable",
        }

    def describe(self, error: BaseException) -> str:
        return str(error)

    def is_outage(self, error: BaseException) -> bool:
        return is_file_fault(error)

    async def check(self) -> None:
        """Each open file takes a write (the healing layer checks them one by one)."""
        for part in (self.saver, self.store):
            if part is not None:
                await part.database.check()

    async def aclose(self) -> None:
        store, self.store = self.store, None
        saver, self.saver = self.saver, None
        if store is not None:
            await store.aclose()
        if saver is not None:
            await saver.aclose()
