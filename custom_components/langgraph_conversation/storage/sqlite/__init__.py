"""The SQLite backend: conversations (threads.db) and memories (memory.db) in two files.

Knows SQLite (the one CPython bundles: no extension is loaded), numpy and LangGraph's
storage interfaces only. `database.py` opens a file (pragmas, schema versions,
transactions, faults of the file); `checkpointer.py` stores LangGraph checkpoints in one;
`links.py` and `ratings.py` keep, in the same file, which thread each conversation id of
each party continues and the ratings of answers; `store.py` is the memory store (full text
and vectors); `backend.py` joins them as one `StorageBackend`.
"""

from .backend import SQLITE_ERRORS, SqliteStorage
from .checkpointer import SqliteCheckpointSaver
from .database import SqliteDatabase, is_file_fault
from .store import SqliteStore

__all__ = [
    "SQLITE_ERRORS",
    "SqliteCheckpointSaver",
    "SqliteDatabase",
    "SqliteStorage",
    "SqliteStore",
    "is_file_fault",
]
