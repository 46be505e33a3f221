"""The tests' PostgreSQL: one server per session (fakes/postgres_server.py), a fresh
database per test, and BOTH_BACKENDS for tests that run on SQLite and on PostgreSQL.

Where no PostgreSQL is installed (a run outside scripts/test's environment) the tests that
need it are skipped with the reason; inside it (LGC_POSTGRES_REQUIRED=1) they fail instead,
so a broken installation cannot pass as a skip.
"""

from __future__ import annotations

from collections.abc import Iterator
import itertools
import os

import pytest

from fakes.postgres_server import APP_ROLE, PostgresServer, ServerUnavailable, start_server


def _unavailable(reason: str) -> None:
    if os.environ.get("LGC_POSTGRES_REQUIRED") == "1":
        pytest.fail(f"PostgreSQL could not be provisioned here, where it must be: {reason}")
    pytest.skip(f"no PostgreSQL server could be provisioned: {reason}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole session, stopped and removed at its end."""
    try:
        running = start_server()
    except ServerUnavailable as err:
        _unavailable(str(err))
    try:
        yield running.server
    finally:
        running.stop()


_databases = itertools.count()
# Databases of tests that ended, dropped when the next test makes its own.
_ended: list[str] = []


@pytest.fixture
def postgres_database(postgres_server: PostgresServer, socket_enabled: None) -> Iterator[str]:
    """A fresh database owned by the integration's role (with pgvector where installed).

    It is dropped at the next test's start, not at this one's end: the fixture ends before
    the test's Home Assistant stops (fixtures end in the reverse order of their start, and
    Home Assistant starts first), and a database dropped under a running integration would
    make every teardown a PostgreSQL outage of its own. The server goes at the session's end.
    """
    while _ended:
        postgres_server.sql(f"DROP DATABASE IF EXISTS {_ended.pop()} WITH (FORCE)")
    name = f"test_{os.getpid()}_{next(_databases)}"
    postgres_server.sql(f"CREATE DATABASE {name} OWNER {APP_ROLE}")
    if postgres_server.has_vector:
        # Creating an extension takes a superuser; the integration then only uses it.
        postgres_server.sql("CREATE EXTENSION vector", database=name)
    try:
        yield name
    finally:
        _ended.append(name)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer, postgres_database: str) -> str:
    """The URL of a fresh database, as a user would type it into the options."""
    return postgres_server.url(postgres_database)


# Runs a test whose `config_entry` (tests/conftest.py) is built here once per storage:
# this machine's SQLite files, then a fresh PostgreSQL database.
BOTH_BACKENDS = pytest.mark.parametrize(
    "config_entry", ["sqlite", "postgresql"], indirect=True, ids=["sqlite", "postgresql"]
)


def storage_options(request: pytest.FixtureRequest) -> dict[str, str] | None:
    """The entry options choosing the storage a BOTH_BACKENDS test runs with (None: the
    default files, no options)."""
    if getattr(request, "param", "sqlite") != "postgresql":
        return None
    return {"storage": "postgresql", "postgres_url": request.getfixturevalue("postgres_url")}
