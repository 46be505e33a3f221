"""Conversation links in threads.db: (agent, party, conversation id) → thread id.

One row per conversation id a party used with an agent, pointing at the thread it
continues (its own, or an older one it was linked to), with the time of its last use.
The table lives in the threads' file, so links survive restarts and reloads, and a
deleted thread takes its links along in the same transaction (checkpointer.py). A thread
no link points at was written before the links (schema 1, by the release before
conversations had owners): agent/memory/threads.py decides who may continue it.

This module only stores and finds rows; which thread a turn continues is decided by
the caller's function, run whole inside one transaction on the file's thread.
"""

from __future__ import annotations

from collections.abc import Callable
import sqlite3

from .database import SqliteDatabase

TABLE = "conversation_links"


def create_links_table(connection: sqlite3.Connection) -> None:
    """Schema version 2 of threads.db: the links table."""
    connection.execute(
        f"""
        CREATE TABLE {TABLE} (
            agent_id TEXT NOT NULL,
            party TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            last_used REAL NOT NULL,
            PRIMARY KEY (agent_id, party, conversation_id)
        ) WITHOUT ROWID
        """
    )
    connection.execute(f"CREATE INDEX {TABLE}_recent ON {TABLE} (agent_id, party, last_used)")
    connection.execute(f"CREATE INDEX {TABLE}_by_thread ON {TABLE} (thread_id)")
    connection.execute(
        f"CREATE INDEX {TABLE}_by_conversation ON {TABLE} (agent_id, conversation_id)"
    )


def delete_links_of_threads(connection: sqlite3.Connection, thread_ids: list[str]) -> None:
    """Inside a transaction that deletes threads: their links go too."""
    connection.executemany(f"DELETE FROM {TABLE} WHERE thread_id = ?", [(t,) for t in thread_ids])


def delete_links_unused_since(connection: sqlite3.Connection, cutoff: float) -> int:
    """Links not used since `cutoff` (Unix time), whatever their thread became."""
    return connection.execute(f"DELETE FROM {TABLE} WHERE last_used < ?", (cutoff,)).rowcount


class SqliteLinkTable:
    """The link table seen through one open transaction (runs on the file's thread)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def thread_of(self, agent_id: str, party: str, conversation_id: str) -> str | None:
        row = self._connection.execute(
            f"SELECT thread_id FROM {TABLE}"
            " WHERE agent_id = ? AND party = ? AND conversation_id = ?",
            (agent_id, party, conversation_id),
        ).fetchone()
        return row[0] if row else None

    def latest_thread(self, agent_id: str, party: str, since: float) -> str | None:
        row = self._connection.execute(
            f"SELECT thread_id FROM {TABLE}"
            " WHERE agent_id = ? AND party = ? AND last_used >= ?"
            " ORDER BY last_used DESC LIMIT 1",
            (agent_id, party, since),
        ).fetchone()
        return row[0] if row else None

    def used_by_others(self, agent_id: str, conversation_id: str, party: str) -> bool:
        row = self._connection.execute(
            f"SELECT 1 FROM {TABLE}"
            " WHERE agent_id = ? AND conversation_id = ? AND party != ? LIMIT 1",
            (agent_id, conversation_id, party),
        ).fetchone()
        return row is not None

    def put(
        self, agent_id: str, party: str, conversation_id: str, thread_id: str, now: float
    ) -> None:
        self._connection.execute(
            f"INSERT INTO {TABLE} (agent_id, party, conversation_id, thread_id, last_used)"
            " VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (agent_id, party, conversation_id)"
            " DO UPDATE SET thread_id = excluded.thread_id, last_used = excluded.last_used",
            (agent_id, party, conversation_id, thread_id, now),
        )

    def forget_thread(self, thread_id: str) -> None:
        delete_links_of_threads(self._connection, [thread_id])

    def has_unlinked_thread(self, thread_id: str) -> bool:
        """Whether the thread has checkpoints and no link points at it (both lookups go
        by an index: the checkpoints' key starts with the thread id)."""
        row = self._connection.execute(
            "SELECT 1 FROM checkpoints WHERE thread_id = ?1"
            f" AND NOT EXISTS (SELECT 1 FROM {TABLE} WHERE thread_id = ?1) LIMIT 1",
            (thread_id,),
        ).fetchone()
        return row is not None

    def unlinked_threads(self) -> int:
        """How many threads no link points at (written before the links, see the module
        docstring); read when the file opens."""
        row = self._connection.execute(
            "SELECT COUNT(DISTINCT thread_id) FROM checkpoints AS c"
            f" WHERE NOT EXISTS (SELECT 1 FROM {TABLE} AS l WHERE l.thread_id = c.thread_id)"
        ).fetchone()
        return int(row[0]) if row else 0

    def all_rows(self) -> list[tuple[str, str, str, str, float]]:
        """Every link as (agent, party, conversation id, thread id, last used), for a copy."""
        return [
            tuple(row)
            for row in self._connection.execute(
                f"SELECT agent_id, party, conversation_id, thread_id, last_used FROM {TABLE}"
            )
        ]


class SqliteLinkStore:
    """Transactions over the link table of an open threads.db."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._database = database

    async def read[T](self, work: Callable[[SqliteLinkTable], T]) -> T:
        """Run `work` in a read transaction."""
        return await self._database.read(lambda connection: work(SqliteLinkTable(connection)))

    async def write[T](self, work: Callable[[SqliteLinkTable], T]) -> T:
        """Run `work` in a write transaction (committed if it returns)."""
        return await self._database.write(lambda connection: work(SqliteLinkTable(connection)))
