"""The PostgreSQL backend: LangGraph's official saver and store, with our tables beside them.

Knows psycopg, LangGraph's PostgreSQL packages and its storage interfaces only. Those
packages are installed on demand (const.POSTGRES_REQUIREMENTS, postgres_packages.py), so
this package is imported only where PostgreSQL is chosen; the SQLite path never loads it.
`backend.py` connects, says why a database cannot be used, and opens `PostgresStorage`
(the `StorageBackend`); `house.py` adds what our SQLite files offer beyond LangGraph's
interfaces (checkpoints kept per thread, idle expiry, links, ratings, word search).
"""

from .backend import (
    ERRORS,
    PostgresProblem,
    PostgresStorage,
    PostgresUnavailable,
    VectorProblem,
    check_connection,
    classify,
)

__all__ = [
    "ERRORS",
    "PostgresProblem",
    "PostgresStorage",
    "PostgresUnavailable",
    "VectorProblem",
    "check_connection",
    "classify",
]
