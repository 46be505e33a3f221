"""PostgreSQL storage (storage/postgres/backend.py) against a real server (tests/postgres.py).

Opening checks the database the way a user's URL reaches it: every problem a user can
make (nothing listening, wrong password, missing database, a role that may not create
tables, TLS the server does not offer, a malformed URL) is produced for real here and must
be named. LangGraph's conformance suite runs against the saver as storage/postgres/backend.py
builds it (the pool and connection settings the integration uses).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
import os
import random
import socket

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.postgres.base import PostgresIndexConfig
import psycopg
import pytest

from custom_components.langgraph_conversation.storage.postgres import (
    PostgresProblem,
    PostgresStorage,
    PostgresUnavailable,
    check_connection,
    classify,
)
from fakes.postgres_server import (
    APP_ROLE,
    GUEST_PASSWORD,
    GUEST_ROLE,
    LOCKED_DATABASE,
    PostgresServer,
)


def _unused_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_open_creates_the_tables_and_reports_pgvector(
    postgres_server: PostgresServer, postgres_url: str, postgres_database: str
) -> None:
    """Opening creates LangGraph's tables; a second open finds them (migrations idempotent)."""
    storage = await PostgresStorage.open(postgres_url)
    try:
        assert storage.has_vector is postgres_server.has_vector
    finally:
        await storage.aclose()
    storage = await PostgresStorage.open(postgres_url)
    await storage.aclose()
    listed = await asyncio.to_thread(
        postgres_server.sql,
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
        database=postgres_database,
    )
    tables = set(listed.split())
    assert {"checkpoints", "checkpoint_blobs", "checkpoint_writes", "store"} <= tables


async def test_a_turn_persists_and_resumes_across_reopening(postgres_url: str) -> None:
    """A checkpoint written through one pool is read back through a new one."""
    storage = await PostgresStorage.open(postgres_url)
    config = {"configurable": {"thread_id": "agent:nobody:c1", "checkpoint_ns": ""}}
    try:
        checkpoint = {
            "v": 4,
            "id": "1f0a0000-0000-6000-8000-000000000001",
            "ts": "2026-12-03T07:00:00+00:00",
            "channel_values": {"messages": ["hello"]},
            "channel_versions": {"messages": "1"},
            "versions_seen": {},
            "updated_channels": ["messages"],
        }
        await storage.saver.aput(
            config, checkpoint, {"source": "input", "step": 0}, {"messages": "1"}
        )
    finally:
        await storage.aclose()
    storage = await PostgresStorage.open(postgres_url)
    try:
        found = await storage.saver.aget_tuple(config)
    finally:
        await storage.aclose()
    assert found is not None
    assert found.checkpoint["channel_values"] == {"messages": ["hello"]}


async def test_store_keeps_items_across_reopening(postgres_url: str) -> None:
    """An item put through one pool is found through a new one, by namespace and filter."""
    storage = await PostgresStorage.open(postgres_url)
    try:
        await storage.store.aput(
            ("memories", "user-1"), "m1", {"text": "likes tea", "kind": "fact"}
        )
    finally:
        await storage.aclose()
    storage = await PostgresStorage.open(postgres_url)
    try:
        item = await storage.store.aget(("memories", "user-1"), "m1")
        found = await storage.store.asearch(("memories",), filter={"kind": "fact"})
    finally:
        await storage.aclose()
    assert item is not None
    assert item.value == {"text": "likes tea", "kind": "fact"}
    assert [result.key for result in found] == ["m1"]


async def test_closing_ends_the_stores_batching_task(postgres_url: str) -> None:
    """Contract: LangGraph's batched store keeps its queue task in `_task` (the one private
    attribute storage/postgres/backend.py stops at close); closing leaves it done."""
    storage = await PostgresStorage.open(postgres_url)
    task = storage.store._task  # the contract under test
    assert isinstance(task, asyncio.Task)
    assert not task.done()
    await storage.aclose()
    assert task.done()


async def test_an_open_cancelled_anywhere_leaves_nothing_running(postgres_url: str) -> None:
    """A retry of the healing layer is cancelled when the storage closes, wherever its
    open is: no pool's workers, no connection's task may go on after it. Cancelled at
    generated moments spread over a whole open (measured here first, the tables made)."""
    loop = asyncio.get_running_loop()
    before = asyncio.all_tasks()
    await (await PostgresStorage.open(postgres_url)).aclose()  # the tables, made once
    # The quickest of three opens: a busy moment must not push every cancel past the end.
    took = float("inf")
    for _ in range(3):
        started = loop.time()
        await (await PostgresStorage.open(postgres_url)).aclose()
        took = min(took, loop.time() - started)
    generator = random.Random(4711)
    cancelled = 0
    for case in range(60):
        opening = asyncio.ensure_future(PostgresStorage.open(postgres_url))
        await asyncio.sleep(took * generator.random())
        opening.cancel()
        try:
            storage = await opening
        except asyncio.CancelledError:
            cancelled += 1
        else:
            await storage.aclose()
        left = [task for task in asyncio.all_tasks() if task not in before]
        assert left == [], (case, left)
        if cancelled == 16:
            break
    # The cases did cancel opens on their way (some find theirs done already).
    assert cancelled >= 8


async def test_unix_socket_url(postgres_server: PostgresServer, postgres_database: str) -> None:
    """A URL naming the server's socket folder (a server on the same machine) works too."""
    url = f"postgresql://lgc@/{postgres_database}?host={postgres_server.socket_dir}&port={postgres_server.port}"
    storage = await PostgresStorage.open(url)
    try:
        await storage.store.aput(("household",), "k", {"text": "over the socket"})
        item = await storage.store.aget(("household",), "k")
    finally:
        await storage.aclose()
    assert item is not None
    assert item.value == {"text": "over the socket"}


# A tiny deterministic embedding for the vector tests: one dimension per topic word.
_TOPICS = ("tea", "coffee", "dog", "cat", "garden", "music", "car", "bike")


def _embed(texts: list[str]) -> list[list[float]]:
    return [[1.0 if topic in text.lower() else 0.01 for topic in _TOPICS] for text in texts]


def _index() -> PostgresIndexConfig:
    return {"dims": len(_TOPICS), "embed": _embed, "fields": ["text"]}


async def test_vector_search_through_pgvector(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    """With pgvector (Debian's build), the store ranks memories by their vectors."""
    if not postgres_server.has_vector:
        pytest.skip("the server has no pgvector (Debian's postgresql-NN-pgvector)")
    storage = await PostgresStorage.open(postgres_url, index=_index())
    try:
        namespace = ("memories", "user-1")
        await storage.store.aput(namespace, "m1", {"text": "Has a dog named Rex"})
        await storage.store.aput(namespace, "m2", {"text": "Drinks green tea every morning"})
        await storage.store.aput(namespace, "m3", {"text": "Rides a bike to work"})
        found = await storage.store.asearch(("memories",), query="which tea", limit=2)
    finally:
        await storage.aclose()
    assert len(found) == 2
    assert found[0].key == "m2"
    assert found[0].score is not None
    assert found[0].score > found[1].score


async def test_vectors_without_the_extension_are_permission_denied(
    postgres_server: PostgresServer, socket_enabled: None
) -> None:
    """A database without pgvector, a role that may not create it: "permission denied"."""
    if not postgres_server.has_vector:
        pytest.skip("the server has no pgvector (Debian's postgresql-NN-pgvector)")
    name = f"novector_{os.getpid()}"
    # psql runs in a worker thread: the test's event loop is never held up.
    await asyncio.to_thread(postgres_server.sql, f"CREATE DATABASE {name} OWNER {APP_ROLE}")
    try:
        with pytest.raises(PostgresUnavailable) as caught:
            await PostgresStorage.open(postgres_server.url(name), index=_index())
    finally:
        await asyncio.to_thread(postgres_server.sql, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    assert caught.value.problem is PostgresProblem.PERMISSION_DENIED, caught.value


async def _problem(url: str) -> PostgresUnavailable:
    with pytest.raises(PostgresUnavailable) as caught:
        await check_connection(url)
    return caught.value


async def test_nothing_listening_is_refused(
    postgres_server: PostgresServer, socket_enabled: None
) -> None:
    """A port where no server listens: "refused"."""
    error = await _problem(postgres_server.url("postgres", port=_unused_port()))
    assert error.problem is PostgresProblem.REFUSED, error


async def test_wrong_password_is_auth_failed(
    postgres_server: PostgresServer, postgres_database: str
) -> None:
    """The right role with a wrong password: "auth failed"."""
    error = await _problem(postgres_server.url(postgres_database, password="wrong-password"))
    assert error.problem is PostgresProblem.AUTH_FAILED, error
    assert "wrong-password" not in str(error)


async def test_missing_database(postgres_server: PostgresServer, socket_enabled: None) -> None:
    """A database name the server does not have: "database missing"."""
    error = await _problem(postgres_server.url("no_such_database"))
    assert error.problem is PostgresProblem.DATABASE_MISSING, error


async def test_role_that_may_not_create_tables_is_permission_denied(
    postgres_server: PostgresServer, socket_enabled: None
) -> None:
    """A role that may connect but not create the tables: "permission denied"."""
    url = postgres_server.url(LOCKED_DATABASE, user=GUEST_ROLE, password=GUEST_PASSWORD)
    error = await _problem(url)
    assert error.problem is PostgresProblem.PERMISSION_DENIED, error


async def test_tls_required_by_the_url_but_not_offered(
    postgres_server: PostgresServer, postgres_database: str
) -> None:
    """sslmode=require against a server without TLS: a TLS problem, not a password one."""
    error = await _problem(postgres_server.url(postgres_database, query="sslmode=require"))
    assert error.problem is PostgresProblem.TLS, error


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        # A refused connection to a host whose name has "tls" and "ssl" in it.
        (
            'connection to server at "pg.tls-ssl.example" (127.0.0.1), port 5432 failed: '
            "Connection refused",
            PostgresProblem.REFUSED,
        ),
        ("SSL error: certificate verify failed", PostgresProblem.TLS),
        ('FATAL:  database "x" does not exist', PostgresProblem.DATABASE_MISSING),
    ],
)
def test_classify_reads_whole_phrases(message: str, problem: PostgresProblem) -> None:
    """Messages libpq gives before any SQLSTATE are read by whole phrases, not hosts."""
    assert classify(psycopg.OperationalError(message)) is problem


@pytest.mark.parametrize(
    "url",
    [
        # libpq quotes a token it cannot decode: here, the password.
        "postgresql://lgc:sec%zzret-0123456789@127.0.0.1/db",
        "postgresql://lgc:secret-0123456789@127.0.0.1:notaport/db",
        "host=127.0.0.1 password=secret-0123456789 port=notaport",
    ],
)
async def test_no_password_in_the_error(url: str, socket_enabled: None) -> None:
    """Whatever libpq says about a bad URL, the password is not in the error's text."""
    error = await _problem(url)
    assert "secret-0123456789" not in str(error)
    assert "sec%zzret" not in str(error)
    assert "zzret-0123456789" not in str(error)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://lgc@127.0.0.1/db?nonsense_option=1",
        "postgresql://lgc@127.0.0.1:notaport/db",
    ],
)
async def test_malformed_url(url: str, socket_enabled: None) -> None:
    """A URL libpq cannot read: "invalid URL", before any connection is tried."""
    error = await _problem(url)
    assert error.problem is PostgresProblem.INVALID_URL, error


async def test_conformance(postgres_server: PostgresServer, postgres_url: str) -> None:
    """LangGraph's conformance suite against the saver as the integration builds it."""
    storage = await PostgresStorage.open(postgres_url)

    @checkpointer_test(name="AsyncPostgresSaver (integration pool)")
    async def factory() -> AsyncIterator[AsyncPostgresSaver]:
        # Each capability test starts from empty tables, as with a fresh SQLite file.
        async with storage.pool.connection() as connection:
            await connection.execute("TRUNCATE checkpoints, checkpoint_blobs, checkpoint_writes")
        yield storage.saver

    try:
        report = await validate(factory)
    finally:
        await storage.aclose()
    report.print_report()
    assert report.passed_all_base(), {
        name: result.failures for name, result in report.results.items() if not result.passed
    }
    for capability, result in report.results.items():
        if result.detected:
            assert result.passed, f"{capability}: {result.failures}"
