"""Ratings of answers (thumbs up or down, an optional comment) in threads.db.

One row per rated answer, keyed by its thread and the answer message's id, so a rating
stays with its answer while older turns are summarised away, and goes when the thread is
deleted (checkpointer.py deletes it in the same transaction).
"""

from __future__ import annotations

import sqlite3

from .database import SqliteDatabase

TABLE = "answer_ratings"


def create_ratings_table(connection: sqlite3.Connection) -> None:
    """Part of schema version 2 of threads.db."""
    connection.execute(
        f"""
        CREATE TABLE {TABLE} (
            thread_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            rating TEXT NOT NULL,
            comment TEXT NOT NULL,
            rated_at REAL NOT NULL,
            PRIMARY KEY (thread_id, message_id)
        ) WITHOUT ROWID
        """
    )


def delete_ratings_of_threads(connection: sqlite3.Connection, thread_ids: list[str]) -> None:
    """Inside a transaction that deletes threads: their ratings go too."""
    connection.executemany(f"DELETE FROM {TABLE} WHERE thread_id = ?", [(t,) for t in thread_ids])


class SqliteRatingStore:
    """Ratings of one threads.db."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._database = database

    async def rate(
        self, thread_id: str, message_id: str, rating: str, comment: str, now: float
    ) -> None:
        """Record (or replace) the rating of one answer."""
        await self._database.write(
            lambda connection: connection.execute(
                f"INSERT OR REPLACE INTO {TABLE}"
                " (thread_id, message_id, rating, comment, rated_at) VALUES (?, ?, ?, ?, ?)",
                (thread_id, message_id, rating, comment, now),
            )
        )

    async def of_thread(self, thread_id: str) -> dict[str, dict[str, str]]:
        """Message id → {"rating", "comment"} of a thread's rated answers."""
        rows = await self._database.read(
            lambda connection: connection.execute(
                f"SELECT message_id, rating, comment FROM {TABLE} WHERE thread_id = ?",
                (thread_id,),
            ).fetchall()
        )
        return {message_id: {"rating": r, "comment": c} for message_id, r, c in rows}

    async def all_rows(self) -> list[tuple[str, str, str, str, float]]:
        """Every rating as (thread id, message id, rating, comment, rated at), for a copy."""
        return await self._database.read(
            lambda connection: connection.execute(
                f"SELECT thread_id, message_id, rating, comment, rated_at FROM {TABLE}"
            ).fetchall()
        )

    async def add_missing(self, rows: list[tuple[str, str, str, str, float]]) -> int:
        """Add the ratings of answers not rated here yet (one already here is kept, like
        a later rating); how many were added."""

        def add(connection: sqlite3.Connection) -> int:
            before = connection.total_changes
            connection.executemany(
                f"INSERT OR IGNORE INTO {TABLE}"
                " (thread_id, message_id, rating, comment, rated_at) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            return connection.total_changes - before

        return await self._database.write(add)
