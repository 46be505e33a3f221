"""Searches that reuse word counts and vectors (search_cache.py) rank exactly as a search that
reads everything from the file, through writes of every kind, and stay within their scope."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
import random
import re
import sqlite3
import zlib

from langgraph.store.base import PutOp, SearchItem
import pytest

from custom_components.langgraph_conversation.storage.sqlite import search_cache
from custom_components.langgraph_conversation.storage.sqlite.search_cache import (
    SearchCache,
    Vectors,
)
from custom_components.langgraph_conversation.storage.sqlite.store import SqliteStore

DIMS = 16
NAMESPACES = (
    ("memories", "anna"),
    ("memories", "anna", "notes"),
    ("memories", "annabel"),
    ("memories", "ben"),
    ("memories", "household"),
)
# "ann" is a prefix of "anna" as text but no namespace's label: it must find nothing.
SCOPES = (("memories",), ("memories", "anna"), ("memories", "ann"), *NAMESPACES)
WORDS = (
    "tea",
    "coffee",
    "keys",
    "garage",
    "car",
    "blanket",
    "heating",
    "window",
    "jazz",
    "pancakes",
    "dentist",
    "piano",
    "yoga",
    "monday",
    "friday",
    "morning",
    "evening",
    "kitchen",
    "attic",
    "drawer",
    "likes",
    "prefers",
    "the",
    "on",
    "in",
    "at",
)


class Embedder:
    """Bag of words hashed into DIMS dimensions; `failing` makes it raise, as a model that
    is down would."""

    def __init__(self) -> None:
        self.failing = False

    async def __call__(self, texts: list[str]) -> list[list[float]]:
        if self.failing:
            raise ConnectionError("embedding model unreachable")
        vectors = []
        for text in texts:
            vector = [0.0] * DIMS
            for word in re.findall(r"\w+", text.lower()):
                vector[zlib.crc32(word.encode()) % DIMS] += 1.0
            vectors.append(vector)
        return vectors


class Uncached(SearchCache):
    """Reads word counts from the file for every search and never keeps vectors: the
    searches as they were before the cache."""

    def term_counts(self, conn: sqlite3.Connection, terms: Sequence[str]) -> list[int]:
        self.invalidate()
        return super().term_counts(conn, terms)

    def vectors(self, conn: sqlite3.Connection, model: str, nbytes: int) -> Vectors | None:
        return None


def sentence(rng: random.Random) -> str:
    """A few words; repeats are common, so equal scores (and their tie-break) occur."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(2, 7)))


def as_compared(items: list[SearchItem]) -> list[tuple]:
    return [(item.namespace, item.key, item.value, item.score) for item in items]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("semantic", [False, True], ids=["words", "hybrid"])
async def test_cached_searches_rank_as_uncached_ones(
    tmp_path: Path, seed: int, semantic: bool
) -> None:
    """Seeded random puts, updates, deletes, evictions, writes by another connection and
    embedding failures, each followed by searches: the store that keeps its cache gives the
    same items, in the same order, with the same scores, as one that reads the file."""
    rng = random.Random(seed)
    path = tmp_path / "memories.db"
    embed = Embedder()
    options = {"embed": embed, "dims": DIMS} if semantic else {}
    cached = await SqliteStore.open(path, max_items_per_namespace=60, **options)
    reference = await SqliteStore.open(path, max_items_per_namespace=60, **options)
    # Another connection writing the same file (say, a second store instance).
    other = await SqliteStore.open(path, max_items_per_namespace=60, **options)
    reference._search_cache = Uncached()
    # The reference must not write: its touches would look like another connection's
    # commits to the cached store, which would then never keep anything.
    reference.keep_reads_untouched()
    try:
        await cached.abatch(
            [
                PutOp(rng.choice(NAMESPACES), f"k{index}", {"text": sentence(rng)})
                for index in range(150)
            ]
        )
        searches = 0
        for _ in range(40):
            action = rng.random()
            writer = other if action < 0.2 else cached
            embed.failing = semantic and rng.random() < 0.15
            if action < 0.5:
                await writer.abatch(
                    [
                        PutOp(
                            rng.choice(NAMESPACES),
                            f"k{rng.randrange(220)}",
                            {"text": sentence(rng), "kind": rng.choice(["a", "b"])},
                        )
                        for _ in range(rng.randrange(1, 6))
                    ]
                )
            elif action < 0.7:
                await writer.abatch([PutOp(rng.choice(NAMESPACES), f"k{rng.randrange(220)}", None)])
            embed.failing = False
            for _ in range(6):
                scope = rng.choice(SCOPES)
                query = sentence(rng)
                options = {
                    "limit": rng.choice([1, 5, 10]),
                    "offset": rng.choice([0, 0, 3]),
                    "filter": rng.choice([None, None, {"kind": "a"}]),
                }
                expected = await reference.asearch(scope, query=query, **options)
                found = await cached.asearch(scope, query=query, **options)
                assert as_compared(found) == as_compared(expected), (scope, query, options)
                # Nobody sees memories outside the namespaces they asked for.
                assert all(item.namespace[: len(scope)] == scope for item in found)
                searches += bool(found)
        assert searches > 100  # the searches found things to compare
    finally:
        for store in (cached, reference, other):
            await store.aclose()


async def test_too_many_vectors_are_read_per_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_VECTOR_BYTES the cache keeps no vectors, and searches still rank by meaning."""
    monkeypatch.setattr(search_cache, "MAX_VECTOR_BYTES", 3 * DIMS * 4)
    embed = Embedder()
    store = await SqliteStore.open(tmp_path / "memories.db", embed=embed, dims=DIMS)
    try:
        texts = {f"k{index}": f"{WORDS[index]} {WORDS[index + 1]}" for index in range(8)}
        await store.abatch([PutOp(NAMESPACES[0], key, {"text": t}) for key, t in texts.items()])
        found = await store.asearch(NAMESPACES[0], query=texts["k5"], limit=1)
        assert [item.key for item in found] == ["k5"]
        assert store._search_cache._vectors == {("default", DIMS * 4): None}
    finally:
        await store.aclose()
