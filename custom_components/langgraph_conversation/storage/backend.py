"""What every storage backend gives the integration (SQLite files, PostgreSQL).

The Home Assistant side (persistence.py) opens one backend per Home Assistant and asks it
everything through `StorageBackend`: LangGraph's saver (conversations) and store
(memories), the conversation links and answer ratings beside them, which exceptions mean
"the database failed", the maintenance sweeps, the figures for diagnostics, and closing.
A part that could not be opened is None (an SQLite file may open while the other fails);
the agents then answer without it.

The link and rating shapes are named here as the storage offers them (the agent's own
protocols, agent/memory/threads.py and agent/memory/feedback.py, ask for the same methods; storage/
never imports agent/), with the rows a copy between backends reads (storage/copy.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

# An embedding function: texts in, one vector per text out.
type EmbedFunc = Callable[[list[str]], Awaitable[list[list[float]]]]
# A conversation link: (agent id, party, conversation id, thread id, last used).
type LinkRow = tuple[str, str, str, str, float]
# An answer rating: (thread id, message id, rating, comment, rated at).
type RatingRow = tuple[str, str, str, str, float]


class LinkTable(Protocol):
    """The conversation links inside one open transaction."""

    def thread_of(self, agent_id: str, party: str, conversation_id: str) -> str | None: ...

    def latest_thread(self, agent_id: str, party: str, since: float) -> str | None: ...

    def used_by_others(self, agent_id: str, conversation_id: str, party: str) -> bool: ...

    def put(
        self, agent_id: str, party: str, conversation_id: str, thread_id: str, now: float
    ) -> None: ...

    def forget_thread(self, thread_id: str) -> None: ...

    def has_unlinked_thread(self, thread_id: str) -> bool: ...

    def all_rows(self) -> list[LinkRow]: ...


class ConversationLinks(Protocol):
    """Which thread each conversation id of each party continues; `work` runs whole inside
    one transaction (committed if it returns, for a write)."""

    async def read[T](self, work: Callable[[LinkTable], T]) -> T: ...

    async def write[T](self, work: Callable[[LinkTable], T]) -> T: ...


class AnswerRatings(Protocol):
    """Thumbs up or down (and a comment) on answers, by thread and message id."""

    async def rate(
        self, thread_id: str, message_id: str, rating: str, comment: str, now: float
    ) -> None: ...

    async def of_thread(self, thread_id: str) -> dict[str, dict[str, str]]: ...

    async def all_rows(self) -> list[RatingRow]: ...

    async def add_missing(self, rows: list[RatingRow]) -> int: ...


class StorageBackend(Protocol):
    """One open storage: the SQLite files (storage/sqlite/) or a PostgreSQL database
    (storage/postgres/)."""

    @property
    def saver(self) -> BaseCheckpointSaver | None:
        """The conversations (LangGraph threads); None while unavailable."""

    @property
    def store(self) -> BaseStore | None:
        """The long-term memories; None while unavailable."""

    @property
    def links(self) -> ConversationLinks | None:
        """Conversation links, kept beside the conversations (None without them)."""

    @property
    def ratings(self) -> AnswerRatings | None:
        """Answer ratings, kept beside the conversations (None without them)."""

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        """The exceptions its parts raise when the database fails."""

    @property
    def embeds(self) -> bool:
        """Whether memories get vectors now (an embedding model is in use)."""

    @property
    def embedding_fixed(self) -> bool:
        """Whether the embedding model is chosen when the backend opens, so that another
        model needs it opened anew (`use_embeddings` changes nothing then)."""

    def keep_checkpoints(self, count: int) -> None:
        """Keep the newest `count` checkpoints per conversation from now on."""

    def use_embeddings(self, embed: EmbedFunc | None, model: str | None) -> None:
        """Make new vectors with `embed` (named `model`), or none with None."""

    async def expire_threads(self, cutoff: datetime) -> int:
        """Delete the conversations unused since `cutoff` (with their links and ratings);
        how many went."""

    async def sweep_memories(self) -> int:
        """Delete the memories whose time to live ran out; how many went."""

    async def backfill_vectors(self, limit: int) -> int:
        """Give up to `limit` memories without a vector of the current model one; how many
        got one."""

    async def stats(self) -> dict[str, Any]:
        """Counts and sizes for diagnostics, never contents: {"threads": ..., "memory":
        ...}, each "unavailable" when that part is."""

    def describe(self, error: BaseException) -> str:
        """A failure's message as a user may see it (no secret of the connection)."""

    def is_outage(self, error: BaseException) -> bool:
        """Whether `error` means the database is unavailable now (locked, full, stopped,
        unreachable), rather than a mistake: the healing layer then goes on in memory."""

    async def check(self) -> None:
        """Prove the database works now (a write where that can fail); raises if not."""

    async def aclose(self) -> None:
        """Close every part (idempotent)."""
