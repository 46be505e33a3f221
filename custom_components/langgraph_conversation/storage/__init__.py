"""Where conversations and memories are kept: one backend protocol, two backends.

Knows its databases and LangGraph's storage interfaces only, nothing about Home Assistant,
models or the agent. What the rest of the integration imports is named here:
- `StorageBackend` (backend.py): what every backend gives (LangGraph's saver and store,
  conversation links, answer ratings, the exceptions of a failing database, maintenance,
  diagnostics figures, closing);
- `SqliteStorage` and its parts (sqlite/): the two files under
  <config>/langgraph_conversation/, with nothing to install;
- copying between backends (copy.py), through LangGraph's interfaces;
- storage that heals (healing/): the parts the agents use, going on in memory while a
  database is down and writing back when it works again.
The PostgreSQL backend (postgres/) is not named here: its packages are installed on
demand, so it is imported only once PostgreSQL is chosen (postgres_packages.py).
ranking.py holds the one hybrid ranking (words and meaning) both backends' searches use.
"""

from .backend import StorageBackend
from .copy import CopyCounts, copy_storage
from .healing import HealingLinks, HealingRatings, HealingStorage, StorageHealth
from .sqlite import (
    SQLITE_ERRORS,
    SqliteCheckpointSaver,
    SqliteDatabase,
    SqliteStorage,
    SqliteStore,
    is_file_fault,
)

__all__ = [
    "SQLITE_ERRORS",
    "CopyCounts",
    "HealingLinks",
    "HealingRatings",
    "HealingStorage",
    "SqliteCheckpointSaver",
    "SqliteDatabase",
    "SqliteStorage",
    "SqliteStore",
    "StorageBackend",
    "StorageHealth",
    "copy_storage",
    "is_file_fault",
]
