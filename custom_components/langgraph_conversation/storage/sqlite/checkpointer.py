"""LangGraph checkpoints in SQLite, with retention.

Schema (version 1; version 2 adds conversation links, links.py, and answer ratings,
ratings.py):

    checkpoints        one row per checkpoint: the checkpoint without its channel values
                       (serde blob), its metadata as JSON, which channel versions it uses
                       (JSON), its parent, run id and time (for deletion by run and by age)
    channel_blobs      one row per (thread, namespace, channel, version): a channel value,
                       written once when the version is new and shared by every checkpoint
                       that still uses that version
    checkpoint_writes  pending writes of a checkpoint, keyed by (task, index)

LangGraph hands `aput` the full state at every step. Storing it whole per checkpoint makes
a conversation grow quadratically (every step stores every message again); storing only
the channels listed in `new_versions` makes it linear, and `keep_last` bounds it: older
checkpoints, their writes and the channel values no kept checkpoint uses are deleted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import UTC, datetime
import json
from pathlib import Path
import random
import sqlite3
from typing import Any, NoReturn, Self

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    SerializerProtocol,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import INTERRUPT

from .database import Migration, SqliteDatabase
from .links import (
    TABLE as LINKS_TABLE,
    create_links_table,
    delete_links_of_threads,
    delete_links_unused_since,
)
from .newest import Found, NewestCheckpoints, NotPrefetched, Row, Written
from .ratings import (
    TABLE as RATINGS_TABLE,
    create_ratings_table,
    delete_ratings_of_threads,
)


def _create_schema_v1(connection: sqlite3.Connection) -> None:
    # Plain rowid tables: channel values can be large, and SQLite advises WITHOUT ROWID
    # only for small rows.
    connection.execute(
        """
        CREATE TABLE checkpoints (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL,
            checkpoint_id TEXT NOT NULL,
            parent_checkpoint_id TEXT,
            run_id TEXT,
            created_at REAL NOT NULL,
            checkpoint_type TEXT NOT NULL,
            checkpoint BLOB NOT NULL,
            channel_versions TEXT NOT NULL,
            metadata TEXT NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
        )
        """
    )
    connection.execute(
        "CREATE INDEX checkpoints_by_run ON checkpoints (run_id) WHERE run_id IS NOT NULL"
    )
    connection.execute(
        """
        CREATE TABLE channel_blobs (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL,
            channel TEXT NOT NULL,
            version TEXT NOT NULL,
            value_type TEXT NOT NULL,
            value BLOB NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
        )
        """
    )
    connection.execute(
        """
        CREATE TABLE checkpoint_writes (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL,
            checkpoint_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            idx INTEGER NOT NULL,
            task_path TEXT NOT NULL,
            channel TEXT NOT NULL,
            value_type TEXT NOT NULL,
            value BLOB NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
        )
        """
    )


# Index N migrates schema version N to N + 1; a future version appends its migration here.
def _create_schema_v2(connection: sqlite3.Connection) -> None:
    create_links_table(connection)
    create_ratings_table(connection)


MIGRATIONS: tuple[Migration, ...] = (_create_schema_v1, _create_schema_v2)
SCHEMA_VERSION = len(MIGRATIONS)

# Marks a channel that was cleared at this version (LangGraph lists it in new_versions
# without a value); such a channel is absent from the loaded checkpoint.
_EMPTY = "empty"

# No foreign keys: LangGraph may store a task's writes before the checkpoint they belong
# to (durability="async" submits both at once), so writes cannot reference checkpoints.
# Every deletion therefore removes writes and unused channel values explicitly.
_CHECKPOINT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, created_at, "
    "checkpoint_type, checkpoint, channel_versions, metadata"
)
_READ_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
    "checkpoint_type, checkpoint, channel_versions, metadata"
)
_BLOB_COLUMNS = "thread_id, checkpoint_ns, channel, version, value_type, value"
_WRITE_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, value_type, value"
)

type _CheckpointKey = tuple[str, str, str]


def _default_serde() -> SerializerProtocol:
    """LangGraph's serializer with strict msgpack revival, whatever the environment says.

    `allowed_msgpack_modules=None` (rather than leaving it unset) means "only LangGraph's
    safe types": a tampered blob naming any other class is returned as plain data instead
    of being imported and called. With LANGGRAPH_STRICT_MSGPACK=true, LangGraph widens this
    per graph to its state schema's types through `with_allowlist`.
    """
    return JsonPlusSerializer(allowed_msgpack_modules=None)


def _refuse_sync(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise RuntimeError(
        "SqliteCheckpointSaver is async-only; use the a* methods (aget_tuple, alist, aput, ...)"
    )


class SqliteCheckpointSaver(BaseCheckpointSaver[str]):
    """LangGraph checkpointer on one SQLite file, async-only, with optional retention.

    `keep_last=N` keeps the newest N checkpoints per (thread, namespace): enough to resume
    and to show recent steps, not a full time-travel history. LangGraph's beta
    `DeltaChannel` rebuilds values from ancestors' writes; it is not used by this
    integration's graphs and does not survive retention or `aprune`.
    """

    def __init__(
        self,
        database: SqliteDatabase,
        *,
        serde: SerializerProtocol | None = None,
        keep_last: int | None = None,
    ) -> None:
        """Use `open`; this wraps an already opened database."""
        super().__init__(serde=serde or _default_serde())
        # LangGraph clones the saver (`with_allowlist` is a shallow copy) for each compiled
        # graph: all state lives in the shared database object, so every clone sees the
        # same connection, lock and closed flag.
        self._database = database
        # A list, so that the clones share it and a changed retention reaches them all.
        self._retention = [keep_last]
        # Shared by the clones too (newest.py).
        self._newest = NewestCheckpoints()

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        serde: SerializerProtocol | None = None,
        keep_last: int | None = None,
    ) -> Self:
        """Open the checkpoint file at `path` (created if missing) inside the running loop."""
        if keep_last is not None and keep_last < 1:
            raise ValueError("keep_last must be at least 1")
        database = await SqliteDatabase.open(path, MIGRATIONS)
        return cls(database, serde=serde, keep_last=keep_last)

    @property
    def database(self) -> SqliteDatabase:
        """The file underneath (its health, for whoever reports storage problems)."""
        return self._database

    @property
    def keep_last(self) -> int | None:
        """Checkpoints kept per thread and namespace (None keeps all)."""
        return self._retention[0]

    @keep_last.setter
    def keep_last(self, value: int | None) -> None:
        """Applies to every clone, from each thread's next checkpoint on."""
        if value is not None and value < 1:
            raise ValueError("keep_last must be at least 1")
        self._retention[0] = value

    async def aclose(self) -> None:
        """Close the file and its connection thread. Safe to call more than once."""
        await self._database.close()

    # --- reading ---

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names, or the thread's newest one without a checkpoint_id."""
        thread_id, checkpoint_ns, checkpoint_id = _address(config)
        if checkpoint_id is None and not checkpoint_ns:
            prefetched = self._newest.take_prefetched(thread_id, self._database.changes)
            if not isinstance(prefetched, NotPrefetched):
                return None if prefetched is None else self._build_tuple(*prefetched)

        written = None if checkpoint_ns else self._newest.written(thread_id)

        def read(connection: sqlite3.Connection) -> Found | None:
            if checkpoint_id is None:
                row = connection.execute(
                    f"SELECT {_READ_COLUMNS} FROM checkpoints"
                    " WHERE thread_id = ? AND checkpoint_ns = ?"
                    " ORDER BY checkpoint_id DESC LIMIT 1",
                    (thread_id, checkpoint_ns),
                ).fetchone()
            else:
                row = connection.execute(
                    f"SELECT {_READ_COLUMNS} FROM checkpoints"
                    " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                    (thread_id, checkpoint_ns, checkpoint_id),
                ).fetchone()
            if row is None:
                return None
            return _found(connection, row, written)

        found = await self._database.read(read)
        return None if found is None else self._build_tuple(*found)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints matching all given criteria, newest first.

        `filter` compares metadata values for equality, like LangGraph's own savers. The
        candidates are read first and each one's values when it is yielded, so the lock is
        never held while the caller runs (it may well write to this saver meanwhile).
        """
        conditions: list[str] = []
        params: list[Any] = []
        if config is not None:
            configurable = config["configurable"]
            conditions.append("thread_id = ?")
            params.append(configurable["thread_id"])
            if (checkpoint_ns := configurable.get("checkpoint_ns")) is not None:
                conditions.append("checkpoint_ns = ?")
                params.append(checkpoint_ns)
            if (checkpoint_id := get_checkpoint_id(config)) is not None:
                conditions.append("checkpoint_id = ?")
                params.append(checkpoint_id)
        if before is not None and (before_id := get_checkpoint_id(before)) is not None:
            conditions.append("checkpoint_id < ?")
            params.append(before_id)
        query = "SELECT thread_id, checkpoint_ns, checkpoint_id, metadata FROM checkpoints"
        if conditions:
            query += " WHERE " + " AND ".join(conditions)
        query += " ORDER BY checkpoint_id DESC"
        if limit is not None and not filter:
            query += " LIMIT ?"
            params.append(limit)
        candidates = await self._database.read(
            lambda connection: connection.execute(query, params).fetchall()
        )

        remaining = limit
        for thread_id, checkpoint_ns, checkpoint_id, metadata_json in candidates:
            if remaining is not None and remaining <= 0:
                return
            if filter and not _matches(json.loads(metadata_json), filter):
                continue
            found = await self.aget_tuple(
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": checkpoint_ns,
                        "checkpoint_id": checkpoint_id,
                    }
                }
            )
            if found is None:  # deleted since the candidates were read
                continue
            if remaining is not None:
                remaining -= 1
            yield found

    async def apending_interrupts(self, thread_id: str) -> list[Any]:
        """The interrupts the thread's newest checkpoint (root namespace) waits on.

        What `aget_state(...).interrupts` reports, for a fraction of the cost: only the
        interrupt writes are revived, not the state (every message). The checkpoint's
        rows come along as stored: a turn asks this, then runs its graph, whose first
        act is to read the same checkpoint (`aget_tuple`). That read is answered from
        these rows while nothing was written to the file since (`SqliteDatabase.changes`):
        a round trip to the file less per turn.

        A checkpoint this saver wrote itself comes with its values as written (newest.py).
        """
        written = self._newest.written(thread_id)

        def read(connection: sqlite3.Connection) -> Found | None:
            row = connection.execute(
                f"SELECT {_READ_COLUMNS} FROM checkpoints"
                " WHERE thread_id = ? AND checkpoint_ns = ''"
                " ORDER BY checkpoint_id DESC LIMIT 1",
                (thread_id,),
            ).fetchone()
            if row is None:
                return None
            return _found(connection, row, written)

        changes = self._database.changes
        found = await self._database.read(read)
        self._newest.prefetched(thread_id, changes, found)
        if found is None:
            return []
        return [
            interrupt
            for _task_id, channel, value_type, value in found[2]
            if channel == INTERRUPT
            for interrupt in self.serde.loads_typed((value_type, value))
        ]

    def _build_tuple(
        self, row: Row, blobs: Iterable[Row] | Written, writes: Iterable[Row]
    ) -> CheckpointTuple:
        (
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            parent_checkpoint_id,
            checkpoint_type,
            checkpoint_blob,
            _channel_versions,
            metadata_json,
        ) = row
        checkpoint: Checkpoint = {
            **self.serde.loads_typed((checkpoint_type, checkpoint_blob)),
            "channel_values": (
                blobs.channel_values()
                if isinstance(blobs, Written)
                else {
                    channel: self.serde.loads_typed((value_type, value))
                    for channel, value_type, value in blobs
                }
            ),
        }
        return CheckpointTuple(
            config=_config(thread_id, checkpoint_ns, checkpoint_id),
            checkpoint=checkpoint,
            metadata=json.loads(metadata_json),
            parent_config=(
                _config(thread_id, checkpoint_ns, parent_checkpoint_id)
                if parent_checkpoint_id
                else None
            ),
            pending_writes=[
                (task_id, channel, self.serde.loads_typed((value_type, value)))
                for task_id, channel, value_type, value in writes
            ],
        )

    # --- writing ---

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the channel values that are new in it.

        Channels not in `new_versions` kept their version, whose value an earlier `aput`
        stored; the checkpoint refers to it through its channel_versions.
        """
        thread_id, checkpoint_ns, parent_checkpoint_id = _address(config)
        checkpoint_id = checkpoint["id"]
        values = checkpoint["channel_values"]
        # Serialize before taking the lock: it is the slow part and touches no database.
        blob_rows = [
            (
                thread_id,
                checkpoint_ns,
                channel,
                str(version),
                *(self.serde.dumps_typed(values[channel]) if channel in values else (_EMPTY, b"")),
            )
            for channel, version in new_versions.items()
        ]
        checkpoint_type, checkpoint_blob = self.serde.dumps_typed(
            {key: value for key, value in checkpoint.items() if key != "channel_values"}
        )
        stored_metadata = get_serializable_checkpoint_metadata(config, metadata)
        run_id = stored_metadata.get("run_id")
        checkpoint_row = (
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            parent_checkpoint_id,
            None if run_id is None else str(run_id),
            _unix_time(checkpoint["ts"]),
            checkpoint_type,
            checkpoint_blob,
            # As text, the form channel_blobs.version has, so SQL can join the two.
            _to_json({channel: str(v) for channel, v in checkpoint["channel_versions"].items()}),
            _to_json(stored_metadata),
        )
        keep_last = self._retention[0]

        def write(connection: sqlite3.Connection) -> None:
            connection.executemany(
                f"INSERT OR REPLACE INTO channel_blobs ({_BLOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                blob_rows,
            )
            connection.execute(
                f"INSERT OR REPLACE INTO checkpoints ({_CHECKPOINT_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                checkpoint_row,
            )
            if keep_last is not None:
                _keep_newest(connection, thread_id, checkpoint_ns, keep_last)

        await self._database.write(write)
        if not checkpoint_ns:
            self._newest.wrote(thread_id, checkpoint_id, checkpoint_row[8], values)
        return _config(thread_id, checkpoint_ns, checkpoint_id)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes for the checkpoint in `config`.

        A regular write keeps its position in `writes` as index; storing it again keeps the
        first value (a retried task must not duplicate or change what was recorded). The
        special channels (error, interrupt, resume, scheduled) have fixed negative indexes
        from WRITES_IDX_MAP, one slot per task, and the latest value replaces the earlier.
        """
        thread_id, checkpoint_ns, checkpoint_id = _address(config)
        keep_first: list[Row] = []
        keep_latest: list[Row] = []
        for position, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, position)
            row = (
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                task_id,
                idx,
                task_path,
                channel,
                *self.serde.dumps_typed(value),
            )
            (keep_latest if idx < 0 else keep_first).append(row)
        insert = f"INTO checkpoint_writes ({_WRITE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"

        def write(connection: sqlite3.Connection) -> None:
            if keep_first:
                connection.executemany(f"INSERT OR IGNORE {insert}", keep_first)
            if keep_latest:
                connection.executemany(f"INSERT OR REPLACE {insert}", keep_latest)

        await self._database.write(write)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """A zero-padded counter (text order is numeric order) and a random fraction.

        The same scheme as LangGraph's in-memory and Postgres savers: two forks of one
        checkpoint that both bump a channel get different versions, so they never
        overwrite each other's channel value row.
        """
        if current is None:
            counter = 0
        elif isinstance(current, int):
            counter = current
        else:
            counter = int(current.split(".")[0])
        return f"{counter + 1:032}.{random.random():016}"

    # --- deleting and copying ---

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and channel value of a thread."""
        self._newest.forget(thread_id)
        await self._database.write(lambda connection: _delete_threads(connection, [thread_id]))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints that runs created, with their writes and unused values."""
        if not run_ids:
            return

        def delete(connection: sqlite3.Connection) -> None:
            keys = connection.execute(
                "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints"
                " WHERE run_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(run_ids)),),
            ).fetchall()
            _delete_checkpoints(connection, keys)

        await self._database.write(delete)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's checkpoints, writes and values to another thread id.

        Rows the target already has with the same keys are replaced, so copying twice is
        the same as copying once; the target's other checkpoints stay.
        """
        if source_thread_id == target_thread_id:
            return

        def copy(connection: sqlite3.Connection) -> None:
            for table, columns in (
                ("checkpoints", _CHECKPOINT_COLUMNS),
                ("channel_blobs", _BLOB_COLUMNS),
                ("checkpoint_writes", _WRITE_COLUMNS),
            ):
                other_columns = columns.removeprefix("thread_id, ")
                connection.execute(
                    f"INSERT OR REPLACE INTO {table} ({columns})"
                    f" SELECT ?, {other_columns} FROM {table} WHERE thread_id = ?",
                    (target_thread_id, source_thread_id),
                )

        await self._database.write(copy)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Shrink threads: "keep_latest" keeps each namespace's newest checkpoint, "delete" all."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"Unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'")
        if not thread_ids:
            return

        def prune(connection: sqlite3.Connection) -> None:
            if strategy == "delete":
                _delete_threads(connection, thread_ids)
                return
            namespaces = connection.execute(
                "SELECT DISTINCT thread_id, checkpoint_ns FROM checkpoints"
                " WHERE thread_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(thread_ids)),),
            ).fetchall()
            for thread_id, checkpoint_ns in namespaces:
                _keep_newest(connection, thread_id, checkpoint_ns, 1)

        await self._database.write(prune)

    async def adelete_threads_idle_since(self, cutoff: datetime) -> int:
        """Delete the threads whose newest checkpoint is older than `cutoff`; returns how many.

        Their conversation links go too, and so do links unused since `cutoff` whose
        thread never got a checkpoint. A naive `cutoff` is taken as UTC, like
        LangGraph's checkpoint timestamps.
        """
        if cutoff.tzinfo is None:
            cutoff = cutoff.replace(tzinfo=UTC)

        def delete(connection: sqlite3.Connection) -> int:
            rows = connection.execute(
                "SELECT thread_id FROM checkpoints GROUP BY thread_id HAVING MAX(created_at) < ?",
                (cutoff.timestamp(),),
            ).fetchall()
            _delete_threads(connection, [thread_id for (thread_id,) in rows])
            delete_links_unused_since(connection, cutoff.timestamp())
            return len(rows)

        return await self._database.write(delete)

    # --- diagnostics ---

    async def stats(self) -> dict[str, int]:
        """Sizes for diagnostics: row counts and bytes, never contents."""
        row = await self._database.read(
            lambda connection: connection.execute(
                "SELECT"
                " (SELECT COUNT(DISTINCT thread_id) FROM checkpoints),"
                " (SELECT COUNT(*) FROM checkpoints),"
                " (SELECT COUNT(*) FROM checkpoint_writes),"
                " (SELECT COUNT(*) FROM channel_blobs),"
                f" (SELECT COUNT(*) FROM {LINKS_TABLE}),"
                f" (SELECT COUNT(*) FROM {RATINGS_TABLE} WHERE rating = 'up'),"
                f" (SELECT COUNT(*) FROM {RATINGS_TABLE} WHERE rating = 'down'),"
                " (SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()),"
                " (SELECT freelist_count * page_size"
                "  FROM pragma_freelist_count(), pragma_page_size())"
            ).fetchone()
        )
        threads, checkpoints, writes, blobs, links, up, down, size_bytes, free_bytes = row
        return {
            "schema_version": self._database.schema_version,
            "threads": threads,
            "checkpoints": checkpoints,
            "writes": writes,
            "blobs": blobs,
            "conversation_links": links,
            "answers_rated_up": up,
            "answers_rated_down": down,
            "size_bytes": size_bytes,
            "free_bytes": free_bytes,
        }

    # --- the sync API ---
    # LangGraph calls these only from sync entry points (graph.invoke, get_state, ...). Such
    # a call made on the event loop thread would have to wait for the file's thread, whose result
    # is delivered by that same, now blocked, loop: a deadlock. Refusing them outright
    # turns that hang into an immediate, clear error.
    get_tuple = _refuse_sync
    list = _refuse_sync
    put = _refuse_sync
    put_writes = _refuse_sync
    delete_thread = _refuse_sync
    delete_for_runs = _refuse_sync
    copy_thread = _refuse_sync
    prune = _refuse_sync


def _address(config: RunnableConfig) -> tuple[str, str, str | None]:
    """(thread_id, checkpoint_ns, checkpoint_id or None) of a config."""
    configurable = config["configurable"]
    return (
        configurable["thread_id"],
        configurable.get("checkpoint_ns", ""),
        get_checkpoint_id(config),
    )


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def _to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _unix_time(timestamp: str) -> float:
    """A checkpoint's ISO 8601 `ts` as Unix time; LangGraph writes UTC."""
    moment = datetime.fromisoformat(timestamp)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _matches(metadata: dict[str, Any], filter: dict[str, Any]) -> bool:
    return all(metadata.get(key) == value for key, value in filter.items())


def _found(connection: sqlite3.Connection, row: Row, written: Written | None) -> Found:
    """A checkpoint row with its channel values and pending writes; the values as the saver
    wrote them when `written` is this checkpoint (newest.py), else as stored."""
    _thread_id, _ns, checkpoint_id, *_, channel_versions, _metadata = row
    if written is not None and written.is_row_of(checkpoint_id, channel_versions):
        return row, written, _read_writes(connection, row)
    return row, *_read_values_and_writes(connection, row)


def _read_values_and_writes(
    connection: sqlite3.Connection, row: Row
) -> tuple[list[Row], list[Row]]:
    """A checkpoint row's channel values (as stored) and pending writes, in LangGraph order."""
    thread_id, checkpoint_ns, _checkpoint_id, *_, channel_versions, _metadata = row
    blobs = connection.execute(
        "SELECT b.channel, b.value_type, b.value FROM json_each(?) AS v"
        " JOIN channel_blobs AS b ON b.thread_id = ? AND b.checkpoint_ns = ?"
        " AND b.channel = v.key AND b.version = v.value"
        " WHERE b.value_type != ?",
        (channel_versions, thread_id, checkpoint_ns, _EMPTY),
    ).fetchall()
    return blobs, _read_writes(connection, row)


def _read_writes(connection: sqlite3.Connection, row: Row) -> list[Row]:
    """A checkpoint row's pending writes (as stored), in LangGraph order."""
    thread_id, checkpoint_ns, checkpoint_id, *_ = row
    # `writes_sort_key` order: the order in which LangGraph applies a step's writes.
    return connection.execute(
        "SELECT task_id, channel, value_type, value FROM checkpoint_writes"
        " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        " ORDER BY task_path, task_id, idx",
        (thread_id, checkpoint_ns, checkpoint_id),
    ).fetchall()


def _keep_newest(
    connection: sqlite3.Connection, thread_id: str, checkpoint_ns: str, keep: int
) -> None:
    """Delete all but the newest `keep` checkpoints of one namespace of a thread."""
    older = connection.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints"
        " WHERE thread_id = ? AND checkpoint_ns = ?"
        " ORDER BY checkpoint_id DESC LIMIT -1 OFFSET ?",
        (thread_id, checkpoint_ns, keep),
    ).fetchall()
    if not older:
        return
    _delete_checkpoints(connection, older)
    # Writes can also arrive after their checkpoint was deleted (LangGraph submits a task's
    # writes and the next checkpoint at once, in no fixed order). Checkpoint ids grow with
    # time, so such strays sort at or below the newest deleted id, under every kept one.
    newest_deleted = older[0][2]
    connection.execute(
        "DELETE FROM checkpoint_writes"
        " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id <= ?",
        (thread_id, checkpoint_ns, newest_deleted),
    )


def _delete_checkpoints(connection: sqlite3.Connection, keys: Iterable[_CheckpointKey]) -> None:
    """Delete checkpoints and their writes, then the values no remaining checkpoint uses.

    Only the deleted checkpoints' writes go: writes stored ahead of their checkpoint (see
    the note on foreign keys) belong to no checkpoint yet and must survive.
    """
    keys = list(keys)
    if not keys:
        return
    connection.executemany(
        "DELETE FROM checkpoint_writes"
        " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
        keys,
    )
    connection.executemany(
        "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
        keys,
    )
    for thread_id, checkpoint_ns in {(key[0], key[1]) for key in keys}:
        connection.execute(
            "WITH used AS ("
            "  SELECT DISTINCT v.key AS channel, v.value AS version"
            "  FROM checkpoints AS c, json_each(c.channel_versions) AS v"
            "  WHERE c.thread_id = ?1 AND c.checkpoint_ns = ?2)"
            " DELETE FROM channel_blobs WHERE thread_id = ?1 AND checkpoint_ns = ?2"
            " AND (channel, version) NOT IN (SELECT channel, version FROM used)",
            (thread_id, checkpoint_ns),
        )


def _delete_threads(connection: sqlite3.Connection, thread_ids: Iterable[str]) -> None:
    """Delete threads whole: checkpoints, writes, values, links to them and ratings."""
    thread_ids = list(thread_ids)
    params = [(thread_id,) for thread_id in thread_ids]
    for table in ("checkpoint_writes", "channel_blobs", "checkpoints"):
        connection.executemany(f"DELETE FROM {table} WHERE thread_id = ?", params)
    delete_links_of_threads(connection, thread_ids)
    delete_ratings_of_threads(connection, thread_ids)
