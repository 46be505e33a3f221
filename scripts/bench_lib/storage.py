"""Figure 5: thread storage size against LangGraph's AsyncSqliteSaver, memory search speed;
on PostgreSQL (a throwaway server from fakes/postgres_server.py: Debian's build in the leg)
the same threads' size in LangGraph's checkpoint tables, and memory search.

The thread file is `storage/sqlite/checkpointer.py`'s `SqliteCheckpointSaver`; the memory
search is memory_search.py's measurement of `storage/sqlite/store.py`'s `SqliteStore`.

The thread figure drives the agent runtime itself (agent/runtime/, no Home Assistant) with
each saver in turn, against the same fake server: the same graph writes the same
checkpoints, so only the savers differ.
"""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
import random
import tempfile
import time
from typing import Any

from .context import Bench
from .report import Row, Stat, judged, ratio_of
from .server import MODEL

PACKAGE = "custom_components.langgraph_conversation"
SIZE_TARGET = 0.10
SEARCH_TARGET_MS = 10.0
SYSTEM_PROMPT = "You are a voice assistant for a home. Answer in one or two short sentences."
QUESTIONS = (
    "How warm is it in the kitchen right now?",
    "Is the garage door closed?",
    "What is the weather going to be like this afternoon?",
    "Turn the living room lights down a little, please.",
    "Remind me what time the dentist appointment is tomorrow.",
)


def _file_bytes(path: Path) -> int:
    """The database with its write-ahead log, if one is left."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def _retention(const: Any) -> tuple[str, int] | None:
    """The integration's default checkpoint retention, if const.py defines one."""
    if isinstance(kept := getattr(const, "CHECKPOINTS_KEPT_PER_THREAD", None), int):
        return "CHECKPOINTS_KEPT_PER_THREAD", kept
    found = [
        (name, value)
        for name, value in vars(const).items()
        if isinstance(value, int)
        and not isinstance(value, bool)
        and any(word in name for word in ("KEEP", "RETAIN", "RETENTION"))
        and "CHECKPOINT" in name
    ]
    return found[0] if len(found) == 1 else None


async def _run_thread(bench: Bench, saver: Any, turns: int) -> None:
    """Run `turns` turns of one thread on a runtime using `saver`."""
    from custom_components.langgraph_conversation.agent.models import ModelAccess, ModelSettings
    from custom_components.langgraph_conversation.agent.runtime import (
        AgentRuntime,
        AgentSettings,
        Turn,
    )

    runtime = AgentRuntime(
        ModelAccess(model=f"ollama_chat/{MODEL}", api_base=bench.server.base_url), saver
    )
    agent = AgentSettings(
        settings=ModelSettings(temperature=0.7, max_tokens=1024, request_timeout=60),
        max_tool_rounds=8,
    )
    rng = random.Random(7)
    for index in range(turns):
        turn = Turn(
            thread_id="bench-thread",
            text=f"{rng.choice(QUESTIONS)} (turn {index})",
            system_prompt=SYSTEM_PROMPT,
            tools=[],
        )
        async for _event in runtime.run_turn(agent, turn):
            pass
    held = len(await runtime.messages("bench-thread"))
    if held != 2 * turns:
        raise RuntimeError(f"the thread holds {held} messages after {turns} turns")


async def thread_size_rows(bench: Bench) -> list[Row]:
    """threads.db after N turns of one thread: ours vs AsyncSqliteSaver."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from custom_components.langgraph_conversation.storage import SqliteCheckpointSaver

    const = importlib.import_module(f"{PACKAGE}.const")
    retention = _retention(const)
    turns = 30 if bench.settings.quick else 200
    sizes: dict[str, int] = {}
    seconds: dict[str, float] = {}
    bench.server.forget()
    with tempfile.TemporaryDirectory(prefix="lgc-bench-threads-") as directory:
        variants: list[tuple[str, dict[str, Any]]] = [("ours", {})]
        if retention is not None:
            variants.append(("ours_retention", {"keep_last": retention[1]}))
        for label, options in variants:
            started = time.perf_counter()
            path = Path(directory) / f"{label}.db"
            saver = await SqliteCheckpointSaver.open(path, **options)
            try:
                await _run_thread(bench, saver, turns)
            finally:
                await saver.aclose()
            sizes[label] = _file_bytes(path)
            seconds[label] = time.perf_counter() - started
        started = time.perf_counter()
        path = Path(directory) / "reference.db"
        async with AsyncSqliteSaver.from_conn_string(str(path)) as reference:
            await _run_thread(bench, reference, turns)
        sizes["AsyncSqliteSaver"] = _file_bytes(path)
        seconds["AsyncSqliteSaver"] = time.perf_counter() - started
    bench.server.forget()
    bench.raw["storage_threads"] = {
        "turns": turns,
        "bytes": sizes,
        "seconds": seconds,
        "retention": retention,
    }

    notes = [
        "figure 5: the ratio column is ours ÷ AsyncSqliteSaver (the core column shows "
        "AsyncSqliteSaver); sizes include the -wal file if one is left"
    ]
    if bench.settings.quick:
        notes.append(f"--quick: figure 5 writes {turns} turns (the full run: 200)")
    if retention is None:
        notes.append(
            "figure 5: const.py defines no default checkpoint retention, so our saver runs "
            "without keep_last (every checkpoint kept)"
        )
    reference = Stat.single(sizes["AsyncSqliteSaver"])
    # The integration's own configuration is judged: with its retention when it has one.
    judged_label = "ours_retention" if retention is not None else "ours"
    rows = []
    for label in ("ours", "ours_retention"):
        if label not in sizes:
            continue
        name = f"threads.db after {turns} turns of one thread, " + (
            f"{retention[0]}={retention[1]} (the integration's setting)"
            if label == "ours_retention" and retention
            else "no retention"
        )
        ours = Stat.single(sizes[label])
        ratio = ratio_of(ours, reference)
        judge = label == judged_label
        rows.append(
            Row(
                figure=5,
                name=name,
                unit="bytes",
                ours=ours,
                core=reference,
                ratio=ratio,
                target=f"≤ {SIZE_TARGET:.0%} of AsyncSqliteSaver's" if judge else "(information)",
                outcome=judged(None if ratio is None else ratio <= SIZE_TARGET)
                if judge
                else "info",
                single=True,
                notes=notes,
            )
        )
    return rows


async def search_rows(bench: Bench) -> list[Row]:
    """Memory search p50/p95 at 1,000 and 10,000 memories."""
    from . import memory_search

    queries = 50 if bench.settings.quick else 200
    modes = [False] if bench.settings.quick else [False, True]
    results: list[dict[str, Any]] = []
    source = "scripts/bench_lib/memory_search.py"
    with tempfile.TemporaryDirectory(prefix="lgc-bench-store-") as directory:
        for items in (1000, 10000):
            for hybrid in modes:
                path = Path(directory) / f"{items}-{hybrid}.db"
                embed = memory_search.fake_embed if hybrid else None
                results.append(await memory_search.run(path, items, queries, 42, embed))
    bench.raw["storage_search"] = {"queries": queries, "source": source, "results": results}
    rows = []
    for result in results:
        items, mode = result["items"], result["mode"]
        judged_row = items == 10000 and mode == "fts"
        rows.append(
            Row(
                figure=5,
                name=f"memory search, {items:,} memories, {mode}",
                unit="ms",
                ours=Stat(result["p50_ms"], result["p95_ms"], queries, result.get("max_ms", 0)),
                core=None,
                target=f"p95 ≤ {SEARCH_TARGET_MS:.0f} ms at 10,000"
                if judged_row
                else "(information)",
                outcome=judged(result["p95_ms"] <= SEARCH_TARGET_MS) if judged_row else "info",
                notes=[f"figure 5: memory search measured by {source}, {queries} queries, limit 5"]
                + (
                    ["--quick: figure 5 searches full-text only (the full run adds hybrid)"]
                    if bench.settings.quick
                    else []
                ),
            )
        )
    return rows


async def _search_postgres(url: str, items: int, queries: int, hybrid: bool) -> dict[str, Any]:
    """Memory search on LangGraph's PostgreSQL store as the integration opens it: words
    only, or words and pgvector with memory_search.py's fake embedder."""
    from langgraph.store.base import PutOp

    from custom_components.langgraph_conversation.storage.postgres import PostgresStorage

    from . import memory_search
    from .report import percentile

    embed = memory_search.fake_embed if hybrid else None
    storage = await PostgresStorage.open(url, embed=embed, embedding_model="bench")
    rng = random.Random(42)
    try:
        for start in range(0, items, 500):
            await storage.store.abatch(
                [
                    PutOp(
                        ("memories", f"person{index % 4}"),
                        f"m{index}",
                        {"text": memory_search.memory(rng)},
                    )
                    for index in range(start, min(start + 500, items))
                ]
            )
        latencies = []
        for _ in range(queries):
            query = memory_search.question(rng)
            start_time = time.perf_counter()
            await storage.store.asearch(("memories",), query=query, limit=5)
            latencies.append((time.perf_counter() - start_time) * 1000)
        mode = "hybrid (pgvector)" if storage.store.index_config is not None else "fts"
    finally:
        await storage.aclose()
    ordered = sorted(latencies)
    return {
        "items": items,
        "mode": mode,
        "p50_ms": percentile(ordered, 50),
        "p95_ms": percentile(ordered, 95),
        "max_ms": ordered[-1],
    }


# LangGraph's checkpoint tables (their indexes and TOAST included by pg_total_relation_size).
_CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


async def _postgres_thread_bytes(
    bench: Bench, server: Any, database: str, turns: int, keep_last: int | None
) -> tuple[int, int]:
    """The same thread as on SQLite, through the saver the integration opens on PostgreSQL;
    the size of LangGraph's checkpoint tables after a VACUUM (what autovacuum leaves: the
    space of pruned checkpoints stays in the files, for reuse) and after VACUUM FULL (the
    live rows only)."""
    from custom_components.langgraph_conversation.storage.postgres import PostgresStorage

    storage = await PostgresStorage.open(server.url(database))
    try:
        storage.saver.keep_last = keep_last
        await _run_thread(bench, storage.saver, turns)
    finally:
        await storage.aclose()
    total = "SELECT " + " + ".join(
        f"pg_total_relation_size('{table}')" for table in _CHECKPOINT_TABLES
    )
    await asyncio.to_thread(server.sql, "VACUUM", database=database)
    on_disk = int(await asyncio.to_thread(server.sql, total, database=database))
    await asyncio.to_thread(server.sql, "VACUUM FULL", database=database)
    live = int(await asyncio.to_thread(server.sql, total, database=database))
    return on_disk, live


async def postgres_thread_rows(bench: Bench, server: Any) -> list[Row]:
    """LangGraph's checkpoint tables on PostgreSQL after figure 5's thread, with and
    without the integration's retention, next to AsyncSqliteSaver's file."""
    from fakes.postgres_server import APP_ROLE

    const = importlib.import_module(f"{PACKAGE}.const")
    retention = _retention(const)
    turns = 30 if bench.settings.quick else 200
    variants: list[tuple[str, int | None]] = [("no retention", None)]
    if retention is not None:
        variants.append(
            (f"{retention[0]}={retention[1]} (the integration's setting)", retention[1])
        )
    sizes: dict[str, tuple[int, int]] = {}
    bench.server.forget()
    for index, (label, keep_last) in enumerate(variants):
        name = f"bench_threads_{index}"
        await asyncio.to_thread(server.sql, f"CREATE DATABASE {name} OWNER {APP_ROLE}")
        sizes[label] = await _postgres_thread_bytes(bench, server, name, turns, keep_last)
    bench.server.forget()
    bench.raw["storage_threads_postgres"] = {"turns": turns, "bytes": sizes}
    reference_bytes = bench.raw.get("storage_threads", {}).get("bytes", {}).get("AsyncSqliteSaver")
    reference = Stat.single(reference_bytes) if reference_bytes else None
    return [
        Row(
            figure=5,
            name=f"PostgreSQL checkpoint tables after {turns} turns of one thread, {label},"
            f" after {vacuum}",
            unit="bytes",
            ours=Stat.single(size),
            core=reference,
            ratio=ratio_of(Stat.single(size), reference) if reference else None,
            target="(information)",
            outcome="info",
            single=True,
            notes=[
                "figure 5: PostgreSQL thread size = pg_total_relation_size of LangGraph's "
                + ", ".join(_CHECKPOINT_TABLES)
                + " (indexes and TOAST included): after VACUUM, as autovacuum leaves them (the"
                " pruned checkpoints' space stays in the files for reuse), and after VACUUM"
                " FULL (live rows); the core column shows AsyncSqliteSaver's file"
            ],
        )
        for label, both in sizes.items()
        for vacuum, size in zip(("VACUUM", "VACUUM FULL"), both, strict=True)
    ]


async def postgres_search_rows(bench: Bench) -> list[Row]:
    """The thread size rows (postgres_thread_rows), then memory search p50/p95 on
    PostgreSQL (fakes/postgres_server.py's server: Debian's build in the leg) at 10,000
    memories, words only and with pgvector."""
    from fakes.postgres_server import APP_ROLE, ServerUnavailable, start_server

    queries = 50 if bench.settings.quick else 200
    try:
        running = await asyncio.to_thread(start_server)
    except ServerUnavailable as err:
        return [_unavailable(f"PostgreSQL memory search ({err})")]
    results: list[dict[str, Any]] = []
    try:
        server = running.server
        thread_rows = await postgres_thread_rows(bench, server)
        for hybrid in (False, True) if server.has_vector else (False,):
            name = f"bench_{int(hybrid)}"
            await asyncio.to_thread(server.sql, f"CREATE DATABASE {name} OWNER {APP_ROLE}")
            if hybrid:
                await asyncio.to_thread(server.sql, "CREATE EXTENSION vector", database=name)
            results.append(await _search_postgres(server.url(name), 10000, queries, hybrid))
    finally:
        await asyncio.to_thread(running.stop)
    bench.raw["storage_search_postgres"] = {"queries": queries, "results": results}
    return thread_rows + [
        Row(
            figure=5,
            name=f"PostgreSQL memory search, {result['items']:,} memories, {result['mode']}",
            unit="ms",
            ours=Stat(result["p50_ms"], result["p95_ms"], queries, result["max_ms"]),
            core=None,
            target="(information)",
            outcome="info",
            notes=[
                f"figure 5: PostgreSQL {queries} queries, limit 5, a local server on 127.0.0.1"
                " (fsync off), memory_search.py's memories, questions and fake embedder"
            ],
        )
        for result in results
    ]


def _unavailable(name: str) -> Row:
    """The row for a measurement this machine cannot make (no PostgreSQL installed)."""
    return Row(
        figure=5,
        name=name,
        unit="",
        ours=None,
        core=None,
        target="(information)",
        outcome="n/a",
        detail="not available",
    )


async def measure(bench: Bench) -> list[Row]:
    """Both parts of figure 5."""
    return [
        *await thread_size_rows(bench),
        *await search_rows(bench),
        *await postgres_search_rows(bench),
    ]
