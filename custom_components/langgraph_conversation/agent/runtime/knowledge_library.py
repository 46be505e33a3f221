"""The knowledge indexes of one runtime: one per agent, kept for the runtime's life,
read again on request, and forgotten with their agent."""

from __future__ import annotations

import asyncio
import logging

from langgraph.store.base import BaseStore

from ..knowledge import IndexReport, KnowledgeIndex, KnowledgeSource, forget_knowledge
from .housekeeping import Housekeeping

_LOGGER = logging.getLogger(__name__)


class KnowledgeLibrary:
    """Every agent's documents index in the entry's memory store (none without one)."""

    def __init__(self, store: BaseStore | None, housekeeping: Housekeeping) -> None:
        self._store = store
        self._housekeeping = housekeeping
        self._indexes: dict[str, KnowledgeIndex] = {}

    def index(self, source: KnowledgeSource) -> KnowledgeIndex | None:
        """The agent's knowledge index (one per agent, kept for the runtime's life)."""
        if self._store is None:
            return None
        index = self._indexes.get(source.agent)
        if index is None or index.source != source:
            if index is not None:  # the agent was renamed: its old folder's indexing stops
                self._housekeeping.in_background(
                    index.aclose(), "langgraph_conversation knowledge close"
                )
            index = self._indexes[source.agent] = KnowledgeIndex(self._store, source)
        return index

    async def reindex(self, source: KnowledgeSource) -> IndexReport | None:
        """Read every file of the agent's folder again; None without a memory store."""
        index = self.index(source)
        if index is None:
            return None
        return await index.refresh(force=True)

    async def forget(self, source: KnowledgeSource) -> None:
        """The agent is gone: drop its documents from the store (the files stay).

        Failing to do so leaves unused rows behind, never a broken agent: logged only.
        The work is registered as background work before its first wait, so an unload
        that starts meanwhile lets it finish before the store closes: Home Assistant
        2026.11 removes a deleted agent's entity while the entry already reloads.
        """
        task = self._housekeeping.in_background(
            self._forget(source), "langgraph_conversation documents index removal"
        )
        await asyncio.wait({task})

    async def _forget(self, source: KnowledgeSource) -> None:
        if (index := self._indexes.pop(source.agent, None)) is not None:
            await index.aclose()
        if self._store is None:
            return
        try:
            removed = await forget_knowledge(self._store, source)
        except Exception:
            _LOGGER.exception("Could not remove the documents index of %s", source.agent)
            return
        if removed:
            _LOGGER.info("Removed the documents index of %s (%d items)", source.agent, removed)

    async def aclose(self) -> None:
        """Indexing of documents stops (it starts again on the next search after a
        reload)."""
        await asyncio.gather(*(index.aclose() for index in self._indexes.values()))
