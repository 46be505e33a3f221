"""PostgreSQL through LangGraph's official saver and store (`langgraph-checkpoint-postgres`).

This module knows psycopg and LangGraph only. Its packages are installed on demand (Home
Assistant installs const.POSTGRES_REQUIREMENTS when a user chooses PostgreSQL), so it is
imported only where PostgreSQL is used; the SQLite path never loads it.

`PostgresStorage.open` first makes one plain connection: a failure there says exactly what
is wrong (refused, password, database, TLS), which a connection pool's timeout would hide.
The same connection then creates or migrates the saver's and the store's tables, which is
also where a role without the right to create tables is found out.

With an embedding model, the store is opened with LangGraph's vector index (pgvector) when
the database has the extension or the role may create it; the dimensions come from the
vectors already stored, else from one embedding call. Otherwise memories are searched by
their words only, and `vector_problem` says why (for diagnostics and one log line).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
import logging
from typing import Any, Self
from urllib.parse import unquote, urlsplit

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.postgres.aio import AsyncPostgresStore
from langgraph.store.postgres.base import PostgresIndexConfig
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from ..backend import EmbedFunc
from .house import (
    GuardedEmbed,
    HouseSaver,
    PostgresLinkStore,
    PostgresRatingStore,
    WordSearchStore,
    claim_vectors,
    create_tables,
)

_LOGGER = logging.getLogger(__name__)

# Seconds a connection attempt may take (an address that drops packets would otherwise
# keep a Configure dialog waiting for minutes).
CONNECT_TIMEOUT = 10
# Connections kept open for the saver and the store together; turns are few and short.
POOL_MIN_SIZE = 1
POOL_MAX_SIZE = 4
# Seconds a query waits for a free connection of the pool (psycopg's default is 30). Only
# a database that stopped answering makes it wait that long, and then the first failure
# should come soon: from there on the healing layer answers from memory (storage/healing/).
POOL_WAIT = 5.0
# What LangGraph's saver and store require of every connection they use.
_CONNECTION_SETTINGS: dict[str, Any] = {
    "autocommit": True,
    "prepare_threshold": 0,
    "row_factory": dict_row,
}


class PostgresProblem(StrEnum):
    """Why PostgreSQL cannot be used; each has its own sentence for the user."""

    INVALID_URL = "invalid_url"
    REFUSED = "refused"
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "auth_failed"
    DATABASE_MISSING = "database_missing"
    PERMISSION_DENIED = "permission_denied"
    TLS = "tls"
    UNKNOWN = "unknown"


class PostgresUnavailable(Exception):
    """PostgreSQL could not be opened; `problem` says why (the message is psycopg's)."""

    def __init__(self, problem: PostgresProblem, message: str) -> None:
        super().__init__(message)
        self.problem = problem


# Words of libpq's connection messages (they carry no SQLSTATE: the server never answered,
# or answered before a session existed). Checked in this order. Whole phrases, as a
# message also quotes the host's name ("pg.tls-lab.example" must not read as TLS).
_MESSAGE_PROBLEMS: tuple[tuple[tuple[str, ...], PostgresProblem], ...] = (
    (("does not support ssl", "ssl error", "ssl syscall", "ssl connection", "certificate",
      "sslmode"), PostgresProblem.TLS),
    (("password authentication failed", "no password supplied", "authentication failed",
      "no pg_hba.conf entry"), PostgresProblem.AUTH_FAILED),
    (("does not exist",), PostgresProblem.DATABASE_MISSING),
    (("permission denied",), PostgresProblem.PERMISSION_DENIED),
    (("connection refused",), PostgresProblem.REFUSED),
    (("timeout expired", "could not translate host name", "no route to host",
      "network is unreachable", "name or service not known"), PostgresProblem.UNREACHABLE),
)  # fmt: skip
# libpq's words for a URL it cannot read (no connection was tried).
_MALFORMED_WORDS = (
    "invalid dsn",
    'missing "="',
    "invalid uri",
    "invalid connection option",
    "invalid integer value",
    "invalid sslmode value",
    "invalid percent-encoded token",
)
_SQLSTATE_PROBLEMS: dict[str, PostgresProblem] = {
    "28P01": PostgresProblem.AUTH_FAILED,  # invalid_password
    "28000": PostgresProblem.AUTH_FAILED,  # invalid_authorization_specification
    "3D000": PostgresProblem.DATABASE_MISSING,  # invalid_catalog_name
    "42501": PostgresProblem.PERMISSION_DENIED,  # insufficient_privilege
}


# What a failing database raises, for callers that cannot import psycopg themselves.
ERRORS: tuple[type[BaseException], ...] = (psycopg.Error, PostgresUnavailable)


def is_outage(error: BaseException) -> bool:
    """Whether `error` means the database cannot be reached or used now (the server
    stopped, the network dropped, no free connection), not a mistake in a statement.
    psycopg's pool timeout is an OperationalError too."""
    return isinstance(
        error, psycopg.OperationalError | psycopg.InterfaceError | PostgresUnavailable
    )


def classify(error: BaseException) -> PostgresProblem:
    """Which problem a psycopg error is, by its SQLSTATE where it has one, else its words."""
    if problem := _SQLSTATE_PROBLEMS.get(getattr(error, "sqlstate", None) or ""):
        return problem
    message = str(error).lower()
    if isinstance(error, ValueError) or any(word in message for word in _MALFORMED_WORDS):
        return PostgresProblem.INVALID_URL
    for words, problem in _MESSAGE_PROBLEMS:
        if any(word in message for word in words):
            return problem
    return PostgresProblem.UNKNOWN


def _password_forms(url: str) -> set[str]:
    """The URL's password as typed and decoded (libpq may quote either in a message)."""
    forms: set[str] = set()
    try:
        password = conninfo_to_dict(url).get("password")
    except (psycopg.Error, ValueError):
        password = None
    try:
        raw = urlsplit(url).password
    except ValueError:
        raw = None
    for value in (password, raw):
        if value:
            forms |= {str(value), unquote(str(value))}
    return {form for form in forms if form}


def _unavailable(error: BaseException, url: str) -> PostgresUnavailable:
    """The error as PostgresUnavailable; the URL's password never in its message."""
    message = str(error).strip()
    for form in sorted(_password_forms(url), key=len, reverse=True):
        message = message.replace(form, "***")
    return PostgresUnavailable(classify(error), message)


async def _connect(url: str) -> psycopg.AsyncConnection[dict[str, Any]]:
    try:
        return await psycopg.AsyncConnection.connect(
            url, connect_timeout=CONNECT_TIMEOUT, **_CONNECTION_SETTINGS
        )
    except (psycopg.Error, ValueError) as err:
        raise _unavailable(err, url) from err


async def _stop_batching(store: AsyncPostgresStore) -> None:
    """Ends the store's batching task (the one reach into LangGraph's private parts here).

    AsyncBatchedBaseStore (langgraph.store.base.batch, langgraph-checkpoint 4.x) runs its
    queue in a task kept in `_task` that ends only when the store is garbage-collected;
    there is no public way to stop it, and a task left behind outlives the pool it uses.
    tests/storage/postgres/test_backend.py checks the attribute is still there.
    """
    task = getattr(store, "_task", None)
    if isinstance(task, asyncio.Task) and not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _has_vector(connection: psycopg.AsyncConnection[dict[str, Any]]) -> bool:
    cursor = await connection.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
    return await cursor.fetchone() is not None


class VectorProblem(StrEnum):
    """Why memories on PostgreSQL are searched by words only though a model is chosen."""

    EXTENSION_MISSING = "pgvector_not_installed"
    EXTENSION_NOT_ALLOWED = "pgvector_not_allowed"
    EMBEDDING_UNAVAILABLE = "embedding_model_unreachable"
    DIMENSIONS_CHANGED = "embedding_dimensions_changed"


# The text embedded once at opening to learn the model's dimensions.
_PROBE_TEXT = "dimensions"


async def _stored_dimensions(connection: psycopg.AsyncConnection[dict[str, Any]]) -> int | None:
    """The size of the vectors LangGraph's store already keeps (pgvector's column type
    carries it as its modifier), or None before the first index."""
    cursor = await connection.execute(
        "SELECT atttypmod FROM pg_attribute"
        " WHERE attrelid = to_regclass('store_vectors') AND attname = 'embedding'"
    )
    row = await cursor.fetchone()
    return int(row["atttypmod"]) if row and row["atttypmod"] > 0 else None


async def _vector_index(
    connection: psycopg.AsyncConnection[dict[str, Any]], embed: GuardedEmbed
) -> tuple[PostgresIndexConfig | None, VectorProblem | None]:
    """LangGraph's index configuration for `embed`, or why there is none."""
    if not await _has_vector(connection):
        try:
            await connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.InsufficientPrivilege:
            return None, VectorProblem.EXTENSION_NOT_ALLOWED
        except psycopg.Error:
            # Not installed on the server (no control file), or refused otherwise.
            return None, VectorProblem.EXTENSION_MISSING
    stored = await _stored_dimensions(connection)
    try:
        probed: int | None = len((await embed([_PROBE_TEXT]))[0])
    except Exception:  # noqa: BLE001  logged by GuardedEmbed; the stored size may do
        probed = None
    if stored is not None and probed is not None and stored != probed:
        return None, VectorProblem.DIMENSIONS_CHANGED
    dims = stored or probed
    if dims is None:
        return None, VectorProblem.EMBEDDING_UNAVAILABLE
    # Memories and document chunks keep their text under "text" (agent/memory/memories.py,
    # agent/knowledge/index.py); only that is embedded.
    return {"dims": dims, "embed": embed, "fields": ["text"]}, None


@dataclass(slots=True)
class PostgresStorage:
    """The PostgreSQL backend (storage/backend.py): LangGraph's saver and store on one
    connection pool to one database, with our links and ratings tables next to theirs
    (house.py). Every part is there once it opens."""

    pool: AsyncConnectionPool[psycopg.AsyncConnection[dict[str, Any]]]
    saver: HouseSaver
    store: WordSearchStore
    # Whether the pgvector extension is in the database (vector search is possible).
    has_vector: bool
    links: PostgresLinkStore
    ratings: PostgresRatingStore
    # A secret: never in a log line, a message or a repr.
    url: str = field(repr=False, default="")

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        index: PostgresIndexConfig | None = None,
        embed: EmbedFunc | None = None,
        embedding_model: str = "",
    ) -> Self:
        """Connects, creates or migrates the tables, and opens the pool.

        With `index` (dimensions, embedding function, fields), the store also keeps vectors
        through pgvector (the extension is created if the role may, else that is
        "permission denied"). With `embed` (the entry's embedding model, named
        `embedding_model`) instead, the index is built here when pgvector can be used, and
        the store searches by words only when not (`store.vector_problem` says why).
        Raises PostgresUnavailable with the reason when the database cannot be used.
        """
        connection = await _connect(url)
        vector_problem: VectorProblem | None = None
        try:
            try:
                await AsyncPostgresSaver(connection).setup()
                await create_tables(connection)
                if index is None and embed is not None:
                    index, vector_problem = await _vector_index(
                        connection, GuardedEmbed(embed, embedding_model or "embedding model")
                    )
                setup_store = AsyncPostgresStore(connection, index=index)
                try:
                    await setup_store.setup()
                finally:
                    await _stop_batching(setup_store)
                vector_model = embedding_model or "embedding model"
                if index is not None and await claim_vectors(connection, vector_model):
                    _LOGGER.info(
                        "Memory vectors of another embedding model were dropped; %s makes"
                        " new ones in the background, words find memories meanwhile",
                        vector_model,
                    )
                has_vector = await _has_vector(connection)
            except psycopg.Error as err:
                raise _unavailable(err, url) from err
        finally:
            await connection.close()
        pool: AsyncConnectionPool[psycopg.AsyncConnection[dict[str, Any]]] = AsyncConnectionPool(
            url,
            min_size=POOL_MIN_SIZE,
            max_size=POOL_MAX_SIZE,
            timeout=POOL_WAIT,
            kwargs={**_CONNECTION_SETTINGS, "connect_timeout": CONNECT_TIMEOUT},
            open=False,
        )
        try:
            await pool.open(wait=True, timeout=CONNECT_TIMEOUT)
        except BaseException as err:
            # Cancelled too (a retry stops as the storage closes): an open pool's workers
            # would otherwise go on reconnecting and waiting for work.
            await pool.close()
            if isinstance(err, psycopg.Error):
                raise _unavailable(err, url) from err
            raise
        store = WordSearchStore(pool, index=index)
        store.vector_problem = str(vector_problem) if vector_problem else None
        store.vector_model = vector_model if index is not None else None
        return cls(
            pool,
            HouseSaver(pool),
            store,
            has_vector,
            PostgresLinkStore(url, CONNECT_TIMEOUT),
            PostgresRatingStore(pool),
            url,
        )

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        return ERRORS

    @property
    def embeds(self) -> bool:
        return self.store.index_config is not None

    @property
    def embedding_fixed(self) -> bool:
        # LangGraph's store takes its vector index when it opens.
        return True

    def keep_checkpoints(self, count: int) -> None:
        self.saver.keep_last = count

    def use_embeddings(self, embed: EmbedFunc | None, model: str | None) -> None:
        """Nothing changes while open (`embedding_fixed`): `open` takes the model."""

    async def expire_threads(self, cutoff: datetime) -> int:
        return await self.saver.adelete_threads_idle_since(cutoff)

    async def sweep_memories(self) -> int:
        # LangGraph's own sweep of the items whose time to live ran out.
        return await self.store.sweep_ttl()

    async def backfill_vectors(self, limit: int) -> int:
        return await self.store.abackfill_vectors(limit)

    async def stats(self) -> dict[str, Any]:
        return {"threads": await self.saver.stats(), "memory": await self.store.stats()}

    def describe(self, error: BaseException) -> str:
        """A failure's message without the URL's password."""
        return str(_unavailable(error, self.url))

    def is_outage(self, error: BaseException) -> bool:
        return is_outage(error)

    async def check(self) -> None:
        """Prove the database answers now: broken connections of the pool are replaced,
        then one query runs (raises the driver's error when it does not)."""
        await self.pool.check()
        async with self.pool.connection(timeout=POOL_WAIT) as connection:
            await connection.execute("SELECT 1")

    async def aclose(self) -> None:
        """Stops the store's batching and closes every connection of the pool."""
        await _stop_batching(self.store)
        await self.links.aclose()
        await self.pool.close()


async def check_connection(url: str) -> None:
    """Opens and closes PostgreSQL storage at `url`; raises PostgresUnavailable if it fails."""
    storage = await PostgresStorage.open(url)
    await storage.aclose()
