"""Long-term memories: a LangGraph `BaseStore` on one SQLite file (see database.py).

Why our own store: `langgraph-checkpoint-sqlite` hard-requires sqlite-vec, which has no musl
wheels (Home Assistant OS and Container cannot install it). This store needs only the SQLite
that CPython bundles: FTS5 for full-text search with BM25 ranking and, when an embedding
function is given, float32 vectors ranked with numpy. No SQLite extension is ever loaded.

Schema (version 2, kept in `PRAGMA user_version`; see `_MIGRATIONS`):

    items         id INTEGER PRIMARY KEY, namespace TEXT, key TEXT, value TEXT (JSON,
                  sorted keys), created_at / updated_at / last_used_at REAL (Unix seconds),
                  ttl_minutes REAL, expires_at REAL; UNIQUE (namespace, key)
    item_search   FTS5 (text), rowid = items.id: the item's indexed text
    item_vectors  item_id INTEGER PRIMARY KEY (= items.id), embedding BLOB (L2-normalised
                  float32), model TEXT (the embedding model that made it; version 2)
    items_delete  trigger: deleting an item deletes its search row and its vector

A namespace is stored as its labels joined by "."; `BaseStore` forbids "." in labels, so the
encoding is unambiguous and "every namespace under P" is the text range [P + ".", P + "/").

Ranking of a search with a query (its words are OR-ed; in large stores the commonest are
left out, see _MAX_SCORED_ROWS):
    full text only:  score = -bm25 (FTS5's BM25 is negative; higher score = more relevant)
    with embeddings: the hybrid score of storage/ranking.py, with -bm25 as the word rank
        (0 when the item has no full-text match).
Without a query, items come newest first with score None.

Vectors are tagged with the embedding model that made them, and a search compares only
vectors of the current model: vectors of two models never meet, even of the same size. An
item without a vector of the current model still ranks by its words; `abackfill_vectors`
gives it one. When the embedding function fails, the operation goes on with full text only
(one warning per run of failures): a memory is never lost to an embedding error.

The store is async-only; `SqliteDatabase` (storage/sqlite/database.py) owns the connection, the
pragmas (WAL, busy_timeout), schema versions and the transactions, one at a time.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain
import json
import logging
import math
from pathlib import Path
import re
import sqlite3
import time
from typing import Any, Literal

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    validate_op_namespace,
)
import numpy as np

from ..backend import EmbedFunc
from ..ranking import Scores, hybrid_scores
from .database import SqliteDatabase, is_file_fault
from .search_cache import SearchCache

_LOGGER = logging.getLogger(__name__)

NAMESPACE_SEPARATOR = "."
# The character right after the separator: namespaces below P sort in [P + ".", P + "/").
_AFTER_SEPARATOR = chr(ord(NAMESPACE_SEPARATOR) + 1)

# Words of a query become quoted FTS5 strings; bounding them bounds the cost of a search.
_QUERY_TERM = re.compile(r"[^\W_]+")
_MAX_QUERY_TERMS = 32
# BM25 costs about a microsecond per matching row, so a search keeps the query's rarest words
# until the rows they match add up to this many and drops the commonest ones. Those weigh
# least in BM25 (lowest idf); a word in over half the items has idf <= 0, which FTS5 clamps to
# 1e-6, so dropping it changes nothing. This keeps search fast in large stores.
_MAX_SCORED_ROWS = 5000
# Query vectors remembered, so the same words are embedded once per turn.
_QUERY_VECTORS_KEPT = 32
# After a read could not mark items as used (the file refused writes), reads skip that
# for this many seconds.
_READS_UNTOUCHED_SECONDS = 60

_SCHEMA_V1 = (
    """CREATE TABLE items (
        id INTEGER PRIMARY KEY,
        namespace TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        last_used_at REAL NOT NULL,
        ttl_minutes REAL,
        expires_at REAL,
        UNIQUE (namespace, key)
    )""",
    "CREATE INDEX items_least_used ON items (namespace, last_used_at)",
    "CREATE INDEX items_expiry ON items (expires_at) WHERE expires_at IS NOT NULL",
    # Porter stemming is English-only, but applied to documents and queries alike, so in
    # other languages it at worst merges a few word forms.
    "CREATE VIRTUAL TABLE item_search USING fts5("
    "text, tokenize = 'porter unicode61 remove_diacritics 2')",
    "CREATE TABLE item_vectors (item_id INTEGER PRIMARY KEY, embedding BLOB NOT NULL)",
    """CREATE TRIGGER items_delete AFTER DELETE ON items BEGIN
        DELETE FROM item_search WHERE rowid = old.id;
        DELETE FROM item_vectors WHERE item_id = old.id;
    END""",
)


def _create_schema_v1(conn: sqlite3.Connection) -> None:
    """Items, their full-text rows and vectors; deleting an item deletes both."""
    for statement in _SCHEMA_V1:
        conn.execute(statement)


# Migration N brings the schema from version N to N + 1; append, never edit.
def _tag_vectors_with_model(conn: sqlite3.Connection) -> None:
    """Version 2: each vector says which model made it (earlier ones: unknown, "")."""
    conn.execute("ALTER TABLE item_vectors ADD COLUMN model TEXT NOT NULL DEFAULT ''")


_MIGRATIONS = (_create_schema_v1, _tag_vectors_with_model)
SCHEMA_VERSION = len(_MIGRATIONS)

# Every query below names the items table `i`.
_ITEM_COLUMNS = "i.id, i.namespace, i.key, i.value, i.created_at, i.updated_at"
_LIVE = "(i.expires_at IS NULL OR i.expires_at > ?)"

_UPSERT = """
INSERT INTO items (namespace, key, value, created_at, updated_at, last_used_at,
                   ttl_minutes, expires_at)
VALUES (:namespace, :key, :value, :now, :now, :now, :ttl, :expires_at)
ON CONFLICT (namespace, key) DO UPDATE SET
    value = excluded.value,
    -- an expired item the sweep has not removed yet is gone: its successor starts afresh
    created_at = CASE WHEN items.expires_at <= excluded.updated_at
                      THEN excluded.created_at ELSE items.created_at END,
    updated_at = excluded.updated_at,
    last_used_at = excluded.last_used_at,
    ttl_minutes = excluded.ttl_minutes,
    expires_at = excluded.expires_at
RETURNING id
"""

_TOUCH = """
UPDATE items SET
    last_used_at = :now,
    expires_at = CASE WHEN :refresh AND ttl_minutes IS NOT NULL
                      THEN :now + ttl_minutes * 60 ELSE expires_at END
WHERE id IN (SELECT value FROM json_each(:ids))
"""

_RANGE_OPERATORS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


@dataclass(frozen=True, slots=True)
class _PutPlan:
    """A validated put: what goes into the row and into the search index."""

    namespace: str
    value_json: str
    text: str


type _Ranked = list[tuple[int, SearchItem]]


class SqliteStore(BaseStore):
    """Long-term memories in one SQLite file; create it with `await SqliteStore.open(...)`."""

    supports_ttl = True

    def __init__(
        self,
        database: SqliteDatabase,
        *,
        embed: EmbedFunc | None,
        dims: int | None,
        embedding_model: str,
        max_value_bytes: int,
        max_items_per_namespace: int,
    ) -> None:
        """Wrap an open, migrated database (use `open`)."""
        self._database = database
        self._max_value_bytes = max_value_bytes
        self._max_items_per_namespace = max_items_per_namespace
        self._embed: EmbedFunc | None = None
        self._dims: int | None = None
        self._embedding_model = ""
        self._embedding_failed = False
        self._reads_untouched_until = 0.0
        # Recent query vectors: one turn searches a person's and the household's memories
        # with the same words, and should ask the embedding model once.
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        # Word counts and vectors that searches reuse until a write changes them; used
        # only on the file's thread.
        self._search_cache = SearchCache()
        self.configure_embeddings(embed, embedding_model, dims=dims)

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        embed: EmbedFunc | None = None,
        dims: int | None = None,
        embedding_model: str = "default",
        max_value_bytes: int = 4096,
        max_items_per_namespace: int = 1000,
    ) -> SqliteStore:
        """Open (creating and migrating if needed) the store file at `path`.

        `embedding_model` names the model behind `embed`; it tags the vectors.
        """
        await asyncio.to_thread(_require_fts5)
        database = await SqliteDatabase.open(path, _MIGRATIONS)
        return cls(
            database,
            embed=embed,
            dims=dims,
            embedding_model=embedding_model,
            max_value_bytes=max_value_bytes,
            max_items_per_namespace=max_items_per_namespace,
        )

    @property
    def database(self) -> SqliteDatabase:
        """The file underneath (its health, for whoever reports storage problems)."""
        return self._database

    @property
    def embedding_model(self) -> str | None:
        """The model whose vectors searches use; None when searching full text only."""
        return self._embedding_model if self._embed is not None else None

    def configure_embeddings(
        self, embed: EmbedFunc | None, model: str = "default", *, dims: int | None = None
    ) -> None:
        """Use `embed` (named `model`) from now on, or full text only with None.

        Vectors of another model stay in the file, unused, until items get one of the
        current model (on write, or by `abackfill_vectors`), so switching back is cheap.
        """
        if dims is not None and embed is None:
            raise ValueError("dims only applies with an embed function")
        if embed is not None and not model:
            raise ValueError("an embed function needs the name of its model")
        self._embed = embed
        self._dims = dims
        self._embedding_model = model if embed is not None else ""
        self._embedding_failed = False
        self._query_vectors.clear()

    async def aclose(self) -> None:
        """Close the connection and end its thread; later calls do nothing."""
        await self._database.close()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Refuse: this store is async-only."""
        # All work runs on the file's thread and is awaited on the event loop; a sync call
        # from the loop thread would block the loop while waiting for it, a deadlock.
        raise RuntimeError(
            "SqliteStore is async-only: use abatch, aget, aput, adelete, asearch or "
            "alist_namespaces"
        )

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order, in one transaction; one result per operation."""
        ops = list(ops)
        plans = self._plan_puts(ops)
        # Embeddings may take a network round trip: compute them before taking the lock.
        model = self._embedding_model
        vectors = await self._embed_ops(ops, plans)
        reads_only = not any(isinstance(op, PutOp) for op in ops)
        if reads_only and time.monotonic() < self._reads_untouched_until:
            return await self._read_without_touching(ops, vectors, model)
        # The time is read here, not on the file's thread: it is the time of the request.
        now = time.time()

        def write(conn: sqlite3.Connection) -> tuple[list[Result], dict[str, int]]:
            if not reads_only:
                self._search_cache.invalidate()
            results = [
                self._run(conn, op, plans.get(index), vectors.get(index), model, now)
                for index, op in enumerate(ops)
            ]
            return results, self._evict(conn, {plan.namespace for plan in plans.values()})

        try:
            results, evicted = await self._database.write(write)
        except sqlite3.Error as err:
            if not reads_only or not is_file_fault(err):
                raise
            # The file cannot be written (locked by another program, disk full, read-only):
            # reading still works, so memories are still found, just not marked as used.
            # For a while, reads do not even try to write (a lock costs busy_timeout).
            _LOGGER.warning("Memories are read without marking them as used: %s", err)
            self._reads_untouched_until = time.monotonic() + _READS_UNTOUCHED_SECONDS
            return await self._read_without_touching(ops, vectors, model)
        if evicted:
            _LOGGER.info(
                "Evicted %d least recently used memories to keep at most %d per namespace: %s",
                sum(evicted.values()),
                self._max_items_per_namespace,
                ", ".join(f"{namespace} ({count})" for namespace, count in evicted.items()),
            )
        return results

    def keep_reads_untouched(self) -> None:
        """From now on reads do not mark items as used: for a copy that must leave the file
        exactly as it was (storage/copy.py)."""
        self._reads_untouched_until = math.inf

    async def _read_without_touching(
        self, ops: list[Op], vectors: dict[int, np.ndarray], model: str
    ) -> list[Result]:
        now = time.time()

        def read(conn: sqlite3.Connection) -> list[Result]:
            return [
                self._run(conn, op, None, vectors.get(index), model, now, touch=False)
                for index, op in enumerate(ops)
            ]

        return await self._database.read(read)

    async def asweep_expired(self) -> int:
        """Delete expired items (with their search rows and vectors); return how many."""
        now = time.time()

        def sweep(conn: sqlite3.Connection) -> int:
            self._search_cache.invalidate()
            return conn.execute(
                "DELETE FROM items WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)
            ).rowcount

        return await self._database.write(sweep)

    async def stats(self) -> dict[str, Any]:
        """Counts and sizes for diagnostics; never any contents."""
        now, model = time.time(), self._embedding_model

        def read(conn: sqlite3.Connection) -> tuple[Any, ...]:
            return (
                *_fetch_row(
                    conn,
                    "SELECT COUNT(DISTINCT namespace), COUNT(*),"
                    " COUNT(*) FILTER (WHERE expires_at <= ?) FROM items",
                    (now,),
                ),
                *_fetch_row(
                    conn,
                    "SELECT COUNT(*), COUNT(*) FILTER (WHERE model = ?) FROM item_vectors",
                    (model,),
                ),
                *_fetch_row(conn, "PRAGMA page_count"),
                *_fetch_row(conn, "PRAGMA page_size"),
            )

        (
            namespaces,
            items,
            expired,
            vectors,
            current_vectors,
            page_count,
            page_size,
        ) = await self._database.read(read)
        return {
            "schema_version": self._database.schema_version,
            "namespaces": namespaces,
            "items": items,
            "expired_items": expired,
            "vectors": vectors,
            "vectors_of_current_model": current_vectors if self._embed is not None else 0,
            "file_size_bytes": page_count * page_size,
        }

    def _plan_puts(self, ops: list[Op]) -> dict[int, _PutPlan]:
        """Validate every operation and serialise the values to write, before any I/O."""
        plans: dict[int, _PutPlan] = {}
        for index, op in enumerate(ops):
            validate_op_namespace(op)
            if isinstance(op, PutOp) and op.value is not None:
                plans[index] = self._plan_put(op, op.value)
        return plans

    def _plan_put(self, op: PutOp, value: Mapping[str, Any]) -> _PutPlan:
        if not op.namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        value_json = _to_json(dict(value))
        size = len(value_json.encode())
        if size > self._max_value_bytes:
            raise ValueError(
                f"Memory {op.key!r} in namespace {op.namespace} is {size} bytes as JSON; "
                f"the limit is {self._max_value_bytes} bytes"
            )
        return _PutPlan(_encode_namespace(op.namespace), value_json, _index_text(value, op.index))

    async def _embed_ops(self, ops: list[Op], plans: dict[int, _PutPlan]) -> dict[int, np.ndarray]:
        """Unit vectors, by operation index, for indexed puts and searches with a query.

        Empty when the embedding function fails: the operations then go on with full
        text only, and the items written get their vectors from the backfill later.
        """
        if self._embed is None:
            return {}
        texts = {index: plan.text for index, plan in plans.items() if plan.text}
        vectors: dict[int, np.ndarray] = {}
        for index, op in enumerate(ops):
            if isinstance(op, SearchOp) and op.query and op.query.strip():
                if (cached := self._query_vectors.get(op.query)) is not None:
                    vectors[index] = cached
                else:
                    texts[index] = op.query
        if not texts:
            return vectors
        embedded = await self._embed_texts(list(texts.values()))
        if embedded is None:
            return {}
        for index, vector in zip(texts, embedded, strict=True):
            vectors[index] = vector
            op = ops[index]
            if isinstance(op, SearchOp) and op.query:
                self._query_vectors[op.query] = vector
                while len(self._query_vectors) > _QUERY_VECTORS_KEPT:
                    self._query_vectors.popitem(last=False)
        return vectors

    async def _embed_texts(self, texts: list[str]) -> list[np.ndarray] | None:
        """Unit vectors of `texts`, or None (logged once per run of failures) on failure."""
        assert self._embed is not None
        try:
            embeddings = await self._embed(texts)
            if len(embeddings) != len(texts):
                raise ValueError(
                    f"The embedding function returned {len(embeddings)} vectors "
                    f"for {len(texts)} texts"
                )
            vectors = [self._unit_vector(embedding) for embedding in embeddings]
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001  any failure means: full text only
            if not self._embedding_failed:
                self._embedding_failed = True
                _LOGGER.warning(
                    "Embedding model %s failed, searching memories by their words only: %s",
                    self._embedding_model,
                    err,
                )
            return None
        if self._embedding_failed:
            self._embedding_failed = False
            _LOGGER.info("Embedding model %s works again", self._embedding_model)
        return vectors

    async def abackfill_vectors(self, limit: int, *, batch_size: int = 32) -> int:
        """Embed up to `limit` items that lack a vector of the current model; how many got one.

        Stops early when the embedding function fails (the next run tries again).
        """
        if self._embed is None:
            return 0
        model = self._embedding_model
        done = 0
        while done < limit:
            wanted = min(batch_size, limit - done)
            rows = await self._database.read(
                lambda conn, wanted=wanted: conn.execute(
                    "SELECT s.rowid, s.text FROM item_search AS s"
                    " LEFT JOIN item_vectors AS v ON v.item_id = s.rowid AND v.model = ?"
                    " WHERE v.item_id IS NULL ORDER BY s.rowid LIMIT ?",
                    (model, wanted),
                ).fetchall()
            )
            if not rows:
                break
            vectors = await self._embed_texts([text for _, text in rows])
            if vectors is None or model != self._embedding_model:
                break
            # Only where the item still has the text that was embedded.
            stored = [
                (item_id, vector.tobytes(), model, item_id, text)
                for (item_id, text), vector in zip(rows, vectors, strict=True)
            ]

            def store_vectors(conn: sqlite3.Connection, stored: list[tuple] = stored) -> None:
                self._search_cache.invalidate()
                conn.executemany(
                    "INSERT OR REPLACE INTO item_vectors (item_id, embedding, model)"
                    " SELECT ?, ?, ? WHERE EXISTS"
                    " (SELECT 1 FROM item_search WHERE rowid = ? AND text = ?)",
                    stored,
                )

            await self._database.write(store_vectors)
            done += len(rows)
        return done

    def _unit_vector(self, embedding: list[float]) -> np.ndarray:
        vector = np.asarray(embedding, dtype=np.float32)
        if vector.ndim != 1:
            raise ValueError(f"The embedding function returned an array of shape {vector.shape}")
        if self._dims is not None and vector.shape[0] != self._dims:
            raise ValueError(
                f"The embedding function returned {vector.shape[0]} dimensions; "
                f"the store expects {self._dims}"
            )
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector

    def _run(
        self,
        conn: sqlite3.Connection,
        op: Op,
        plan: _PutPlan | None,
        vector: np.ndarray | None,
        model: str,
        now: float,
        *,
        touch: bool = True,
    ) -> Result:
        match op:
            case GetOp():
                return _get(conn, op, now, touch=touch)
            case SearchOp():
                return _search(conn, op, vector, model, now, touch=touch, cache=self._search_cache)
            case ListNamespacesOp():
                return _list_namespaces(conn, op, now)
            case PutOp() if plan is None:
                conn.execute(
                    "DELETE FROM items WHERE namespace = ? AND key = ?",
                    (_encode_namespace(op.namespace), op.key),
                )
            case PutOp() if plan is not None:
                _put(conn, op, plan, vector, model, now)
            case _:
                raise TypeError(f"Unknown store operation: {op!r}")
        return None

    def _evict(self, conn: sqlite3.Connection, namespaces: set[str]) -> dict[str, int]:
        """Trim namespaces over the limit, least recently used first; count per namespace."""
        evicted: dict[str, int] = {}
        for namespace in sorted(namespaces):
            (count,) = _fetch_row(
                conn, "SELECT COUNT(*) FROM items WHERE namespace = ?", (namespace,)
            )
            excess = count - self._max_items_per_namespace
            if excess > 0:
                conn.execute(
                    "DELETE FROM items WHERE id IN (SELECT id FROM items WHERE namespace = ?"
                    " ORDER BY last_used_at, id LIMIT ?)",
                    (namespace, excess),
                )
                evicted[namespace] = excess
        return evicted


def _require_fts5() -> None:
    """Fail clearly when this Python's SQLite lacks FTS5 (blocking: run in the executor)."""
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("CREATE VIRTUAL TABLE fts5_probe USING fts5(text)")
    except sqlite3.OperationalError as err:
        raise RuntimeError(
            f"This Python's SQLite {sqlite3.sqlite_version} lacks FTS5 full-text search, "
            "which the memory store needs"
        ) from err
    finally:
        probe.close()


def _fetch_row(
    conn: sqlite3.Connection, sql: str, params: Iterable[Any] | Mapping[str, Any] = ()
) -> tuple[Any, ...]:
    """The one row that `sql` returns (an aggregate, a pragma, RETURNING)."""
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise RuntimeError(f"Expected a row from: {sql}")
    return tuple(row)


def _get(conn: sqlite3.Connection, op: GetOp, now: float, *, touch: bool = True) -> Item | None:
    row = conn.execute(
        f"SELECT {_ITEM_COLUMNS} FROM items AS i WHERE i.namespace = ? AND i.key = ? AND {_LIVE}",
        (_encode_namespace(op.namespace), op.key, now),
    ).fetchone()
    if row is None:
        return None
    if touch:
        _touch(conn, [row[0]], now, refresh_ttl=op.refresh_ttl)
    return _item(row)


def _put(
    conn: sqlite3.Connection,
    op: PutOp,
    plan: _PutPlan,
    vector: np.ndarray | None,
    model: str,
    now: float,
) -> None:
    (item_id,) = _fetch_row(
        conn,
        _UPSERT,
        {
            "namespace": plan.namespace,
            "key": op.key,
            "value": plan.value_json,
            "now": now,
            "ttl": op.ttl,
            "expires_at": None if op.ttl is None else now + op.ttl * 60,
        },
    )
    conn.execute("DELETE FROM item_search WHERE rowid = ?", (item_id,))
    if plan.text:
        conn.execute("INSERT INTO item_search (rowid, text) VALUES (?, ?)", (item_id, plan.text))
    # A vector of the old text would be wrong for the new one: without a new vector (no
    # embedding model, or it failed) the item waits for the backfill.
    if vector is None:
        conn.execute("DELETE FROM item_vectors WHERE item_id = ?", (item_id,))
    else:
        conn.execute(
            "INSERT OR REPLACE INTO item_vectors (item_id, embedding, model) VALUES (?, ?, ?)",
            (item_id, vector.tobytes(), model),
        )


def _touch(conn: sqlite3.Connection, item_ids: list[int], now: float, *, refresh_ttl: bool) -> None:
    """Mark items as used (for eviction) and, if asked, restart their time to live."""
    if item_ids:
        conn.execute(_TOUCH, {"now": now, "refresh": refresh_ttl, "ids": json.dumps(item_ids)})


def _search(
    conn: sqlite3.Connection,
    op: SearchOp,
    query_vector: np.ndarray | None,
    model: str,
    now: float,
    *,
    touch: bool = True,
    cache: SearchCache,
) -> list[SearchItem]:
    scope, scope_params = _search_scope(op, now)
    terms = _query_terms(op.query or "")
    match_expression = _match_expression(cache.term_counts(conn, terms), terms) if terms else None
    if query_vector is not None:
        ranked = _hybrid_search(
            conn, op, scope, scope_params, match_expression, query_vector, model, cache
        )
    elif match_expression:
        ranked = _scored_rows(
            conn,
            f"SELECT {_ITEM_COLUMNS}, -bm25(item_search) FROM item_search"
            f" JOIN items AS i ON i.id = item_search.rowid"
            f" WHERE item_search MATCH ? AND {scope}"
            f" ORDER BY bm25(item_search), i.updated_at DESC, i.id DESC LIMIT ? OFFSET ?",
            [match_expression, *scope_params, op.limit, op.offset],
        )
    elif terms:
        ranked = []  # no word of the query occurs in any item
    else:
        ranked = _scored_rows(
            conn,
            f"SELECT {_ITEM_COLUMNS}, NULL FROM items AS i WHERE {scope}"
            f" ORDER BY i.updated_at DESC, i.id DESC LIMIT ? OFFSET ?",
            [*scope_params, op.limit, op.offset],
        )
    if touch:
        _touch(conn, [item_id for item_id, _ in ranked], now, refresh_ttl=op.refresh_ttl)
    return [item for _, item in ranked]


def _scored_rows(conn: sqlite3.Connection, sql: str, params: list[Any]) -> _Ranked:
    """Rows of `_ITEM_COLUMNS` followed by a score, as (item id, SearchItem)."""
    rows = conn.execute(sql, params).fetchall()
    return [(row[0], _search_item(row, row[6])) for row in rows]


def _hybrid_search(
    conn: sqlite3.Connection,
    op: SearchOp,
    scope: str,
    scope_params: list[Any],
    match_expression: str | None,
    query_vector: np.ndarray,
    model: str,
    cache: SearchCache,
) -> _Ranked:
    """Rank every candidate in scope by the hybrid score (module docstring), then page."""
    lexical_rows: list[sqlite3.Row] = []
    if match_expression:
        lexical_rows = conn.execute(
            "SELECT i.id, -bm25(item_search) FROM item_search"
            f" JOIN items AS i ON i.id = item_search.rowid WHERE item_search MATCH ? AND {scope}",
            [match_expression, *scope_params],
        ).fetchall()
    ids, scores = hybrid_scores(
        _lexical_scores(lexical_rows),
        _cosine_similarities(conn, scope, scope_params, query_vector, model, cache),
    )
    # Best first; equal scores put the more recently created item (higher id) first.
    order = np.lexsort((-ids, -scores))[op.offset : op.offset + op.limit]
    page = [(int(ids[position]), float(scores[position])) for position in order]
    rows = {
        row[0]: row
        for row in conn.execute(
            f"SELECT {_ITEM_COLUMNS} FROM items AS i"
            " WHERE i.id IN (SELECT value FROM json_each(?))",
            (json.dumps([item_id for item_id, _ in page]),),
        )
    }
    return [(item_id, _search_item(rows[item_id], score)) for item_id, score in page]


def _lexical_scores(rows: list[sqlite3.Row]) -> Scores:
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    return ids, np.fromiter((row[1] for row in rows), dtype=np.float64, count=len(rows))


def _cosine_similarities(
    conn: sqlite3.Connection,
    scope: str,
    scope_params: list[Any],
    query_vector: np.ndarray,
    model: str,
    cache: SearchCache,
) -> Scores:
    """Cosine similarity per item in scope; both sides are unit vectors: a dot product.

    Only the current model's vectors are comparable with the query's (the size check
    guards against a model that changed its output size under the same name). SQL picks
    the items in scope; their vectors come from the cache when it holds them all.
    """
    vectors = cache.vectors(conn, model, query_vector.nbytes)
    if vectors is not None:
        # Straight from the cursor: no list of 10,000 one-element rows in between.
        ids = np.fromiter(
            chain.from_iterable(
                conn.execute(
                    "SELECT v.item_id FROM item_vectors AS v JOIN items AS i ON i.id = v.item_id"
                    f" WHERE v.model = ? AND length(v.embedding) = ? AND {scope}",
                    [model, query_vector.nbytes, *scope_params],
                )
            ),
            dtype=np.int64,
        )
        if not ids.size:
            return ids, np.zeros(0)
        matrix = vectors.rows_of(ids)
        if matrix is not None:
            return ids, matrix @ query_vector
        cache.invalidate()  # cannot happen while writes invalidate; read the file instead
    rows = conn.execute(
        "SELECT v.item_id, v.embedding FROM item_vectors AS v JOIN items AS i ON i.id = v.item_id"
        f" WHERE v.model = ? AND length(v.embedding) = ? AND {scope}",
        [model, query_vector.nbytes, *scope_params],
    ).fetchall()
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    if not rows:
        return ids, np.zeros(0)
    matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32)
    return ids, matrix.reshape(len(rows), -1) @ query_vector


def _list_namespaces(
    conn: sqlite3.Connection, op: ListNamespacesOp, now: float
) -> list[tuple[str, ...]]:
    # There are few namespaces (one per person plus a household one): match them in Python.
    namespaces = [
        _decode_namespace(namespace)
        for (namespace,) in conn.execute(
            f"SELECT DISTINCT i.namespace FROM items AS i WHERE {_LIVE}", (now,)
        )
    ]
    conditions = op.match_conditions or ()
    matching = {
        namespace[: op.max_depth] if op.max_depth is not None else namespace
        for namespace in namespaces
        if all(_namespace_matches(condition, namespace) for condition in conditions)
    }
    return sorted(matching)[op.offset : op.offset + op.limit]


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Prefix or suffix match, where a "*" label matches any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        labels = namespace[: len(path)]
    elif condition.match_type == "suffix":
        labels = namespace[len(namespace) - len(path) :]
    else:
        raise ValueError(f"Unsupported namespace match type: {condition.match_type!r}")
    return all(wanted in ("*", label) for wanted, label in zip(path, labels, strict=True))


def _search_scope(op: SearchOp, now: float) -> tuple[str, list[Any]]:
    """SQL condition (on `i`) and parameters: live items under the prefix, matching filters."""
    clauses = [_LIVE]
    params: list[Any] = [now]
    if op.namespace_prefix:
        prefix = _encode_namespace(op.namespace_prefix)
        clauses.append("(i.namespace = ? OR (i.namespace >= ? AND i.namespace < ?))")
        params += [prefix, prefix + NAMESPACE_SEPARATOR, prefix + _AFTER_SEPARATOR]
    for field, condition in (op.filter or {}).items():
        sql, values = _filter_clause(field, condition)
        clauses.append(sql)
        params += values
    return " AND ".join(clauses), params


def _filter_clause(field: str, condition: Any) -> tuple[str, list[Any]]:
    """A top-level field of the value equals `condition` or satisfies its $-operators."""
    if isinstance(condition, Mapping) and any(str(key).startswith("$") for key in condition):
        parts = [_operator_clause(field, op, operand) for op, operand in condition.items()]
        sql = " AND ".join(part for part, _ in parts)
        return sql, [value for _, values in parts for value in values]
    return _equals_clause(field, condition)


def _operator_clause(field: str, operator: str, operand: Any) -> tuple[str, list[Any]]:
    if operator == "$eq":
        return _equals_clause(field, operand)
    if operator == "$ne":
        sql, params = _equals_clause(field, operand)
        return f"NOT ({sql})", params
    if operator in _RANGE_OPERATORS:
        comparable = f"{_ordered_json_type(operand)} AND f.value {_RANGE_OPERATORS[operator]} ?"
        return _field_matches(comparable), [field, operand]
    raise ValueError(
        f"Unsupported filter operator {operator!r}; use $eq, $ne, $gt, $gte, $lt or $lte"
    )


def _field_matches(condition: str) -> str:
    """EXISTS over the value's top-level fields; the first parameter is the field name.

    json_each takes the field name as a parameter, so any name works, with no JSON path
    syntax to escape.
    """
    return f"EXISTS (SELECT 1 FROM json_each(i.value) AS f WHERE f.key = ? AND {condition})"


def _equals_clause(field: str, expected: Any) -> tuple[str, list[Any]]:
    """Equality with JSON types kept apart (true is not 1, "1" is not 1), as in JSONB."""
    if expected is None:
        # A missing field counts as null, as in LangGraph's in-memory store.
        has_value = _field_matches("f.type <> 'null'")
        return f"NOT {has_value}", [field]
    if isinstance(expected, bool):
        return _field_matches("f.type = ?"), [field, "true" if expected else "false"]
    if isinstance(expected, int | float):
        return _field_matches("f.type IN ('integer', 'real') AND f.value = ?"), [field, expected]
    if isinstance(expected, str):
        return _field_matches("f.type = 'text' AND f.value = ?"), [field, expected]
    # Objects and arrays compare whole; stored values have sorted keys, and so does this one.
    return (
        _field_matches("f.type IN ('object', 'array') AND f.value = json(?)"),
        [field, _to_json(expected)],
    )


def _ordered_json_type(operand: Any) -> str:
    if isinstance(operand, int | float) and not isinstance(operand, bool):
        return "f.type IN ('integer', 'real')"
    if isinstance(operand, str):
        return "f.type = 'text'"
    raise ValueError(f"Range filters compare numbers or strings, not {operand!r}")


def _query_terms(query: str) -> list[str]:
    """The words of free text as FTS5 strings: each one quoted, so nothing is syntax."""
    words = dict.fromkeys(word.lower() for word in _QUERY_TERM.findall(query))
    return [f'"{word}"' for word in list(words)[:_MAX_QUERY_TERMS]]


def _match_expression(counts: list[int], terms: list[str]) -> str | None:
    """The FTS5 expression for a search: the terms that occur, within _MAX_SCORED_ROWS.

    `counts` says how many items contain each term (SearchCache.term_counts).

    Terms are OR-ed: BM25 ranks items matching more (and rarer) words first, while a memory
    that shares only some words with a spoken question is still found. None when no term
    occurs in any item.
    """
    kept: list[str] = []
    rows = 0
    for count, term in sorted(zip(counts, terms, strict=True)):
        if count == 0:
            continue
        if kept and rows + count > _MAX_SCORED_ROWS:
            break
        kept.append(term)
        rows += count
    return " OR ".join(kept) or None


def _index_text(value: Mapping[str, Any], index: Literal[False] | list[str] | None) -> str:
    """The text to search: all string values by default, the given paths, or none."""
    if index is False:
        return ""
    texts = (
        _string_leaves(value)
        if index is None
        else (text for path in index for text in get_text_at_path(value, path))
    )
    return "\n".join(text for text in texts if text.strip())


def _string_leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for child in value.values():
            yield from _string_leaves(child)
    elif isinstance(value, list | tuple):
        for child in value:
            yield from _string_leaves(child)


def _to_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _encode_namespace(namespace: tuple[str, ...]) -> str:
    return NAMESPACE_SEPARATOR.join(namespace)


def _decode_namespace(namespace: str) -> tuple[str, ...]:
    return tuple(namespace.split(NAMESPACE_SEPARATOR))


def _timestamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _item(row: sqlite3.Row) -> Item:
    return Item(
        namespace=_decode_namespace(row[1]),
        key=row[2],
        value=json.loads(row[3]),
        created_at=_timestamp(row[4]),
        updated_at=_timestamp(row[5]),
    )


def _search_item(row: sqlite3.Row, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=_decode_namespace(row[1]),
        key=row[2],
        value=json.loads(row[3]),
        created_at=_timestamp(row[4]),
        updated_at=_timestamp(row[5]),
        score=score,
    )
