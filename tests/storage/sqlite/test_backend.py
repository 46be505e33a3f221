"""The SQLite backend (storage/sqlite/backend.py) with a file missing: the other part
works, and what the missing one would answer is nothing rather than a failure."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from custom_components.langgraph_conversation.storage import SqliteStorage, SqliteStore


async def test_nothing_open_answers_nothing() -> None:
    files = SqliteStorage()
    assert (files.saver, files.store, files.links, files.ratings) == (None, None, None, None)
    assert files.embeds is False
    files.keep_checkpoints(2)
    files.use_embeddings(None, None)
    assert await files.expire_threads(datetime.now(UTC)) == 0
    assert await files.sweep_memories() == 0
    assert await files.backfill_vectors(10) == 0
    assert await files.stats() == {"threads": "unavailable", "memory": "unavailable"}
    await files.aclose()


async def test_memories_without_the_conversations_file(tmp_path: Path) -> None:
    """memory.db opened, threads.db did not: memories work, links and ratings are None."""
    files = SqliteStorage(store=await SqliteStore.open(tmp_path / "memory.db"))
    try:
        assert files.links is None
        assert files.ratings is None
        stats = await files.stats()
        assert stats["threads"] == "unavailable"
        assert stats["memory"]["items"] == 0
    finally:
        await files.aclose()
    assert files.store is None
