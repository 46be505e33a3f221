"""The long-term memory store: LangGraph's BaseStore contract on SQLite, FTS5 and vectors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import closing
from datetime import timedelta
import logging
from pathlib import Path
import re
import sqlite3
import threading
import zlib

from freezegun.api import FrozenDateTimeFactory
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
import pytest

from custom_components.langgraph_conversation.agent.memory import MemoryScope, recall
from custom_components.langgraph_conversation.storage.sqlite import store as store_module
from custom_components.langgraph_conversation.storage.sqlite.store import (
    SCHEMA_VERSION,
    SqliteStore,
)

MEMORIES = ("memories", "anna")

# Unrelated sentences, so that BM25's inverse document frequency is meaningful in ranking tests.
FILLER = {
    "dishwasher": "The dishwasher runs after dinner",
    "school": "Ben walks to school on Mondays",
    "heating": "The heating turns on at six",
    "grandma": "Grandma visits every second Sunday",
    "recycling": "The recycling bin goes out on Thursday",
    "batteries": "Spare batteries are in the hallway drawer",
}

# A stand-in for an embedding model: words are hashed into 64 dimensions, and a few synonyms
# share a concept first, so "automobile" lands near "car" with no word in common.
CONCEPTS = {"automobile": "car", "vehicle": "car", "puppy": "dog", "kitten": "cat"}
DIMS = 64


def fake_vector(text: str) -> list[float]:
    """Bag of concepts hashed into DIMS dimensions; deterministic across runs."""
    vector = [0.0] * DIMS
    for word in re.findall(r"\w+", text.lower()):
        vector[zlib.crc32(CONCEPTS.get(word, word).encode()) % DIMS] += 1.0
    return vector


async def fake_embed(texts: list[str]) -> list[list[float]]:
    """The store's async embedding interface over `fake_vector`."""
    return [fake_vector(text) for text in texts]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """The store file, in a directory the store has to create."""
    return tmp_path / "langgraph_conversation" / "memories.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SqliteStore]:
    """A store with full-text search only."""
    store = await SqliteStore.open(db_path)
    yield store
    await store.aclose()


@pytest.fixture
async def semantic_store(db_path: Path) -> AsyncIterator[SqliteStore]:
    """A store with the fake embedder."""
    store = await SqliteStore.open(db_path, embed=fake_embed, dims=DIMS)
    yield store
    await store.aclose()


async def put_texts(store: SqliteStore, texts: dict[str, str]) -> None:
    """Put {key: text} into MEMORIES, one batch."""
    await store.abatch([PutOp(MEMORIES, key, {"text": text}) for key, text in texts.items()])


def row_counts(path: Path) -> dict[str, int]:
    """Rows per table, read through a second connection (blocking: run in a thread)."""
    with closing(sqlite3.connect(path)) as conn:
        return {
            table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("items", "item_search", "item_vectors")
        }


async def test_put_get_update_delete(store: SqliteStore, freezer: FrozenDateTimeFactory) -> None:
    """Items round-trip; an update keeps created_at and moves updated_at."""
    await store.aput(MEMORIES, "tea", {"text": "Anna likes green tea", "tags": ["drinks"]})
    item = await store.aget(MEMORIES, "tea")
    assert item is not None
    assert item.namespace == MEMORIES
    assert item.key == "tea"
    assert item.value == {"text": "Anna likes green tea", "tags": ["drinks"]}
    assert item.created_at == item.updated_at

    freezer.tick(timedelta(seconds=1))
    await store.aput(MEMORIES, "tea", {"text": "Anna likes black tea"})
    updated = await store.aget(MEMORIES, "tea")
    assert updated is not None
    assert updated.value == {"text": "Anna likes black tea"}
    assert updated.created_at == item.created_at
    assert updated.updated_at > item.updated_at

    await store.adelete(MEMORIES, "tea")
    assert await store.aget(MEMORIES, "tea") is None
    assert await store.aget(("memories", "ben"), "tea") is None


async def test_update_replaces_the_searchable_text(store: SqliteStore) -> None:
    """After an update, the old words no longer find the item."""
    await store.aput(MEMORIES, "tea", {"text": "Anna likes green tea"})
    await store.aput(MEMORIES, "tea", {"text": "Anna likes black coffee"})
    assert await store.asearch(MEMORIES, query="green") == []
    assert [item.key for item in await store.asearch(MEMORIES, query="coffee")] == ["tea"]


async def test_reopen_keeps_data(db_path: Path) -> None:
    """Items and the schema version survive closing and reopening the file."""
    first = await SqliteStore.open(db_path)
    await first.aput(MEMORIES, "tea", {"text": "Anna likes green tea"})
    await first.aclose()
    await first.aclose()  # closing twice is harmless

    second = await SqliteStore.open(db_path)
    try:
        item = await second.aget(MEMORIES, "tea")
        assert item is not None
        assert item.value == {"text": "Anna likes green tea"}
        assert [found.key for found in await second.asearch(MEMORIES, query="tea")] == ["tea"]
        assert (await second.stats())["schema_version"] == SCHEMA_VERSION
    finally:
        await second.aclose()


async def test_closed_store_refuses_work(db_path: Path) -> None:
    """Using a closed store fails loudly instead of hanging."""
    store = await SqliteStore.open(db_path)
    await store.aclose()
    with pytest.raises(sqlite3.ProgrammingError):
        await store.aget(MEMORIES, "tea")


async def test_sync_batch_raises(store: SqliteStore) -> None:
    """The store is async-only; sync calls say so instead of deadlocking the loop."""
    with pytest.raises(RuntimeError, match="async-only"):
        store.batch([GetOp(MEMORIES, "tea")])
    with pytest.raises(RuntimeError, match="async-only"):
        store.put(MEMORIES, "tea", {"text": "Anna likes green tea"})


async def test_abatch_with_mixed_ops(store: SqliteStore) -> None:
    """Operations run in order in one batch, one result each."""
    results = await store.abatch(
        [
            PutOp(MEMORIES, "tea", {"text": "Anna likes green tea"}),
            PutOp(("memories", "ben"), "bike", {"text": "Ben rides a red bike"}),
            GetOp(MEMORIES, "tea"),
            SearchOp(("memories",), query="bike"),
            ListNamespacesOp(),
            PutOp(MEMORIES, "tea", None),
            GetOp(MEMORIES, "tea"),
        ]
    )
    assert results[0] is None
    assert results[1] is None
    assert results[2].value == {"text": "Anna likes green tea"}
    assert [item.key for item in results[3]] == ["bike"]
    assert results[4] == [("memories", "anna"), ("memories", "ben")]
    assert results[5] is None
    assert results[6] is None


async def test_invalid_namespaces_are_refused(store: SqliteStore) -> None:
    """A "." in a label would alias another namespace; an empty namespace holds nothing."""
    with pytest.raises(InvalidNamespaceError):
        await store.abatch([PutOp(("memories.anna",), "tea", {"text": "x"})])
    with pytest.raises(InvalidNamespaceError):
        await store.abatch([PutOp((), "tea", {"text": "x"})])
    with pytest.raises(InvalidNamespaceError):
        await store.abatch([SearchOp(("memories.anna",))])


async def test_list_namespaces(store: SqliteStore) -> None:
    """Prefix and suffix conditions with wildcards, max_depth, limit and offset."""
    for namespace in (
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("ab", "f"),
    ):
        await store.aput(namespace, "k", {"text": "x"})

    assert await store.alist_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert await store.alist_namespaces(suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("ab", "f"),
    ]
    assert await store.alist_namespaces(prefix=("a", "*", "f")) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
    ]
    assert await store.alist_namespaces(prefix=("a",), suffix=("d", "*")) == [
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
    ]
    assert await store.alist_namespaces(max_depth=1) == [("a",), ("ab",)]
    assert await store.alist_namespaces(limit=2, offset=1) == [
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
    ]
    conditions = (MatchCondition("prefix", ("a", "c")), MatchCondition("suffix", ("f",)))
    assert await store.abatch([ListNamespacesOp(match_conditions=conditions)]) == [
        [("a", "c", "f")]
    ]


async def test_search_scopes_by_namespace_prefix(store: SqliteStore) -> None:
    """A prefix covers itself and its children, not namespaces that merely start alike."""
    await store.aput(("user",), "own", {"text": "tea"})
    await store.aput(("user", "anna"), "child", {"text": "tea"})
    await store.aput(("users",), "other", {"text": "tea"})
    found = {item.key for item in await store.asearch(("user",), query="tea")}
    assert found == {"own", "child"}
    assert {item.key for item in await store.asearch(("user",))} == {"own", "child"}
    assert len(await store.asearch((), query="tea")) == 3


async def test_search_ranks_the_more_relevant_item_first(store: SqliteStore) -> None:
    """BM25: the item with both query words beats the one with one word."""
    await put_texts(store, FILLER | {"shed": "The garden shed is green"})
    await put_texts(store, {"tea": "Anna drinks green tea every morning"})
    results = await store.asearch(MEMORIES, query="green tea")
    assert [item.key for item in results] == ["tea", "shed"]
    assert results[0].score > results[1].score > 0
    # Stemming: "drinking" finds "drinks".
    assert [item.key for item in await store.asearch(MEMORIES, query="drinking")] == ["tea"]


async def test_search_for_absent_words_finds_nothing(store: SqliteStore) -> None:
    """A query whose words occur nowhere returns no items (not the newest ones)."""
    await put_texts(store, FILLER)
    assert await store.asearch(MEMORIES, query="zeppelin") == []


async def test_search_drops_the_commonest_words_in_large_stores(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past _MAX_SCORED_ROWS matching rows, the commonest query words no longer select items."""
    await put_texts(store, {key: f"the {text}" for key, text in FILLER.items()})
    await put_texts(store, {"garage": "the bike is in the garage"})
    found = [item.key for item in await store.asearch(MEMORIES, query="the garage", limit=20)]
    assert found[0] == "garage"
    assert len(found) == len(FILLER) + 1

    monkeypatch.setattr(store_module, "_MAX_SCORED_ROWS", 3)
    found = [item.key for item in await store.asearch(MEMORIES, query="the garage", limit=20)]
    assert found == ["garage"]


async def test_search_without_query_is_newest_first(store: SqliteStore) -> None:
    """Without a query, the most recently written items come first, unscored."""
    for key in ("first", "second", "third"):
        await store.aput(MEMORIES, key, {"text": key})
    results = await store.asearch(MEMORIES)
    assert [item.key for item in results] == ["third", "second", "first"]
    assert all(item.score is None for item in results)


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "*",
        "AND",
        "OR",
        "NOT",
        "NEAR(",
        "-",
        "tea AND (coffee OR",
        '"unterminated tea',
        "text:tea",
        "^tea",
        "tea*",
        "{text}: tea",
        "Anna's tea?",
        "'; DROP TABLE items; --",
        "   ",
        "",
        "_",
        "thé",
    ],
)
async def test_search_query_syntax_never_errors(store: SqliteStore, query: str) -> None:
    """User text is quoted word by word: FTS5 operators and punctuation are just text."""
    await put_texts(store, FILLER | {"tea": "Anna likes green tea", "and": "Bread AND butter"})
    results = await store.asearch(MEMORIES, query=query)
    if "tea" in query:
        assert "tea" in [item.key for item in results]
    assert (await store.stats())["items"] == len(FILLER) + 2


async def test_search_filters(store: SqliteStore) -> None:
    """Equality by JSON type and the $eq, $ne, $gt, $gte, $lt, $lte operators."""
    await store.abatch(
        [
            PutOp(MEMORIES, "a", {"text": "tea", "kind": "preference", "weight": 1}),
            PutOp(MEMORIES, "b", {"text": "tea", "kind": "fact", "weight": 2.5, "pinned": True}),
            PutOp(MEMORIES, "c", {"text": "tea", "kind": "fact", "weight": 4, "pinned": False}),
            PutOp(MEMORIES, "d", {"text": "tea", "kind": "1", "tags": ["x", "y"], "note": None}),
        ]
    )

    async def keys(filter_: dict, query: str | None = None) -> set[str]:
        return {item.key for item in await store.asearch(MEMORIES, query=query, filter=filter_)}

    assert await keys({"kind": "fact"}) == {"b", "c"}
    assert await keys({"kind": "fact"}, query="tea") == {"b", "c"}
    assert await keys({"kind": {"$eq": "preference"}}) == {"a"}
    assert await keys({"kind": {"$ne": "fact"}}) == {"a", "d"}
    assert await keys({"weight": {"$gt": 1}}) == {"b", "c"}
    assert await keys({"weight": {"$gte": 2.5, "$lt": 4}}) == {"b"}
    assert await keys({"weight": {"$lte": 2.5}}) == {"a", "b"}
    assert await keys({"pinned": True}) == {"b"}
    assert await keys({"pinned": {"$ne": True}}) == {"a", "c", "d"}
    assert await keys({"note": {"$ne": None}}) == set()  # d has it, but null
    assert await keys({"weight": {"$ne": None}}) == {"a", "b", "c"}
    assert await keys({"kind": 1}) == set()  # the string "1" is not the number 1
    assert await keys({"tags": ["x", "y"]}) == {"d"}
    assert await keys({"note": None}) == {"a", "b", "c", "d"}  # missing counts as null
    assert await keys({"weight": None}) == {"d"}
    assert await keys({"kind": "fact", "weight": {"$gt": 3}}) == {"c"}
    with pytest.raises(ValueError, match="Unsupported filter operator"):
        await keys({"weight": {"$in": [1]}})


@pytest.mark.parametrize("query", [None, "tea"])
async def test_search_limit_and_offset(store: SqliteStore, query: str | None) -> None:
    """Pages tile the full result list, also at offsets beyond 2 * limit."""
    texts = {f"k{index:02d}": "tea " * (1 + index % 5) + f"note {index}" for index in range(25)}
    await put_texts(store, FILLER | texts)
    everything = [item.key for item in await store.asearch(MEMORIES, query=query, limit=100)]
    assert set(everything) == set(texts) | (set(FILLER) if query is None else set())

    pages = [
        [item.key for item in await store.asearch(MEMORIES, query=query, limit=4, offset=offset)]
        for offset in range(0, len(everything) + 4, 4)
    ]
    assert [key for page in pages for key in page] == everything
    deep = await store.asearch(MEMORIES, query=query, limit=2, offset=9)
    assert [item.key for item in deep] == everything[9:11]
    assert await store.asearch(MEMORIES, query=query, limit=5, offset=len(everything)) == []


async def test_concurrent_batches_do_not_interleave(store: SqliteStore) -> None:
    """Many tasks share the one connection; each batch stays its own transaction."""
    await asyncio.gather(
        *(store.aput(MEMORIES, f"k{index}", {"text": f"note {index}"}) for index in range(20)),
        *(store.asearch(MEMORIES, query="note") for _ in range(10)),
    )
    assert (await store.stats())["items"] == 20


async def test_nested_strings_are_searchable(store: SqliteStore) -> None:
    """By default every string in the value is indexed, however deep."""
    value = {"text": "Ben's bike", "where": {"place": "garage"}, "tags": ["bicycle", 3]}
    await store.aput(MEMORIES, "bike", value)
    for word in ("garage", "bicycle"):
        assert [item.key for item in await store.asearch(MEMORIES, query=word)] == ["bike"]


async def test_index_false_and_field_paths(store: SqliteStore) -> None:
    """index=False keeps an item out of text search; a path list indexes only those fields."""
    await store.aput(MEMORIES, "hidden", {"text": "secret tea"}, index=False)
    await store.aput(MEMORIES, "title", {"title": "tea", "body": "coffee"}, index=["title"])
    assert [item.key for item in await store.asearch(MEMORIES, query="tea")] == ["title"]
    assert await store.asearch(MEMORIES, query="coffee") == []
    assert {item.key for item in await store.asearch(MEMORIES)} == {"hidden", "title"}


async def test_semantic_search_finds_synonyms(db_path: Path) -> None:
    """A query sharing no word with the item finds it through the embedding only."""
    texts = FILLER | {
        "car": "The red car is parked in the garage",
        "cat": "The cat sleeps on the sofa",
    }
    plain = await SqliteStore.open(db_path.with_name("plain.db"))
    try:
        await put_texts(plain, texts)
        assert await plain.asearch(MEMORIES, query="automobile") == []
    finally:
        await plain.aclose()

    semantic = await SqliteStore.open(db_path, embed=fake_embed, dims=DIMS)
    try:
        await put_texts(semantic, texts)
        results = await semantic.asearch(MEMORIES, query="automobile", limit=1)
        assert [item.key for item in results] == ["car"]
        assert 0 < results[0].score <= 1
    finally:
        await semantic.aclose()


async def test_hybrid_ranks_lexical_and_semantic_match_first(
    semantic_store: SqliteStore,
) -> None:
    """Both signals beat one: the item that says "automobile" outranks the one about a car."""
    await put_texts(
        semantic_store,
        FILLER
        | {
            "car": "Anna parks her car outside",
            "club": "The automobile club meets on Tuesdays",
        },
    )
    results = await semantic_store.asearch(MEMORIES, query="automobile")
    assert [item.key for item in results[:2]] == ["club", "car"]
    assert 1 >= results[0].score > results[1].score > 0
    paged = await semantic_store.asearch(MEMORIES, query="automobile", limit=1, offset=1)
    assert [item.key for item in paged] == ["car"]


async def test_delete_removes_vector_and_search_rows(
    semantic_store: SqliteStore, db_path: Path
) -> None:
    """No orphans: deleting an item deletes its full-text row and its vector."""
    await put_texts(semantic_store, {"tea": "Anna likes green tea", "car": "The car is red"})
    assert await asyncio.to_thread(row_counts, db_path) == {
        "items": 2,
        "item_search": 2,
        "item_vectors": 2,
    }
    await semantic_store.adelete(MEMORIES, "tea")
    assert await asyncio.to_thread(row_counts, db_path) == {
        "items": 1,
        "item_search": 1,
        "item_vectors": 1,
    }
    stats = await semantic_store.stats()
    assert (stats["items"], stats["vectors"]) == (1, 1)


async def test_embedding_of_the_wrong_size_is_not_stored_and_words_still_work(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A vector of the wrong size is an embedding failure: the memory is kept without it."""
    store = await SqliteStore.open(db_path, embed=fake_embed, dims=DIMS + 1)
    try:
        await store.aput(MEMORIES, "tea", {"text": "Anna likes green tea"})
        await store.aput(MEMORIES, "car", {"text": "The car is red"})
        assert [item.key for item in await store.asearch(MEMORIES, query="tea")] == ["tea"]
        assert (await store.stats())["vectors"] == 0
    finally:
        await store.aclose()
    failures = [r for r in caplog.records if "searching memories by their words" in r.message]
    assert len(failures) == 1
    assert "dimensions" in failures[0].message


async def test_value_size_limit(db_path: Path) -> None:
    """Values over max_value_bytes (as JSON) are refused with the sizes in the message."""
    store = await SqliteStore.open(db_path, max_value_bytes=100)
    try:
        await store.aput(MEMORIES, "small", {"text": "x" * 80})
        with pytest.raises(ValueError, match=r"is 111 bytes as JSON; the limit is 100 bytes"):
            await store.aput(MEMORIES, "large", {"text": "x" * 100})
        assert await store.aget(MEMORIES, "large") is None
    finally:
        await store.aclose()


async def test_eviction_of_least_recently_used(
    db_path: Path, freezer: FrozenDateTimeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Over the limit, the items least recently read or written go, with one log line."""
    store = await SqliteStore.open(db_path, max_items_per_namespace=3)
    try:
        for key in ("a", "b", "c"):
            await store.aput(MEMORIES, key, {"text": f"memory {key}"})
            freezer.tick(timedelta(seconds=1))
        await store.aget(MEMORIES, "a")  # a is now used more recently than b
        freezer.tick(timedelta(seconds=1))
        await store.asearch(MEMORIES, query="memory b", limit=1)  # a hit bumps b past c
        freezer.tick(timedelta(seconds=1))
        await store.aput(("memories", "ben"), "x", {"text": "other namespace"})

        with caplog.at_level(logging.INFO, logger=SqliteStore.__module__):
            await store.abatch(
                [PutOp(MEMORIES, "d", {"text": "memory d"}), PutOp(MEMORIES, "e", {"text": "e"})]
            )

        remaining = {item.key for item in await store.asearch(MEMORIES)}
        assert remaining == {"b", "d", "e"}
        assert await store.aget(("memories", "ben"), "x") is not None
        lines = [record for record in caplog.records if record.name == SqliteStore.__module__]
        assert len(lines) == 1
        assert lines[0].levelno == logging.INFO
        assert "Evicted 2 least recently used memories" in lines[0].getMessage()
    finally:
        await store.aclose()


async def test_ttl_expiry_refresh_and_sweep(
    store: SqliteStore, freezer: FrozenDateTimeFactory
) -> None:
    """Expired items vanish from reads at once; reads refresh the TTL; the sweep deletes."""
    await store.aput(MEMORIES, "short", {"text": "tea"}, ttl=1)
    await store.aput(MEMORIES, "forever", {"text": "tea"})

    freezer.tick(timedelta(seconds=40))
    assert await store.aget(MEMORIES, "short") is not None  # refreshes: expires at 100 s
    freezer.tick(timedelta(seconds=40))
    assert await store.aget(MEMORIES, "short", refresh_ttl=False) is not None
    assert len(await store.asearch(MEMORIES, query="tea", refresh_ttl=False)) == 2
    freezer.tick(timedelta(seconds=30))

    assert await store.aget(MEMORIES, "short") is None
    assert [item.key for item in await store.asearch(MEMORIES, query="tea")] == ["forever"]
    assert [item.key for item in await store.asearch(MEMORIES)] == ["forever"]
    assert (await store.stats())["expired_items"] == 1

    assert await store.asweep_expired() == 1
    assert await store.asweep_expired() == 0
    stats = await store.stats()
    assert (stats["items"], stats["expired_items"]) == (1, 0)


async def test_expired_namespaces_are_not_listed(
    store: SqliteStore, freezer: FrozenDateTimeFactory
) -> None:
    """A namespace whose items all expired is gone from listings, before any sweep."""
    await store.aput(("memories", "guest"), "wifi", {"text": "password on the fridge"}, ttl=1)
    await store.aput(MEMORIES, "tea", {"text": "tea"})
    freezer.tick(timedelta(minutes=2))
    assert await store.alist_namespaces() == [MEMORIES]


async def test_put_over_an_expired_item_starts_afresh(
    store: SqliteStore, freezer: FrozenDateTimeFactory
) -> None:
    """Writing a key whose item expired unswept creates a new item (new created_at)."""
    await store.aput(MEMORIES, "tea", {"text": "tea"}, ttl=1)
    freezer.tick(timedelta(minutes=2))
    await store.aput(MEMORIES, "tea", {"text": "coffee"})
    item = await store.aget(MEMORIES, "tea")
    assert item is not None
    assert item.created_at == item.updated_at


async def test_stats(semantic_store: SqliteStore) -> None:
    """Diagnostics counts, and nothing of the contents."""
    await put_texts(semantic_store, {"tea": "Anna likes green tea"})
    await semantic_store.aput(("memories", "ben"), "bike", {"text": "Ben rides a bike"})
    stats = await semantic_store.stats()
    assert stats == {
        "schema_version": SCHEMA_VERSION,
        "namespaces": 2,
        "items": 2,
        "expired_items": 0,
        "vectors": 2,
        "vectors_of_current_model": 2,
        "file_size_bytes": stats["file_size_bytes"],
    }
    assert stats["file_size_bytes"] > 0
    assert "tea" not in repr(stats)


async def _literal_embed(texts: list[str]) -> list[list[float]]:
    """Another "model": word hashes without concepts, so "automobile" is not near "car"."""
    vectors = []
    for text in texts:
        vector = [0.0] * DIMS
        for word in re.findall(r"\w+", text.lower()):
            vector[zlib.crc32(word.encode()) % DIMS] += 1.0
        vectors.append(vector)
    return vectors


async def test_vectors_of_another_model_are_never_compared(db_path: Path) -> None:
    """After a model change, old vectors are ignored until the backfill replaces them."""
    store = await SqliteStore.open(db_path, embed=fake_embed, embedding_model="concepts")
    try:
        await put_texts(store, FILLER | {"car": "The red car is parked in the garage"})
        assert [i.key for i in await store.asearch(MEMORIES, query="automobile", limit=1)] == [
            "car"
        ]
        store.configure_embeddings(_literal_embed, "literal")
        stats = await store.stats()
        assert (stats["vectors"], stats["vectors_of_current_model"]) == (7, 0)
        # The concept vectors would find the car; the new model's query vector must not
        # be compared with them.
        assert await store.asearch(MEMORIES, query="automobile") == []
        assert await store.abackfill_vectors(5, batch_size=2) == 5
        assert (await store.stats())["vectors_of_current_model"] == 5
        assert await store.abackfill_vectors(100) == 2
        assert await store.abackfill_vectors(100) == 0
        stats = await store.stats()
        assert (stats["vectors"], stats["vectors_of_current_model"]) == (7, 7)
        assert "car" not in {i.key for i in await store.asearch(MEMORIES, query="automobile")}
        # Back to the first model: its vectors were replaced, so the backfill runs again.
        store.configure_embeddings(fake_embed, "concepts")
        assert await store.abackfill_vectors(100) == 7
        assert [i.key for i in await store.asearch(MEMORIES, query="automobile", limit=1)] == [
            "car"
        ]
    finally:
        await store.aclose()


async def test_an_update_without_a_vector_drops_the_stale_one(db_path: Path) -> None:
    """A memory rewritten while embedding fails keeps no vector of its old text."""
    healthy = True

    async def flaky_embed(texts: list[str]) -> list[list[float]]:
        if not healthy:
            raise ConnectionError("embedding server unreachable")
        return await fake_embed(texts)

    store = await SqliteStore.open(db_path, embed=flaky_embed)
    try:
        await store.aput(MEMORIES, "pet", {"text": "The kitten is called Mia"})
        assert (await store.stats())["vectors"] == 1
        healthy = False
        await store.aput(MEMORIES, "pet", {"text": "The car is called Herbie"})
        assert (await store.stats())["vectors"] == 0
        # Words still find it; meaning does not find the old text.
        assert [i.key for i in await store.asearch(MEMORIES, query="Herbie")] == ["pet"]
        assert await store.asearch(MEMORIES, query="cat") == []
        assert await store.abackfill_vectors(10) == 0
        healthy = True
        assert await store.abackfill_vectors(10) == 1
        assert [i.key for i in await store.asearch(MEMORIES, query="automobile")] == ["pet"]
    finally:
        await store.aclose()


async def test_version_1_files_are_migrated_and_their_vectors_backfilled(db_path: Path) -> None:
    """Vectors written before models were recorded count as another model's."""
    store = await SqliteStore.open(db_path, embed=fake_embed)
    await put_texts(store, {"car": "The red car is parked in the garage"})
    await store.aclose()

    def downgrade() -> None:
        with closing(sqlite3.connect(db_path)) as conn:
            conn.execute("ALTER TABLE item_vectors DROP COLUMN model")
            conn.execute("PRAGMA user_version = 1")
            conn.commit()

    await asyncio.to_thread(downgrade)
    store = await SqliteStore.open(db_path, embed=fake_embed)
    try:
        stats = await store.stats()
        assert stats["schema_version"] == 2
        assert (stats["vectors"], stats["vectors_of_current_model"]) == (1, 0)
        assert await store.abackfill_vectors(10) == 1
        assert [i.key for i in await store.asearch(MEMORIES, query="automobile")] == ["car"]
    finally:
        await store.aclose()


async def test_a_recall_searches_every_namespace_of_its_scope_at_once(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signed-in person's turn reads three namespaces (the person's, the user id's, the
    household's): their searches go to the file's thread together, one job for all, not
    one round trip each; each namespace's memory is recalled, best first."""
    scope = MemoryScope.for_user("user-anna", "person.anna")
    assert len(scope.reads) == 3
    words = ["tea", "garden", "bicycle"]
    for namespace, word in zip(scope.reads, words, strict=True):
        await store.aput(namespace, word, {"text": f"Anna's {word} is green, the {word} {word}"})
    queue = store.database._queue
    jobs: list[object] = []
    submit = queue._worker.submit

    def counted(*args: object, **kwargs: object) -> object:
        jobs.append(args[0])
        return submit(*args, **kwargs)

    release = threading.Event()
    started = threading.Event()

    def hold(_connection: sqlite3.Connection) -> None:
        started.set()
        release.wait(timeout=30)

    busy = asyncio.ensure_future(store.database.read(hold))
    await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
    monkeypatch.setattr(queue._worker, "submit", counted)
    recalling = asyncio.ensure_future(recall(store, scope, " ".join(words), 5))
    for _ in range(5):
        await asyncio.sleep(0)
    release.set()
    await busy
    memories = await recalling
    assert sorted(m["id"] for m in memories) == sorted(words)
    assert jobs == []  # all three ran in the job that was busy when they came
