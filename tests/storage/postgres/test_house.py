"""storage/postgres/house.py against the installed langgraph-checkpoint-postgres.

Our SQL reads columns of LangGraph's own tables, and our store's words-only search exists
because LangGraph's store ignores a query without a vector index: both are checked here,
so an upstream change that breaks either fails this file first.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
import logging

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.postgres.aio import AsyncPostgresStore
import pytest

from custom_components.langgraph_conversation.storage.postgres import PostgresStorage
from fakes.postgres_server import PostgresServer

# The columns of LangGraph's tables our SQL names (postgres_house.py).
_COLUMNS = {
    "checkpoints": {"thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint"},
    "checkpoint_writes": {"thread_id", "checkpoint_ns", "checkpoint_id"},
    "checkpoint_blobs": {"thread_id", "checkpoint_ns", "channel", "version"},
    "store": {"prefix", "key", "value", "created_at", "updated_at"},
}
# The columns of LangGraph's vector table the backfill writes (WordSearchStore).
_VECTOR_COLUMNS = {"store_vectors": {"prefix", "key", "field_name", "embedding"}}


async def test_langgraphs_tables_have_the_columns_we_read(
    postgres_server: PostgresServer, postgres_url: str, postgres_database: str
) -> None:
    # With pgvector, opened with an index: its vector table is read by the backfill.
    storage = await PostgresStorage.open(
        postgres_url, embed=_topic_vectors if postgres_server.has_vector else None
    )
    await storage.aclose()
    tables = {**_COLUMNS, **(_VECTOR_COLUMNS if postgres_server.has_vector else {})}
    for table, columns in tables.items():
        found = await asyncio.to_thread(
            postgres_server.sql,
            f"SELECT string_agg(column_name, ',') FROM information_schema.columns"
            f" WHERE table_name = '{table}'",
            database=postgres_database,
        )
        assert columns <= set(found.split(",")), (table, found)


async def test_langgraphs_store_ignores_a_query_without_an_index(postgres_url: str) -> None:
    """Why WordSearchStore exists: upstream lists items regardless of the words."""
    storage = await PostgresStorage.open(postgres_url)
    try:
        await storage.store.aput(("memories", "household"), "a", {"text": "The cat is Miso"})
        await storage.store.aput(("memories", "household"), "b", {"text": "Bins on Tuesday"})
        upstream = await AsyncPostgresStore.asearch(
            storage.store, ("memories",), query="cat", limit=10
        )
        ours = await storage.store.asearch(("memories",), query="which cat", limit=10)
    finally:
        await storage.aclose()
    assert {item.key for item in upstream} == {"a", "b"}
    assert [item.key for item in ours] == ["a"]
    assert ours[0].score is not None
    assert ours[0].score > 0


async def test_checkpoints_kept_and_idle_threads(postgres_url: str) -> None:
    """keep_last keeps the newest checkpoints; idle threads go with their links."""
    storage = await PostgresStorage.open(postgres_url)
    try:
        saver = storage.saver
        saver.keep_last = 2
        config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        ids = []
        for step in range(4):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"step": step}
            checkpoint["channel_versions"] = {"step": str(step + 1)}
            config = await saver.aput(config, checkpoint, {"step": step}, {"step": str(step + 1)})
            ids.append(checkpoint["id"])
        kept = [found.checkpoint["id"] async for found in saver.alist(None)]
        assert kept == ids[:1:-1]
        newest = await saver.aget_tuple({"configurable": {"thread_id": "t1"}})
        assert newest is not None
        assert newest.checkpoint["channel_values"] == {"step": 3}
        await storage.links.write(lambda table: table.put("agent", "p", "c1", "t1", 0.0))
        assert await saver.adelete_threads_idle_since(datetime.now(UTC) - timedelta(days=1)) == 0
        assert await saver.adelete_threads_idle_since(datetime.now(UTC) + timedelta(days=1)) == 1
        assert await storage.links.read(lambda table: table.thread_of("agent", "p", "c1")) is None
        assert (await saver.stats())["checkpoints"] == 0
    finally:
        await storage.aclose()


async def test_a_thread_no_link_points_at(postgres_url: str) -> None:
    """Unlinked (a thread a copy brought from a threads.db written before the links):
    checkpoints and no link; a link, or no checkpoint, makes it not so."""
    storage = await PostgresStorage.open(postgres_url)
    try:
        config = {"configurable": {"thread_id": "agent:conversation", "checkpoint_ns": ""}}
        await storage.saver.aput(config, empty_checkpoint(), {"step": 0}, {})
        assert await storage.links.read(lambda t: t.has_unlinked_thread("agent:conversation"))
        assert not await storage.links.read(lambda t: t.has_unlinked_thread("agent:other"))
        await storage.links.write(lambda t: t.put("agent", "p", "c", "agent:conversation", 1.0))
        assert not await storage.links.read(lambda t: t.has_unlinked_thread("agent:conversation"))
    finally:
        await storage.aclose()


# -- vectors: LangGraph's index fed by an embedding function, with words beside it ------

_TOPICS = ("tea", "coffee", "dog", "bike")


async def _topic_vectors(texts: list[str]) -> list[list[float]]:
    """A tiny embedding model: one dimension per topic word."""
    return [[1.0 if topic in text.lower() else 0.01 for topic in _TOPICS] for text in texts]


async def _longer_vectors(texts: list[str]) -> list[list[float]]:
    """Another model, with more dimensions than _topic_vectors."""
    return [[*vector, 0.5] for vector in await _topic_vectors(texts)]


async def _down(texts: list[str]) -> list[list[float]]:
    raise ConnectionError("embedding server unreachable")


def _require_pgvector(server: PostgresServer) -> None:
    if not server.has_vector:
        pytest.skip("the server has no pgvector (Debian's postgresql-NN-pgvector)")


async def test_hybrid_search_finds_items_langgraph_has_no_vector_for(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    """Why the word search stays beside the index: LangGraph's vector search leaves out an
    item stored without a vector (as while the embedding model was down); ours finds it."""
    _require_pgvector(postgres_server)
    storage = await PostgresStorage.open(postgres_url, embed=_topic_vectors, embedding_model="t")
    try:
        assert storage.store.vector_problem is None
        assert storage.store.index_config is not None
        assert storage.store.index_config["dims"] == len(_TOPICS)
        namespace = ("memories", "household")
        await storage.store.aput(namespace, "tea", {"text": "Green tea every morning"})
        await storage.store.aput(namespace, "bike", {"text": "Rides a bike"}, index=False)
        upstream = await AsyncPostgresStore.asearch(
            storage.store, ("memories",), query="bike", limit=10
        )
        ours = await storage.store.asearch(("memories",), query="bike", limit=10)
    finally:
        await storage.aclose()
    assert "bike" not in {item.key for item in upstream}
    assert ours[0].key == "bike"


async def test_dimensions_come_from_stored_vectors_when_the_model_is_down(
    postgres_server: PostgresServer, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Reopened while the embedding model is down: the index keeps the stored vectors' size,
    puts keep their words, searches go by words; one warning for the whole run."""
    _require_pgvector(postgres_server)
    storage = await PostgresStorage.open(postgres_url, embed=_topic_vectors, embedding_model="t")
    try:
        await storage.store.aput(("memories", "u1"), "tea", {"text": "Green tea every morning"})
    finally:
        await storage.aclose()
    with caplog.at_level(logging.WARNING):
        storage = await PostgresStorage.open(postgres_url, embed=_down, embedding_model="t")
        try:
            assert storage.store.index_config is not None
            assert storage.store.index_config["dims"] == len(_TOPICS)
            await storage.store.aput(("memories", "u1"), "dog", {"text": "The dog is Rex"})
            found = await storage.store.asearch(("memories",), query="dog Rex", limit=5)
            listed = await storage.store.asearch(("memories",), limit=5)
        finally:
            await storage.aclose()
    assert [item.key for item in found] == ["dog"]
    assert {item.key for item in listed} == {"tea", "dog"}
    warned = [r for r in caplog.records if "searching memories by their words" in r.message]
    assert len(warned) == 1


async def test_a_model_of_another_size_is_words_only(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    """Vectors of another size cannot share pgvector's column: words only, and why."""
    _require_pgvector(postgres_server)
    storage = await PostgresStorage.open(postgres_url, embed=_topic_vectors, embedding_model="t")
    try:
        await storage.store.aput(("memories", "u1"), "tea", {"text": "Green tea"})
    finally:
        await storage.aclose()
    storage = await PostgresStorage.open(postgres_url, embed=_longer_vectors, embedding_model="l")
    try:
        found = await storage.store.asearch(("memories",), query="tea", limit=5)
        stats = await storage.store.stats()
    finally:
        await storage.aclose()
    assert [item.key for item in found] == ["tea"]
    assert (stats["vector_index"], stats["vector_problem"]) == (
        False,
        "embedding_dimensions_changed",
    )


async def _other_topic_vectors(texts: list[str]) -> list[list[float]]:
    """Another model of _topic_vectors' size whose dimensions mean other things: its vector
    of "tea" is _topic_vectors' vector of "bike"."""
    return [list(reversed(vector)) for vector in await _topic_vectors(texts)]


def _vector_rows(server: PostgresServer, database: str) -> int:
    return int(server.sql("SELECT count(*) FROM store_vectors", database=database))


async def test_another_model_of_the_same_size_never_meets_the_first_ones_vectors(
    postgres_server: PostgresServer, postgres_url: str, postgres_database: str
) -> None:
    """Opened with another embedding model of the same size, the first model's vectors are
    dropped (a search by meaning would compare the two), words still find every memory, and
    the backfill embeds them again with the new model."""
    _require_pgvector(postgres_server)
    storage = await PostgresStorage.open(postgres_url, embed=_topic_vectors, embedding_model="a")
    try:
        await storage.store.aput(("memories", "u1"), "tea", {"text": "Green tea"})
        await storage.store.aput(("memories", "u1"), "bike", {"text": "Rides a bike"})
    finally:
        await storage.aclose()
    assert await asyncio.to_thread(_vector_rows, postgres_server, postgres_database) == 2

    storage = await PostgresStorage.open(
        postgres_url, embed=_other_topic_vectors, embedding_model="b"
    )
    try:
        assert storage.store.index_config is not None
        assert await asyncio.to_thread(_vector_rows, postgres_server, postgres_database) == 0
        # Model b's vector of "bike" is model a's vector of "tea": with a's vectors left,
        # the meaning of "bike" would have found the tea.
        by_meaning = await storage.store.asearch(("memories",), query="bike", limit=5)
        assert [item.key for item in by_meaning] == ["bike"]
        assert await storage.store.abackfill_vectors(10) == 2
        after = await storage.store.asearch(("memories",), query="bike", limit=5)
        stats = await storage.store.stats()
    finally:
        await storage.aclose()
    assert after[0].key == "bike"
    assert stats["vector_problem"] is None
    assert await asyncio.to_thread(_vector_rows, postgres_server, postgres_database) == 2


async def test_a_store_whose_model_another_instance_replaced_uses_no_vectors(
    postgres_server: PostgresServer, postgres_url: str, postgres_database: str
) -> None:
    """Two stores on one database, opened with two models of the same size: the one opened
    first writes and reads no vectors afterwards (they would be the other model's) and says
    why; its memories are still saved and found by their words."""
    _require_pgvector(postgres_server)
    first = await PostgresStorage.open(postgres_url, embed=_topic_vectors, embedding_model="a")
    try:
        second = await PostgresStorage.open(
            postgres_url, embed=_other_topic_vectors, embedding_model="b"
        )
        try:
            await second.store.aput(("memories", "u1"), "tea", {"text": "Green tea"})
            await first.store.aput(("memories", "u1"), "bike", {"text": "Rides a bike"})
            found = await first.store.asearch(("memories",), query="bike", limit=5)
            stats = await first.store.stats()
            # Only the second store's model made vectors.
            assert await first.store.abackfill_vectors(10) == 0
            assert await second.store.abackfill_vectors(10) == 1
        finally:
            await second.aclose()
    finally:
        await first.aclose()
    assert [item.key for item in found] == ["bike"]
    assert stats["vector_problem"] == "vectors_of_another_model"
    assert await asyncio.to_thread(_vector_rows, postgres_server, postgres_database) == 2
