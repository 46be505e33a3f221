"""AgentRuntime: what lives as long as a config entry, one face over four parts.

- ThreadDirectory (thread_directory.py): the threads, their links and ratings, one lock
  per thread, the bound on threads in memory, the move to memory when the file fails.
- TurnRunner (turn_runner.py): running, resuming and undoing turns.
- KnowledgeLibrary (knowledge_library.py): each agent's documents index.
- Housekeeping (housekeeping.py): work that outlives a turn (memories, summaries).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
import sqlite3
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from ..events import AgentEvent
from ..hooks import TurnHooks
from ..knowledge import IndexReport, KnowledgeIndex, KnowledgeSource
from ..memory import LinkStore, Party, RatingStore, ThreadChoice, ThreadRequest
from ..models import ModelAccess, ModelCache, forget_model_windows
from .housekeeping import CLOSE_WAIT, Housekeeping
from .knowledge_library import KnowledgeLibrary
from .settings import AgentSettings
from .thread_directory import ThreadDirectory
from .turn import Turn
from .turn_runner import CLOSE_GRACE, TurnRunner


class AgentRuntime:
    """Owns what lives as long as a config entry: graphs, models, threads, indexes."""

    def __init__(
        self,
        access: ModelAccess,
        checkpointer: BaseCheckpointSaver,
        *,
        store: BaseStore | None = None,
        max_threads: int | None = None,
        links: LinkStore | None = None,
        ratings: RatingStore | None = None,
        storage_errors: tuple[type[BaseException], ...] = (sqlite3.Error,),
        on_storage_error: Callable[[Exception], None] | None = None,
    ) -> None:
        """`store` keeps memories and documents (none: neither). The other arguments are
        the threads' (ThreadDirectory): their bound, links, ratings, what their storage
        raises when it fails and who is told once when it does."""
        self.access = access
        self.store = store
        self.models = ModelCache()
        self.threads = ThreadDirectory(
            checkpointer,
            max_threads=max_threads,
            links=links,
            ratings=ratings,
            storage_errors=storage_errors,
            on_storage_error=on_storage_error,
        )
        self.housekeeping = Housekeeping(access, self.models, self.threads, store)
        self.knowledge = KnowledgeLibrary(store, self.housekeeping)
        self.turns = TurnRunner(
            access, self.models, store, self.threads, self.knowledge, self.housekeeping
        )

    @property
    def hooks(self) -> list[TurnHooks]:
        """Observers of every turn (see hooks.py); append to it."""
        return self.turns.hooks

    @property
    def ratings(self) -> RatingStore:
        """Feedback on answers (in memory once the conversations file failed)."""
        return self.threads.ratings

    @property
    def storage_failed(self) -> bool:
        """Whether the conversations file failed and conversations went to memory."""
        return self.threads.storage_failed

    @property
    def storage_errors(self) -> tuple[type[BaseException], ...]:
        """What the conversations' storage raises when it fails."""
        return self.threads.storage_errors

    @property
    def on_storage_error(self) -> Callable[[Exception], None] | None:
        """Told once when the conversations file fails."""
        return self.threads.on_storage_error

    def run_turn(self, agent: AgentSettings, turn: Turn) -> AsyncIterator[AgentEvent]:
        """Run one turn of `agent`, yielding events as they happen (TurnRunner.run)."""
        return self.turns.run(agent, turn)

    async def choose_thread(self, request: ThreadRequest, now: float) -> ThreadChoice:
        """The thread a turn continues, recorded for the next turns."""
        return await self.threads.choose(request, now)

    async def find_thread(self, agent_id: str, conversation_id: str, party: Party) -> str:
        """The thread a party's conversation continues, as its next turn would find it."""
        return await self.threads.find(agent_id, conversation_id, party)

    async def delete_thread(self, thread_id: str) -> None:
        """Delete a thread and every conversation link to it."""
        await self.threads.delete(thread_id)

    async def rate_answer(
        self, thread_id: str, turn: int | None, rating: str, comment: str, now: float
    ) -> int:
        """Rate the answer of a turn (1 = the oldest kept, None = the last); returns its
        number. LookupError when the thread has no such answer."""
        return await self.threads.rate(thread_id, turn, rating, comment, now)

    async def messages(self, thread_id: str) -> list[Any]:
        """The messages a thread holds now (the model's view of the conversation)."""
        return await self.threads.messages(thread_id)

    def knowledge_index(self, source: KnowledgeSource) -> KnowledgeIndex | None:
        """The agent's knowledge index (one per agent, kept for the runtime's life)."""
        return self.knowledge.index(source)

    async def reindex_knowledge(self, source: KnowledgeSource) -> IndexReport | None:
        """Read every file of the agent's folder again; None without a memory store."""
        return await self.knowledge.reindex(source)

    async def forget_knowledge(self, source: KnowledgeSource) -> None:
        """The agent is gone: drop its documents from the store (the files stay)."""
        await self.knowledge.forget(source)

    async def wait_background(self, timeout: float = CLOSE_WAIT) -> None:
        """Wait up to `timeout` for background work still running, then cancel the rest."""
        await self.housekeeping.wait(timeout)

    async def aclose(self, grace: float = CLOSE_GRACE) -> None:
        """Before the storage closes (unload, stop): end every running turn cleanly.

        Turns get `grace` seconds to finish; the rest are cancelled and remove what they
        had added to their thread while the file is still open (otherwise the thread
        would keep a request without an answer). Their users hear that the agent stopped.
        Indexing stops; memory extraction still running gets its own few seconds.
        """
        await self.turns.aclose(grace)
        # Links of new conversations recorded while their turns went on.
        await self.threads.links_settled()
        # Memory extraction of the turns that finished writes to memory.db too.
        await self.knowledge.aclose()
        await self.housekeeping.wait()
        # The next setup asks Ollama for its models' windows again.
        forget_model_windows()
