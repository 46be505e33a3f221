"""Work that outlives a turn: learning memories from an exchange, summarising a thread
that outgrew its history budget, closing indexes; awaited or cancelled at close."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langgraph.store.base import BaseStore

from ..graph import MODEL_NODE, compact_history, split_for_summary
from ..memory import MemoryScope, learn_from_exchange
from ..models import ModelAccess, ModelCache, classify_error
from .graph_run import confirmation_actions
from .settings import AgentSettings
from .thread_directory import ThreadDirectory

_LOGGER = logging.getLogger(__name__)

# Seconds unloading waits for memory extraction to finish before cancelling it.
CLOSE_WAIT = 5.0


class Housekeeping:
    """The background tasks of one runtime, and the two kinds of work after an answer."""

    def __init__(
        self,
        access: ModelAccess,
        models: ModelCache,
        threads: ThreadDirectory,
        store: BaseStore | None,
    ) -> None:
        self._access = access
        self._models = models
        self._threads = threads
        self._store = store
        self._tasks: set[asyncio.Task[None]] = set()
        # Threads whose old turns are being summarised now (one summary at a time each).
        self._summarising: set[str] = set()

    def in_background(self, work: Any, name: str) -> asyncio.Task[None]:
        """Work that outlives a turn: awaited (or cancelled) when the runtime closes."""
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def learn_later(
        self, agent: AgentSettings, memory: MemoryScope | None, request: str, answer: str
    ) -> None:
        """Start memory extraction for a finished exchange, without delaying its answer."""
        if not agent.learn_memories or memory is None or self._store is None:
            return
        self.in_background(
            self._learn(self._store, memory, self._fast_model(agent), request, answer),
            "langgraph_conversation memory extraction",
        )

    def summarise_later(
        self,
        agent: AgentSettings,
        thread_id: str,
        budget: int | None,
        values: dict[str, Any] | None,
    ) -> None:
        """After the answer: summarise old turns if the thread outgrew its `budget`.

        Never before a turn's first word: the summary is made between turns, and the
        next turn uses it once it is there (until then, the whole thread).
        """
        if not budget or not values or thread_id in self._summarising:
            return
        if not split_for_summary(list(values.get("messages") or []), budget):
            return
        model = self._fast_model(agent)
        self._summarising.add(thread_id)
        task = self.in_background(
            self._summarise(thread_id, model, budget, values),
            "langgraph_conversation history summary",
        )
        task.add_done_callback(lambda _: self._summarising.discard(thread_id))

    def _fast_model(self, agent: AgentSettings) -> Any:
        return self._models.roles(self._access, agent.roles, agent.settings).fast.model

    async def _summarise(
        self, thread_id: str, model: Any, budget: int, values: dict[str, Any]
    ) -> None:
        """Summarise the thread as it was after a turn; apply it only if still valid.

        The summary and the removal of what it covers are one checkpoint: the thread has
        both or neither, whether the model fails or Home Assistant stops meanwhile. The
        model call runs without the thread's lock, so turns go on in the meantime; the
        result is dropped if the thread changed under it (cleared, summarised, paused).
        """
        try:
            update = await compact_history(model, values, budget)
            if not update:
                return
            removed = {message.id for message in update["messages"]}
            async with self._threads.lock(thread_id):
                if confirmation_actions(await self._threads.pending_interrupts(thread_id)):
                    return
                config = {"configurable": {"thread_id": thread_id}}
                current = (await self._threads.graph.aget_state(config)).values
                present = {message.id for message in current.get("messages", [])}
                if current.get("summary", "") != values.get("summary", "") or not (
                    removed <= present
                ):
                    return
                await self._threads.graph.aupdate_state(config, update, as_node=MODEL_NODE)
        except Exception:  # an unsummarised thread is still whole and usable
            _LOGGER.warning("Could not summarise a long conversation", exc_info=True)

    async def _learn(
        self, store: BaseStore, scope: MemoryScope, model: Any, request: str, answer: str
    ) -> None:
        try:
            await learn_from_exchange(store, scope, model, request, answer)
        except Exception as err:  # noqa: BLE001  a lost memory must never surface as an error
            # The kind only: the detail may quote a provider's answer.
            _LOGGER.warning(
                "Could not learn memories from a conversation (%s)", classify_error(err)
            )

    async def wait(self, timeout: float = CLOSE_WAIT) -> None:
        """Wait up to `timeout` for background work still running, then cancel the rest."""
        if not self._tasks:
            return
        _done, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
