"""What every memory search would otherwise read again: kept until the file's search data changes.

A search asks how many items contain each word of its query (to leave out the commonest
words, store.py's `_match_expression`) and, with embeddings, compares the query with every
vector in scope. Between two writes these are the same for every search, so they are read
once and kept:
- word counts, per quoted FTS5 term (a bounded number of them);
- the current model's vectors as one float32 matrix, rows in item id order (only while
  they fit in `MAX_VECTOR_BYTES`; beyond that a search reads its rows from the file).

The cache holds nothing that decides what a search may show: the items in scope (a
person's namespace, live, matching the filters) still come from SQL in every search, and
the cache only supplies numbers for those ids. Privacy does not depend on it being fresh.

Freshness: every write that can change the words or vectors (a put, a delete, eviction,
the sweep, the backfill) calls `invalidate` on the file's thread before it changes
anything; `PRAGMA data_version` tells of commits by other connections to the same file,
and a reconnected file (a new connection) starts afresh. All methods run on the file's
own thread (storage/sqlite/database.py), one transaction at a time, so there are no races.
"""

from __future__ import annotations

from collections.abc import Sequence
import sqlite3

import numpy as np

# Distinct query words whose counts are kept; a household asks far fewer between writes.
MAX_KEPT_TERMS = 2048
# Largest vector matrix kept (10,000 memories of 384 dimensions take 15 MiB). Larger
# stores read their vectors per search, as they did before this cache.
MAX_VECTOR_BYTES = 16 * 1024 * 1024


class Vectors:
    """The current model's vectors: `ids` ascending, `matrix` row i = item ids[i]."""

    __slots__ = ("ids", "matrix")

    def __init__(self, ids: np.ndarray, matrix: np.ndarray) -> None:
        """Wrap the loaded arrays."""
        self.ids = ids
        self.matrix = matrix

    def rows_of(self, item_ids: np.ndarray) -> np.ndarray | None:
        """The vectors of `item_ids`, in that order; None when one is not in the cache."""
        positions = np.searchsorted(self.ids, item_ids)
        if positions.size and (
            positions.max() >= self.ids.size or not np.array_equal(self.ids[positions], item_ids)
        ):
            return None
        return self.matrix[positions]


class SearchCache:
    """Word counts and vectors for searches on one store's file (module docstring)."""

    def __init__(self) -> None:
        """Empty: everything is read on first use."""
        self._seen: tuple[sqlite3.Connection, int] | None = None
        self._term_counts: dict[str, int] = {}
        # (model, bytes per vector) -> the vectors, or None when too many to keep.
        self._vectors: dict[tuple[str, int], Vectors | None] = {}

    def invalidate(self) -> None:
        """Forget everything: the caller is about to change words or vectors."""
        self._term_counts.clear()
        self._vectors.clear()

    def _check(self, conn: sqlite3.Connection) -> None:
        """Forget everything when another connection committed or the connection changed."""
        (data_version,) = conn.execute("PRAGMA data_version").fetchone()
        seen = (conn, data_version)
        if self._seen is None or self._seen[0] is not conn or self._seen[1] != data_version:
            self.invalidate()
            self._seen = seen

    def term_counts(self, conn: sqlite3.Connection, terms: Sequence[str]) -> list[int]:
        """How many items contain each quoted FTS5 term, in order."""
        self._check(conn)
        missing = [term for term in terms if term not in self._term_counts]
        if missing:
            row = conn.execute(
                "SELECT "
                + ", ".join(
                    ["(SELECT COUNT(*) FROM item_search WHERE item_search MATCH ?)"] * len(missing)
                ),
                missing,
            ).fetchone()
            if len(self._term_counts) + len(missing) > MAX_KEPT_TERMS:
                self._term_counts.clear()
            self._term_counts.update(zip(missing, row, strict=True))
        return [self._term_counts[term] for term in terms]

    def vectors(self, conn: sqlite3.Connection, model: str, nbytes: int) -> Vectors | None:
        """The vectors of `model` that are `nbytes` long; None when there are too many."""
        self._check(conn)
        key = (model, nbytes)
        if key not in self._vectors:
            self._vectors[key] = _load_vectors(conn, model, nbytes)
        return self._vectors[key]


def _load_vectors(conn: sqlite3.Connection, model: str, nbytes: int) -> Vectors | None:
    (count,) = conn.execute(
        "SELECT COUNT(*) FROM item_vectors WHERE model = ? AND length(embedding) = ?",
        (model, nbytes),
    ).fetchone()
    if count * nbytes > MAX_VECTOR_BYTES:
        return None
    rows = conn.execute(
        "SELECT item_id, embedding FROM item_vectors WHERE model = ? AND length(embedding) = ?"
        " ORDER BY item_id",
        (model, nbytes),
    ).fetchall()
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32)
    return Vectors(ids, matrix.reshape(len(rows), nbytes // 4))
