"""Figure 5's memory search: synthetic household memories, questions, a fake embedder.

Fills a fresh store (storage/sqlite/store.py's SqliteStore) with N synthetic household memories
(short sentences from word lists, fixed seed) spread over a few people's namespaces, then
times M searches, with full-text search only and with a fake 64-dimension embedder (hybrid
ranking). storage.py runs `run` for figure 5 and takes `memory`, `question` and
`fake_embed` for the same measurement on PostgreSQL.

Also a command of its own, printing p50/p95/max in milliseconds per N and mode, then one
JSON line with the figures (with a leg's virtualenv python, from the repository root):
    python -m scripts.bench_lib.memory_search [--items 1000,10000] [--queries 200] [--seed 42]
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
import json
from pathlib import Path
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import time
import zlib

from langgraph.store.base import PutOp

from custom_components.langgraph_conversation.storage import SqliteStore

TARGET_P95_MS = 10.0
SEARCH_LIMIT = 5
FILL_BATCH = 200
DIMS = 64

PEOPLE = ("anna", "ben", "clara", "david")
NAMESPACES = [("memories", person) for person in PEOPLE] + [("memories", "household")]
NAMES = ("Anna", "Ben", "Clara", "David", "Grandma", "Grandpa", "the baby", "the cat")
LIKES = ("likes", "prefers", "loves", "dislikes", "cannot stand", "often asks for")
THINGS = (
    "green tea",
    "black coffee",
    "oat milk",
    "spicy food",
    "jazz music",
    "the blue blanket",
    "warm lights",
    "the window open",
    "audiobooks",
    "pancakes",
    "the heating at 21 degrees",
    "quiet evenings",
)
TIMES = (
    "in the morning",
    "on weekends",
    "after dinner",
    "before bed",
    "on Mondays",
    "when it rains",
    "during the holidays",
)
OBJECTS = (
    "spare keys",
    "winter tyres",
    "first aid kit",
    "wifi password",
    "birthday candles",
    "garden hose",
    "passport",
    "vacuum cleaner bags",
)
PLACES = (
    "in the kitchen drawer",
    "in the garage",
    "on the hallway shelf",
    "under the stairs",
    "in the attic",
    "behind the fridge",
    "in the blue box",
)
EVENTS = ("dentist appointment", "football practice", "piano lesson", "book club", "yoga class")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

# The fake embedder folds a few synonyms into one concept, as a real model would.
CONCEPTS = {"tea": "drink", "coffee": "drink", "keys": "key", "tyres": "car", "garage": "car"}


def memory(rng: random.Random) -> str:
    """One household sentence."""
    template = rng.randrange(3)
    if template == 0:
        return f"{rng.choice(NAMES)} {rng.choice(LIKES)} {rng.choice(THINGS)} {rng.choice(TIMES)}"
    if template == 1:
        return f"The {rng.choice(OBJECTS)} are {rng.choice(PLACES)}"
    hour = rng.randrange(7, 20)
    return f"{rng.choice(NAMES)} has {rng.choice(EVENTS)} on {rng.choice(DAYS)} at {hour}:00"


def question(rng: random.Random) -> str:
    """One question as a person would ask it."""
    template = rng.randrange(3)
    if template == 0:
        return f"What does {rng.choice(NAMES)} like {rng.choice(TIMES)}?"
    if template == 1:
        return f"Where are the {rng.choice(OBJECTS)}?"
    return f"When is {rng.choice(NAMES)}'s {rng.choice(EVENTS)}?"


async def fake_embed(texts: list[str]) -> list[list[float]]:
    """Bag of concepts hashed into DIMS dimensions (deterministic, no model)."""
    vectors = []
    for text in texts:
        vector = [0.0] * DIMS
        for word in re.findall(r"\w+", text.lower()):
            vector[zlib.crc32(CONCEPTS.get(word, word).encode()) % DIMS] += 1.0
        vectors.append(vector)
    return vectors


type Embed = Callable[[list[str]], Awaitable[list[list[float]]]]


async def run(path: Path, items: int, queries: int, seed: int, embed: Embed | None) -> dict:
    """Fill a store at `path`, time the searches; the figures for one row of the report."""
    rng = random.Random(seed)
    store = await SqliteStore.open(path, embed=embed, max_items_per_namespace=items)
    try:
        fill_start = time.perf_counter()
        for start in range(0, items, FILL_BATCH):
            await store.abatch(
                [
                    PutOp(rng.choice(NAMESPACES), f"m{index}", {"text": memory(rng)})
                    for index in range(start, min(start + FILL_BATCH, items))
                ]
            )
        fill_seconds = time.perf_counter() - fill_start

        # Half the searches cover one person's namespace, half all memories.
        scopes = [rng.choice([("memories",), rng.choice(NAMESPACES)]) for _ in range(queries)]
        texts = [question(rng) for _ in range(queries)]
        for scope, text in zip(scopes[:10], texts[:10], strict=True):  # warm the page cache
            await store.asearch(scope, query=text, limit=SEARCH_LIMIT)
        latencies = []
        hits = 0
        for scope, text in zip(scopes, texts, strict=True):
            start = time.perf_counter()
            results = await store.asearch(scope, query=text, limit=SEARCH_LIMIT)
            latencies.append((time.perf_counter() - start) * 1000)
            hits += bool(results)
        stats = await store.stats()
    finally:
        await store.aclose()
    return {
        "items": items,
        "mode": "fts" if embed is None else "hybrid",
        "queries": queries,
        "p50_ms": round(statistics.median(latencies), 3),
        "p95_ms": round(statistics.quantiles(latencies, n=100, method="inclusive")[94], 3),
        "max_ms": round(max(latencies), 3),
        "queries_with_hits": hits,
        "fill_items_per_s": round(items / fill_seconds),
        "file_size_bytes": stats["file_size_bytes"],
    }


async def main(sizes: list[int], queries: int, seed: int) -> None:
    """Benchmark every size in both modes and print the table and the JSON line."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="lgc-bench-memory-search-") as directory:
        for items in sizes:
            for embed in (None, fake_embed):
                mode = "fts" if embed is None else "hybrid"
                path = Path(directory) / f"{mode}-{items}.db"
                row = await run(path, items, queries, seed, embed)
                rows.append(row)
                print(
                    f"{items:>7} memories  {mode:<6}  p50 {row['p50_ms']:7.3f} ms"
                    f"  p95 {row['p95_ms']:7.3f} ms  max {row['max_ms']:7.3f} ms"
                    f"  ({row['queries_with_hits']}/{queries} with hits,"
                    f" fill {row['fill_items_per_s']} items/s)"
                )
    largest_fts = max((row for row in rows if row["mode"] == "fts"), key=lambda r: r["items"])
    print(
        json.dumps(
            {
                "benchmark": "store_search",
                "python": sys.version.split()[0],
                "sqlite": sqlite3.sqlite_version,
                "limit": SEARCH_LIMIT,
                "target_p95_ms": TARGET_P95_MS,
                "target_met": largest_fts["p95_ms"] <= TARGET_P95_MS,
                "results": rows,
            }
        )
    )


def parse_args() -> argparse.Namespace:
    """Command line: sizes, number of searches, seed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--items",
        default="1000,10000",
        type=lambda text: [int(part) for part in text.split(",")],
        help="comma-separated numbers of memories (default 1000,10000)",
    )
    parser.add_argument("--queries", type=int, default=200, help="searches per run")
    parser.add_argument("--seed", type=int, default=42, help="seed of the synthetic data")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    asyncio.run(main(args.items, args.queries, args.seed))
