"""Where conversations and memories are kept: one backend protocol, two backends.

Knows its databases and LangGraph's storage interfaces only, nothing about Home Assistant,
models or the agent. What the rest of the integration imports is named here:
- `StorageBackend` (backend.py): what every backend gives (LangGraph's saver and store,
  conversation links, answer ratings, the exceptions of a failing database, maintenance,
  diagnostics figures, closing);
- `SqliteStorage` and its parts (sqlite/): the two files under
  <config>/langgraph_conversation/, with nothing to install;
- copying between backends (copy.py), through LangGraph's interfaces.
The PostgreSQL backend (postgres/) is not named here: its packages are installed on
demand, so it is imported only once PostgreSQL is chosen (postgres_packages.py).
ranking.py holds the one hybrid ranking (words and meaning) both backends' searches use.
"""

from .backend import StorageBackend
from .copy import CopyCounts, copy_storage
from .sqlite import SQLITE_ERRORS, SqliteCheckpointSaver, SqliteDatabase, SqliteStorage, SqliteStore

__all__ = [
    "SQLITE_ERRORS",
    "CopyCounts",
    "SqliteCheckpointSaver",
    "SqliteDatabase",
    "SqliteStorage",
    "SqliteStore",
    "StorageBackend",
    "copy_storage",
]
