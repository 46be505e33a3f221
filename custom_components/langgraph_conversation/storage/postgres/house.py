"""What our SQLite files offer beyond LangGraph's interfaces, on LangGraph's PostgreSQL saver
and store: checkpoints kept per thread, idle expiry, conversation links, ratings, searching
memories by their words (alone without a vector index, with the vectors when there is one),
an embedding failure that falls back to words instead of failing, and sizes for diagnostics.

The saver and the store stay LangGraph's own classes (subclassed, every LangGraph method
untouched but the two named below). Our tables live next to theirs, prefixed `lgc_`.
The SQL on LangGraph's tables reads their columns only (thread_id, checkpoint_ns,
checkpoint_id, the checkpoint's `ts` and `channel_versions`, the store's prefix and value),
which tests/storage/postgres/test_house.py checks against the installed version.

Vectors of two embedding models must never meet in one search, even when they have the
same size (the SQLite store tags each vector with its model). LangGraph's `store_vectors`
has no column for the model and is not ours to alter, so `lgc_vector_model` names the one
model whose vectors it holds: a store opened with another model drops them (they are
derived data; the maintenance backfill embeds the memories again, and meanwhile words find
them), and a store whose model is no longer the named one (another Home Assistant on the
same database opened with another model) uses no vectors until it is opened again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import datetime
import logging
import re
import threading
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.base import Op, PutOp, Result, SearchItem, SearchOp
from langgraph.store.postgres.aio import AsyncPostgresStore
import numpy as np
import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from ..backend import EmbedFunc
from ..ranking import Scores, hybrid_scores

_LOGGER = logging.getLogger(__name__)

LINKS_TABLE = "lgc_conversation_links"
RATINGS_TABLE = "lgc_answer_ratings"
VECTOR_MODEL_TABLE = "lgc_vector_model"
# WordSearchStore.vector_problem while another embedding model owns the vectors.
VECTORS_OF_ANOTHER_MODEL = "vectors_of_another_model"

SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS {LINKS_TABLE} (
        agent_id TEXT NOT NULL,
        party TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        last_used DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (agent_id, party, conversation_id))""",
    f"CREATE INDEX IF NOT EXISTS {LINKS_TABLE}_recent"
    f" ON {LINKS_TABLE} (agent_id, party, last_used)",
    f"CREATE INDEX IF NOT EXISTS {LINKS_TABLE}_by_thread ON {LINKS_TABLE} (thread_id)",
    f"""CREATE TABLE IF NOT EXISTS {RATINGS_TABLE} (
        thread_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        rating TEXT NOT NULL,
        comment TEXT NOT NULL,
        rated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (thread_id, message_id))""",
    # One row at most: the embedding model whose vectors store_vectors holds.
    f"""CREATE TABLE IF NOT EXISTS {VECTOR_MODEL_TABLE} (
        only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
        model TEXT NOT NULL)""",
)

type Pool = AsyncConnectionPool[psycopg.AsyncConnection[dict[str, Any]]]


async def create_tables(connection: psycopg.AsyncConnection[dict[str, Any]]) -> None:
    """Our tables, created if missing (autocommit: each statement on its own)."""
    for statement in SCHEMA:
        await connection.execute(statement)


async def claim_vectors(connection: psycopg.AsyncConnection[dict[str, Any]], model: str) -> bool:
    """Make `model` the one whose vectors LangGraph's store_vectors holds (after its store's
    setup); True when the vectors there were dropped, being another model's or untagged."""
    async with connection.transaction():
        # Two instances opening at once: one claims after the other, never both half-way.
        await connection.execute(f"LOCK TABLE {VECTOR_MODEL_TABLE} IN EXCLUSIVE MODE")
        cursor = await connection.execute(f"SELECT model FROM {VECTOR_MODEL_TABLE}")
        row = await cursor.fetchone()
        if row is not None and row["model"] == model:
            return False
        # Untagged vectors (written before the tag existed) count as unknown, as on SQLite.
        cursor = await connection.execute("DELETE FROM store_vectors")
        await connection.execute(
            f"INSERT INTO {VECTOR_MODEL_TABLE} (model) VALUES (%s)"
            " ON CONFLICT (only_row) DO UPDATE SET model = excluded.model",
            (model,),
        )
        return cursor.rowcount > 0


class HouseSaver(AsyncPostgresSaver):
    """LangGraph's PostgreSQL saver that keeps the newest `keep_last` checkpoints per thread."""

    keep_last: int | None = None

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        saved = await super().aput(config, checkpoint, metadata, new_versions)
        if self.keep_last is not None:
            configurable = saved["configurable"]
            await self._keep_newest(
                configurable["thread_id"], configurable.get("checkpoint_ns", ""), self.keep_last
            )
        return saved

    async def _keep_newest(self, thread_id: str, namespace: str, keep: int) -> None:
        """Older checkpoints of the thread go, with their writes and the values no kept
        checkpoint refers to (a pending confirmation lives in the newest one's writes)."""
        pool: Pool = self.conn  # type: ignore[assignment]
        async with pool.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                "DELETE FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s"
                " AND checkpoint_id NOT IN (SELECT checkpoint_id FROM checkpoints"
                "  WHERE thread_id = %s AND checkpoint_ns = %s"
                "  ORDER BY checkpoint_id DESC LIMIT %s)",
                (thread_id, namespace, thread_id, namespace, keep),
            )
            if not cursor.rowcount:
                return
            await connection.execute(
                "DELETE FROM checkpoint_writes AS w WHERE w.thread_id = %s"
                " AND w.checkpoint_ns = %s AND NOT EXISTS (SELECT 1 FROM checkpoints AS c"
                "  WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns"
                "  AND c.checkpoint_id = w.checkpoint_id)",
                (thread_id, namespace),
            )
            await connection.execute(
                "DELETE FROM checkpoint_blobs AS b WHERE b.thread_id = %s"
                " AND b.checkpoint_ns = %s AND NOT EXISTS (SELECT 1 FROM checkpoints AS c"
                "  WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns"
                "  AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)",
                (thread_id, namespace),
            )

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread whole, its conversation links and answer ratings too, as
        threads.db does: a cleared conversation leaves nothing of it behind."""
        await super().adelete_thread(thread_id)
        await self._delete_links_and_ratings([thread_id])

    async def _delete_links_and_ratings(self, thread_ids: list[str]) -> None:
        pool: Pool = self.conn  # type: ignore[assignment]
        async with pool.connection() as connection, connection.transaction():
            await connection.execute(
                f"DELETE FROM {LINKS_TABLE} WHERE thread_id = ANY(%s)", (thread_ids,)
            )
            await connection.execute(
                f"DELETE FROM {RATINGS_TABLE} WHERE thread_id = ANY(%s)", (thread_ids,)
            )

    async def adelete_threads_idle_since(self, cutoff: datetime) -> int:
        """Delete threads whose newest checkpoint is older than `cutoff`, with their links
        and ratings; links unused since then go too. How many threads went."""
        pool: Pool = self.conn  # type: ignore[assignment]
        # Checkpoint times are ISO 8601 in UTC, which sort as text.
        stamp = cutoff.isoformat()
        async with pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT thread_id FROM checkpoints GROUP BY thread_id"
                " HAVING max(checkpoint ->> 'ts') < %s",
                (stamp,),
            )
            idle = [row["thread_id"] for row in await cursor.fetchall()]
        for thread_id in idle:
            await self.adelete_thread(thread_id)
        async with pool.connection() as connection:
            await connection.execute(
                f"DELETE FROM {LINKS_TABLE} WHERE last_used < %s", (cutoff.timestamp(),)
            )
        return len(idle)

    async def stats(self) -> dict[str, Any]:
        """Counts for diagnostics, never contents."""
        pool: Pool = self.conn  # type: ignore[assignment]
        async with pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT"
                " (SELECT count(DISTINCT thread_id) FROM checkpoints) AS threads,"
                " (SELECT count(*) FROM checkpoints) AS checkpoints,"
                " (SELECT count(*) FROM checkpoint_writes) AS writes,"
                " (SELECT count(*) FROM checkpoint_blobs) AS blobs,"
                f" (SELECT count(*) FROM {LINKS_TABLE}) AS conversation_links,"
                f" (SELECT count(*) FROM {RATINGS_TABLE} WHERE rating = 'up') AS answers_rated_up,"
                f" (SELECT count(*) FROM {RATINGS_TABLE} WHERE rating = 'down')"
                "  AS answers_rated_down"
            )
            row = await cursor.fetchone()
        return {"backend": "postgresql", **(row or {})}


_WORD = re.compile(r"\w+")


class EmbeddingFailed(Exception):
    """The embedding function failed; the store goes on by words (never fails a turn)."""


class GuardedEmbed:
    """The entry's embedding function as the store's index calls it: a failure becomes
    EmbeddingFailed, logged once per run of failures (as the SQLite store does)."""

    def __init__(self, embed: EmbedFunc, model: str) -> None:
        self._embed = embed
        self.model = model
        self._failing = False

    async def __call__(self, texts: list[str]) -> list[list[float]]:
        try:
            vectors = await self._embed(texts)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001  any failure means: words only, this time
            if not self._failing:
                self._failing = True
                _LOGGER.warning(
                    "Embedding model %s failed, searching memories by their words only: %s",
                    self.model,
                    err,
                )
            raise EmbeddingFailed(str(err)) from None
        if self._failing:
            self._failing = False
            _LOGGER.info("Embedding model %s works again", self.model)
        return vectors


class WordSearchStore(AsyncPostgresStore):
    """LangGraph's PostgreSQL store, searched by words as well.

    Without a vector index a search with a query finds items by their words (LangGraph's
    store ignores the query then and lists items). With one, LangGraph's vector search and
    the word search are combined (hybrid, as on SQLite: an item saved while the embedding
    model was down has no vector but still has its words). When the embedding model fails,
    puts are stored without a vector and searches go by words: nothing is lost, no turn fails.
    """

    # Why vectors are not used, for diagnostics (None: they are, or no model was chosen).
    vector_problem: str | None = None
    # The embedding model this store's vectors are made with (claim_vectors), with an index.
    vector_model: str | None = None

    async def _owns_vectors(self) -> bool:
        """Whether the vectors in the database are still this store's model's (another
        instance may have opened the database with another model since)."""
        if self.vector_model is None:
            return True
        pool: Pool = self.conn  # type: ignore[assignment]
        async with pool.connection() as connection:
            cursor = await connection.execute(f"SELECT model FROM {VECTOR_MODEL_TABLE}")
            row = await cursor.fetchone()
        if row is not None and row["model"] == self.vector_model:
            if self.vector_problem == VECTORS_OF_ANOTHER_MODEL:
                self.vector_problem = None  # claimed back for this model by another opening
            return True
        if self.vector_problem != VECTORS_OF_ANOTHER_MODEL:
            self.vector_problem = VECTORS_OF_ANOTHER_MODEL
            _LOGGER.warning(
                "Memory vectors on PostgreSQL are now made by another embedding model than"
                " %s (another Home Assistant on the same database?); memories are searched"
                " by their words until this one is set up again",
                self.vector_model,
            )
        return False

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        if not query or filter:
            return await super().asearch(
                namespace_prefix,
                query=query,
                filter=filter,
                limit=limit,
                offset=offset,
                refresh_ttl=refresh_ttl,
            )
        words = list(dict.fromkeys(word.lower() for word in _WORD.findall(query)))
        if self.index_config is None:
            if not words:
                return []
            return await self._search_words(namespace_prefix, words, limit, offset)
        # Both rankings need the best `offset + limit` of their own to page the merge.
        wanted = offset + limit
        by_words = await self._search_words(namespace_prefix, words, wanted, 0) if words else []
        if not await self._owns_vectors():
            return by_words[offset:wanted]
        try:
            # Straight to LangGraph's batch (not through the queue), so an embedding failure
            # reaches this search alone.
            (by_meaning,) = await AsyncPostgresStore.abatch(
                self,
                [SearchOp(namespace_prefix, query=query, limit=wanted, refresh_ttl=refresh_ttl)],
            )
        except EmbeddingFailed:
            return by_words[offset:wanted]
        return _hybrid(by_words, by_meaning)[offset:wanted]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """LangGraph's batch; if embedding fails, again without vectors (puts keep their
        words, searches go by words), so operations batched with it fail neither."""
        ops = list(ops)
        if self.index_config is None or not any(map(_uses_vectors, ops)):
            return await super().abatch(ops)
        if await self._owns_vectors():
            try:
                return await super().abatch(ops)
            except EmbeddingFailed:
                pass
        return await self._batch_without_vectors(ops)

    async def _batch_without_vectors(self, ops: list[Op]) -> list[Result]:
        """The batch with puts stored without a vector and searches by words."""
        results: list[Result] = [None] * len(ops)
        plain: list[tuple[int, Op]] = []
        for position, op in enumerate(ops):
            if isinstance(op, SearchOp) and op.query and not op.filter:
                words = list(dict.fromkeys(word.lower() for word in _WORD.findall(op.query)))
                results[position] = (
                    await self._search_words(op.namespace_prefix, words, op.limit, op.offset)
                    if words
                    else []
                )
            elif isinstance(op, SearchOp) and op.query:
                # With a filter the query only ranked by vectors: list the filtered items.
                plain.append((position, op._replace(query=None)))
            elif isinstance(op, PutOp) and op.value is not None and op.index is not False:
                plain.append((position, op._replace(index=False)))
            else:
                plain.append((position, op))
        if plain:
            done = await super().abatch([op for _, op in plain])
            for (position, _), result in zip(plain, done, strict=True):
                results[position] = result
        return results

    async def abackfill_vectors(self, limit: int, *, batch_size: int = 32) -> int:
        """Give up to `limit` items with a "text" but no vector one (saved while the
        embedding model was down, or copied in without one); how many got one.

        Writes LangGraph's vector rows as its own put does (the columns
        tests/storage/postgres/test_house.py checks), without touching the items, whose
        times stay as they were. Stops at an embedding failure (the next run tries again).
        """
        if self.embeddings is None or not await self._owns_vectors():
            return 0
        pool: Pool = self.conn  # type: ignore[assignment]
        done = 0
        while done < limit:
            async with pool.connection() as connection:
                cursor = await connection.execute(
                    "SELECT s.prefix, s.key, s.value ->> 'text' AS text FROM store AS s"
                    " WHERE jsonb_typeof(s.value -> 'text') = 'string'"
                    " AND NOT EXISTS (SELECT 1 FROM store_vectors AS v"
                    "  WHERE v.prefix = s.prefix AND v.key = s.key)"
                    " ORDER BY s.updated_at DESC LIMIT %s",
                    (min(batch_size, limit - done),),
                )
                rows = await cursor.fetchall()
            if not rows:
                break
            try:
                vectors = await self.embeddings.aembed_documents([row["text"] for row in rows])
            except EmbeddingFailed:
                break
            async with pool.connection() as connection, connection.transaction():
                for row, vector in zip(rows, vectors, strict=True):
                    # Only if the item still has the text that was embedded.
                    await connection.execute(
                        "INSERT INTO store_vectors (prefix, key, field_name, embedding)"
                        " SELECT prefix, key, 'text', %s FROM store"
                        " WHERE prefix = %s AND key = %s AND value ->> 'text' = %s"
                        " ON CONFLICT (prefix, key, field_name) DO NOTHING",
                        (vector, row["prefix"], row["key"], row["text"]),
                    )
            done += len(rows)
        return done

    async def _search_words(
        self, namespace_prefix: tuple[str, ...], words: list[str], limit: int, offset: int
    ) -> list[SearchItem]:
        """Items in the namespace with any of the words, ranked by PostgreSQL's full text
        rank over every string in the value ('simple': no language, no stemming)."""
        prefix = ".".join(namespace_prefix)
        pattern = _like_literal(prefix) + ".%"
        pool: Pool = self.conn  # type: ignore[assignment]
        async with pool.connection() as connection:
            cursor = await connection.execute(
                "WITH q AS (SELECT to_tsquery('simple', %s) AS query)"
                " SELECT prefix, key, value, created_at, updated_at,"
                "  ts_rank(jsonb_to_tsvector('simple', value, '[\"string\"]'), q.query) AS score"
                " FROM store, q"
                " WHERE (prefix = %s OR prefix LIKE %s ESCAPE '\\')"
                "  AND jsonb_to_tsvector('simple', value, '[\"string\"]') @@ q.query"
                " ORDER BY score DESC, updated_at DESC LIMIT %s OFFSET %s",
                (" | ".join(_lexeme(word) for word in words), prefix, pattern, limit, offset),
            )
            rows = await cursor.fetchall()
        return [
            SearchItem(
                namespace=tuple(row["prefix"].split(".")),
                key=row["key"],
                value=row["value"],
                created_at=row["created_at"],
                updated_at=row["updated_at"],
                score=float(row["score"]),
            )
            for row in rows
        ]

    async def stats(self) -> dict[str, Any]:
        """Counts for diagnostics, never contents."""
        pool: Pool = self.conn  # type: ignore[assignment]
        async with pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT count(*) AS items, count(DISTINCT prefix) AS namespaces FROM store"
            )
            row = await cursor.fetchone()
        return {
            "backend": "postgresql",
            **(row or {}),
            "vector_index": self.index_config is not None,
            "vector_problem": self.vector_problem,
        }


def _uses_vectors(op: Op) -> bool:
    """Whether LangGraph's store embeds for `op` (with an index): a put that indexes, a
    search with a query."""
    if isinstance(op, PutOp):
        return op.value is not None and op.index is not False
    return isinstance(op, SearchOp) and bool(op.query)


def _hybrid(by_words: list[SearchItem], by_meaning: list[SearchItem]) -> list[SearchItem]:
    """One ranking (storage/ranking.py) of the word search's items (ts_rank) and the vector
    search's (LangGraph's score, a cosine similarity); equal scores newest first."""
    items: dict[tuple[tuple[str, ...], str], SearchItem] = {}
    for item in (*by_words, *by_meaning):
        items.setdefault((item.namespace, item.key), item)
    position = {key: number for number, key in enumerate(items)}

    def scores(found: list[SearchItem]) -> Scores:
        ids = np.fromiter(
            (position[(item.namespace, item.key)] for item in found), np.int64, len(found)
        )
        return ids, np.fromiter((item.score or 0.0 for item in found), np.float64, len(found))

    ids, combined = hybrid_scores(scores(by_words), scores(by_meaning))
    keys = list(items)
    ranked = sorted(
        zip(ids.tolist(), combined.tolist(), strict=True),
        key=lambda scored: (scored[1], items[keys[scored[0]]].updated_at),
        reverse=True,
    )
    return [_scored(items[keys[number]], score) for number, score in ranked]


def _scored(item: SearchItem, score: float) -> SearchItem:
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=score,
    )


def _like_literal(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _lexeme(word: str) -> str:
    """A word as a quoted tsquery lexeme (\\w+ holds no quote, escaped all the same)."""
    return "'" + word.replace("'", "''") + "'"


class PostgresRatingStore:
    """Ratings of answers in lgc_answer_ratings (agent/memory/feedback.py's RatingStore)."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def rate(
        self, thread_id: str, message_id: str, rating: str, comment: str, now: float
    ) -> None:
        async with self._pool.connection() as connection:
            await connection.execute(
                f"INSERT INTO {RATINGS_TABLE} (thread_id, message_id, rating, comment, rated_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (thread_id, message_id)"
                " DO UPDATE SET rating = excluded.rating, comment = excluded.comment,"
                " rated_at = excluded.rated_at",
                (thread_id, message_id, rating, comment, now),
            )

    async def of_thread(self, thread_id: str) -> dict[str, dict[str, str]]:
        async with self._pool.connection() as connection:
            cursor = await connection.execute(
                f"SELECT message_id, rating, comment FROM {RATINGS_TABLE} WHERE thread_id = %s",
                (thread_id,),
            )
            rows = await cursor.fetchall()
        return {
            row["message_id"]: {"rating": row["rating"], "comment": row["comment"]} for row in rows
        }

    async def all_rows(self) -> list[tuple[str, str, str, str, float]]:
        """Every rating as (thread id, message id, rating, comment, rated at), for a copy."""
        async with self._pool.connection() as connection:
            cursor = await connection.execute(
                f"SELECT thread_id, message_id, rating, comment, rated_at FROM {RATINGS_TABLE}"
            )
            rows = await cursor.fetchall()
        return [
            (r["thread_id"], r["message_id"], r["rating"], r["comment"], r["rated_at"])
            for r in rows
        ]

    async def add_missing(self, rows: list[tuple[str, str, str, str, float]]) -> int:
        """Add the ratings of answers not rated here yet (one already here is kept, like
        a later rating), in one transaction; how many were added."""
        added = 0
        async with self._pool.connection() as connection, connection.transaction():
            for row in rows:
                cursor = await connection.execute(
                    f"INSERT INTO {RATINGS_TABLE}"
                    " (thread_id, message_id, rating, comment, rated_at)"
                    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (thread_id, message_id) DO NOTHING",
                    row,
                )
                added += cursor.rowcount
        return added


class _LinkTable:
    """The link table through one open transaction (agent/memory/threads.py's LinkTable)."""

    def __init__(self, connection: psycopg.Connection[dict[str, Any]]) -> None:
        self._connection = connection

    def _one(self, sql: str, params: Iterable[Any]) -> dict[str, Any] | None:
        return self._connection.execute(sql, tuple(params)).fetchone()

    def thread_of(self, agent_id: str, party: str, conversation_id: str) -> str | None:
        row = self._one(
            f"SELECT thread_id FROM {LINKS_TABLE}"
            " WHERE agent_id = %s AND party = %s AND conversation_id = %s",
            (agent_id, party, conversation_id),
        )
        return row["thread_id"] if row else None

    def latest_thread(self, agent_id: str, party: str, since: float) -> str | None:
        row = self._one(
            f"SELECT thread_id FROM {LINKS_TABLE}"
            " WHERE agent_id = %s AND party = %s AND last_used >= %s"
            " ORDER BY last_used DESC LIMIT 1",
            (agent_id, party, since),
        )
        return row["thread_id"] if row else None

    def used_by_others(self, agent_id: str, conversation_id: str, party: str) -> bool:
        row = self._one(
            f"SELECT 1 AS found FROM {LINKS_TABLE}"
            " WHERE agent_id = %s AND conversation_id = %s AND party <> %s LIMIT 1",
            (agent_id, conversation_id, party),
        )
        return row is not None

    def put(
        self, agent_id: str, party: str, conversation_id: str, thread_id: str, now: float
    ) -> None:
        self._connection.execute(
            f"INSERT INTO {LINKS_TABLE} (agent_id, party, conversation_id, thread_id, last_used)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (agent_id, party, conversation_id)"
            " DO UPDATE SET thread_id = excluded.thread_id, last_used = excluded.last_used",
            (agent_id, party, conversation_id, thread_id, now),
        )

    def forget_thread(self, thread_id: str) -> None:
        self._connection.execute(f"DELETE FROM {LINKS_TABLE} WHERE thread_id = %s", (thread_id,))

    def has_unlinked_thread(self, thread_id: str) -> bool:
        """Whether the thread has checkpoints and no link points at it: one a copy
        (migrate_storage) brought from a threads.db written before the links."""
        row = self._one(
            "SELECT 1 AS found FROM checkpoints WHERE thread_id = %s"
            f" AND NOT EXISTS (SELECT 1 FROM {LINKS_TABLE} WHERE thread_id = %s) LIMIT 1",
            (thread_id, thread_id),
        )
        return row is not None

    def all_rows(self) -> list[tuple[str, str, str, str, float]]:
        """Every link as (agent, party, conversation id, thread id, last used), for a copy."""
        rows = self._connection.execute(
            f"SELECT agent_id, party, conversation_id, thread_id, last_used FROM {LINKS_TABLE}"
        ).fetchall()
        return [
            (r["agent_id"], r["party"], r["conversation_id"], r["thread_id"], r["last_used"])
            for r in rows
        ]


class PostgresLinkStore:
    """Transactions over lgc_conversation_links (agent/memory/threads.py's LinkStore).

    The rule that picks a thread is plain (synchronous) code run inside one transaction,
    so it runs in a worker thread on a connection of its own, one transaction at a time;
    the event loop never waits for the database.
    """

    def __init__(self, url: str, connect_timeout: int) -> None:
        self._url = url
        self._connect_timeout = connect_timeout
        self._connection: psycopg.Connection[dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def _run[T](self, work: Callable[[_LinkTable], T]) -> T:
        with self._lock:
            connection = self._connection
            if connection is None or connection.closed or connection.broken:
                connection = self._connection = psycopg.Connection.connect(
                    self._url,
                    autocommit=True,
                    connect_timeout=self._connect_timeout,
                    row_factory=dict_row,
                )
            with connection.transaction():
                return work(_LinkTable(connection))

    async def read[T](self, work: Callable[[_LinkTable], T]) -> T:
        return await asyncio.to_thread(self._run, work)

    async def write[T](self, work: Callable[[_LinkTable], T]) -> T:
        return await asyncio.to_thread(self._run, work)

    def _close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def aclose(self) -> None:
        await asyncio.to_thread(self._close)
