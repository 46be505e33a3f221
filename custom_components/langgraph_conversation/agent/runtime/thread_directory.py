"""Where conversations live: the checkpointer and the graphs that read it, which thread
each conversation continues (links), ratings of answers, one lock per thread, the bound
on threads kept in memory, and the move to memory when the conversations file fails."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
import logging
import sqlite3
from typing import Any
import weakref

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Interrupt

from ..graph import AgentKind, build_graphs
from ..memory import (
    LinkStore,
    MemoryLinkStore,
    MemoryRatingStore,
    Party,
    RatingStore,
    ThreadChoice,
    ThreadRequest,
    answers,
    choose_thread,
    find_thread,
    forget_thread,
    known_choice,
)

_LOGGER = logging.getLogger(__name__)

# Conversations kept per entry while they live in memory (threads.db unavailable, or
# failed while in use); the least recently used are forgotten first.
MEMORY_THREADS = 200


def memory_checkpointer() -> InMemorySaver:
    """Threads kept in memory only: the fallback when threads.db is unavailable.

    Imported from here rather than in the integration's __init__ so that LangGraph is
    first imported after the agent package has set LANGGRAPH_STRICT_MSGPACK (read once at
    import).
    """
    return InMemorySaver()


class ThreadDirectory:
    """The threads of one config entry, and how a conversation finds its own."""

    def __init__(
        self,
        checkpointer: BaseCheckpointSaver,
        *,
        max_threads: int | None = None,
        links: LinkStore | None = None,
        ratings: RatingStore | None = None,
        storage_errors: tuple[type[BaseException], ...] = (sqlite3.Error,),
        on_storage_error: Callable[[Exception], None] | None = None,
    ) -> None:
        """`max_threads` bounds how many threads are kept (least recently used go first):
        the in-memory checkpointer would otherwise keep every voice conversation of a Home
        Assistant run forever. `links` says which thread each conversation of each party
        continues (memory/threads.py), `ratings` keeps feedback on answers
        (memory/feedback.py); both in memory when not given. `storage_errors` is what the
        conversations' storage raises when it fails (SQLite's by default; PostgreSQL's
        driver adds its own): such a failure moves conversations to memory, and
        `on_storage_error` is told once (the integration raises a repair issue).
        """
        self.checkpointer = checkpointer
        self.graphs: dict[AgentKind, CompiledStateGraph] = build_graphs(checkpointer)
        self.links: LinkStore = links if links is not None else MemoryLinkStore()
        self.ratings: RatingStore = ratings if ratings is not None else MemoryRatingStore()
        self.storage_errors = storage_errors
        self.on_storage_error = on_storage_error
        # Set when the conversations file failed and conversations went to memory.
        self.storage_failed = False
        self._max_threads = max_threads
        self._recent_threads: OrderedDict[str, None] = OrderedDict()
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        # Link writes of choices known in advance, still on their way (see choose).
        self._recording: set[asyncio.Task[ThreadChoice]] = set()

    @property
    def graph(self) -> CompiledStateGraph:
        """The graph that reads thread state: the assistant's knows every node that can
        pause (only its tools node asks for confirmation)."""
        return self.graphs[AgentKind.ASSISTANT]

    def lock(self, thread_id: str) -> asyncio.Lock:
        """The thread's lock: turns, ratings and summaries of one thread take turns."""
        lock = self._locks.get(thread_id)
        if lock is None:
            lock = self._locks[thread_id] = asyncio.Lock()
        return lock

    async def touch(self, thread_id: str) -> None:
        """Mark a thread as just used; drop the least recently used beyond the bound."""
        self._recent_threads[thread_id] = None
        self._recent_threads.move_to_end(thread_id)
        if self._max_threads is None:
            return
        while len(self._recent_threads) > self._max_threads:
            oldest, _ = self._recent_threads.popitem(last=False)
            await self.checkpointer.adelete_thread(oldest)
            await self._forget_links_and_ratings(oldest)

    async def _forget_links_and_ratings(self, thread_id: str) -> None:
        """A deleted thread's links and ratings go too (threads.db deletes them with the
        thread itself; the stores in memory are told here)."""
        await self.links_settled()
        await self.links.write(lambda table: forget_thread(table, thread_id))
        if isinstance(self.ratings, MemoryRatingStore):
            self.ratings.forget(thread_id)

    async def choose(self, request: ThreadRequest, now: float) -> ThreadChoice:
        """The thread a turn continues (memory/threads.py), recorded for the next turns.

        Where the choice is known without reading the links (a conversation Home
        Assistant issued for this turn: known_choice), the turn goes on while the rule
        runs and records it in the file: an eager task queues that transaction before
        this returns, so the file answers everything asked later after it, and every
        later call about links here waits for it (links_settled).
        """
        await self.links_settled()
        known = known_choice(request)
        if known is None:
            return await self._choose(request, now)
        recording = asyncio.Task(
            # The loop named: Python 3.13's Task needs it to start eagerly (see saver.py).
            self._choose(request, now),
            loop=asyncio.get_running_loop(),
            eager_start=True,
        )
        if recording.done():
            recording.result()
        else:
            self._recording.add(recording)
            recording.add_done_callback(lambda ended: self._recorded(ended, known))
        return known

    async def _choose(self, request: ThreadRequest, now: float) -> ThreadChoice:
        """The rule run on the links. They live in the conversations file; if it fails,
        conversations go on in memory (links too, which never fail), as when a turn meets
        the failure."""
        try:
            return await self.links.write(lambda table: choose_thread(table, request, now))
        except self.storage_errors as err:
            self.continue_in_memory(err)
            return await self.links.write(lambda table: choose_thread(table, request, now))

    def _recorded(self, ended: asyncio.Task[ThreadChoice], known: ThreadChoice) -> None:
        """A choice known in advance is recorded (its turn went on meanwhile)."""
        self._recording.discard(ended)
        if ended.cancelled():
            return
        if (error := ended.exception()) is not None:
            _LOGGER.error(
                "The thread of a new conversation (%s) could not be recorded: %s",
                known.thread_id,
                error,
                exc_info=error,
            )
        elif ended.result() != known:
            # known_choice and choose_thread disagree: a bug, said where it shows.
            _LOGGER.error("Thread chosen as %s, recorded as %s", known, ended.result())

    async def links_settled(self) -> None:
        """Every link write of a choice known in advance has ended (see choose)."""
        while self._recording:
            await asyncio.wait(set(self._recording))

    async def find(self, agent_id: str, conversation_id: str, party: Party) -> str:
        """The thread a party's conversation continues, as its next turn would find it."""
        await self.links_settled()
        return await self.links.read(
            lambda table: find_thread(table, agent_id, conversation_id, party)
        )

    async def delete(self, thread_id: str) -> None:
        """Delete a thread and every conversation link to it."""
        async with self.lock(thread_id):
            await self.checkpointer.adelete_thread(thread_id)
            await self._forget_links_and_ratings(thread_id)
            self._recent_threads.pop(thread_id, None)

    async def rate(
        self, thread_id: str, turn: int | None, rating: str, comment: str, now: float
    ) -> int:
        """Rate the answer of a turn (1 = the oldest kept, None = the last); returns its
        number. LookupError when the thread has no such answer."""
        async with self.lock(thread_id):
            found = answers(await self.messages(thread_id))
            if not found or (turn is not None and not 1 <= turn <= len(found)):
                raise LookupError(turn)
            number = len(found) if turn is None else turn
            await self.ratings.rate(thread_id, found[number - 1].id, rating, comment, now)
        return number

    async def messages(self, thread_id: str) -> list[Any]:
        """The messages a thread holds now (the model's view of the conversation)."""
        state = await self.graph.aget_state({"configurable": {"thread_id": thread_id}})
        return list(state.values.get("messages", []))

    async def pending_interrupts(self, thread_id: str) -> list[Interrupt]:
        """What the thread's newest checkpoint waits on, without reviving its messages."""
        read = getattr(self.checkpointer, "apending_interrupts", None)
        if read is not None:
            return await read(thread_id)
        state = await self.graph.aget_state({"configurable": {"thread_id": thread_id}})
        return [interrupt for task in state.tasks for interrupt in task.interrupts]

    def continue_in_memory(self, error: Exception) -> None:
        """Conversations from now on live in memory; what the file holds stays there."""
        _LOGGER.error("The conversations file failed, continuing in memory: %s", error)
        self.storage_failed = True
        self.checkpointer = memory_checkpointer()
        self.links = MemoryLinkStore()
        self.ratings = MemoryRatingStore()
        self.graphs = build_graphs(self.checkpointer)
        self._max_threads = self._max_threads or MEMORY_THREADS
        if self.on_storage_error is not None:
            self.on_storage_error(error)
