"""Conversation links and answer ratings that outlive their database.

They live beside the conversations (threads.db, or PostgreSQL's tables) and fail with
them. While the database works, every call goes to it, and the links written are also
remembered (the newest `MIRRORED_LINKS`): when it fails, an in-memory link table starts
with them, so a conversation used since Home Assistant started goes on with its own thread
(whose newest checkpoint saver.py remembers). Links put and ratings given during the
outage, and threads forgotten, are written back when the database works again (both
tables replace a row by its key, so nothing is written twice).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..backend import AnswerRatings, ConversationLinks, LinkRow, LinkTable
from .health import StorageHealth

# Links remembered while the database works (the in-memory table keeps as many).
MIRRORED_LINKS = 2000

type _LinkKey = tuple[str, str, str]  # (agent id, party, conversation id)
# A change to the links: a row put, or a thread id forgotten.
type _Change = LinkRow | str


class _Recording:
    """A link table that notes what a transaction put and forgot, in order (applied to the
    mirror on the event loop once the transaction is over: it may run on a database
    thread)."""

    def __init__(self, table: LinkTable) -> None:
        self._table = table
        self.changes: list[_Change] = []

    def __getattr__(self, name: str) -> Any:
        # Every read of the table passes through unchanged (only writes are noted).
        return getattr(self._table, name)

    def put(
        self, agent_id: str, party: str, conversation_id: str, thread_id: str, now: float
    ) -> None:
        self._table.put(agent_id, party, conversation_id, thread_id, now)
        self.changes.append((agent_id, party, conversation_id, thread_id, now))

    def forget_thread(self, thread_id: str) -> None:
        self._table.forget_thread(thread_id)
        self.changes.append(thread_id)


class HealingLinks:
    """ConversationLinks over the database's, with an in-memory table as the way on."""

    def __init__(
        self,
        source: Callable[[], ConversationLinks | None],
        health: StorageHealth,
        memory_table: Callable[[], ConversationLinks],
    ) -> None:
        """`memory_table` makes the in-memory link table used while the database is down
        (the agent's own, agent/memory/threads.py: storage/ does not import it)."""
        self._source = source
        self._health = health
        self._memory_table = memory_table
        self._mirror: OrderedDict[_LinkKey, tuple[str, float]] = OrderedDict()
        self._aside: ConversationLinks | None = None
        # The memory side's changes for the write-back: each link's latest put and each
        # thread's latest forgetting, in the order of those. Replayed so, the database ends
        # as the memory side: a link put before its thread was forgotten goes (also the
        # database's own row of that conversation, which the put replaced), one put after
        # stays.
        self._changes: OrderedDict[_LinkKey | str, tuple[str, float] | None] = OrderedDict()
        health.add_part(self._write_back, self._reset)

    async def read[T](self, work: Callable[[LinkTable], T]) -> T:
        return await self._run(work, write=False)

    async def write[T](self, work: Callable[[LinkTable], T]) -> T:
        return await self._run(work, write=True)

    async def _run[T](self, work: Callable[[LinkTable], T], *, write: bool) -> T:
        primary = self._source() if self._health.up else None
        if primary is not None:
            recording: list[_Recording] = []

            def recorded(table: LinkTable) -> T:
                recording.append(_Recording(table))
                return work(recording[-1])

            try:
                result = await (primary.write(recorded) if write else primary.read(recorded))
            except Exception as err:  # an outage goes on in memory
                if not self._health.is_outage(err):
                    raise
                self._health.failed(err)
            else:
                for table in recording[-1:]:
                    self._remember(table)
                return result
        self._health.nudge()
        aside = await self._memory()
        recording = []

        def kept(table: LinkTable) -> T:
            recording.append(_Recording(table))
            return work(recording[-1])

        result = await (aside.write(kept) if write else aside.read(kept))
        for table in recording[-1:]:
            self._remember(table)
            self._keep(table)
        return result

    def _remember(self, table: _Recording) -> None:
        mirror = self._mirror
        for change in table.changes:
            if isinstance(change, str):
                for key in [key for key, row in mirror.items() if row[0] == change]:
                    del mirror[key]
                continue
            key = change[:3]
            mirror[key] = change[3:]
            mirror.move_to_end(key)
        while len(mirror) > MIRRORED_LINKS:
            mirror.popitem(last=False)

    def _keep(self, table: _Recording) -> None:
        """What a transaction on the memory side changed, for the write-back."""
        for change in table.changes:
            key, row = (change, None) if isinstance(change, str) else (change[:3], change[3:])
            self._changes[key] = row
            self._changes.move_to_end(key)
        if table.changes:
            self._health.changes += 1

    async def _memory(self) -> ConversationLinks:
        """The in-memory table of this outage, starting with the links remembered."""
        if self._aside is None:
            self._aside = self._memory_table()
            rows = [(*key, *row) for key, row in self._mirror.items()]

            def seed(table: LinkTable) -> None:
                for agent_id, party, conversation_id, thread_id, now in rows:
                    table.put(agent_id, party, conversation_id, thread_id, now)

            await self._aside.write(seed)
        return self._aside

    async def _write_back(self) -> dict[str, int]:
        primary = self._source()
        if primary is None:
            raise RuntimeError(f"{self._health.name} is not open")
        changes, self._changes = self._changes, OrderedDict()

        def apply(table: LinkTable) -> None:
            for key, row in changes.items():
                if isinstance(key, str):
                    table.forget_thread(key)
                else:
                    table.put(*key, *row)

        try:
            await primary.write(apply)
        except BaseException:
            # Kept for the next attempt, before the changes made meanwhile (newer win).
            for key, row in self._changes.items():
                changes[key] = row
                changes.move_to_end(key)
            self._changes = changes
            raise
        return {"conversation_links": sum(not isinstance(key, str) for key in changes)}

    def pending(self) -> int:
        """Links put or forgotten in memory and not yet written back."""
        return len(self._changes)

    def _reset(self) -> None:
        self._aside = None
        self._changes = OrderedDict()


class HealingRatings:
    """Answer ratings over the database's, kept in memory while it is down."""

    def __init__(self, source: Callable[[], AnswerRatings | None], health: StorageHealth) -> None:
        self._source = source
        self._health = health
        # (thread id, message id) → (rating, comment, rated at), given during the outage.
        self._aside: dict[tuple[str, str], tuple[str, str, float]] = {}
        health.add_part(self._write_back, self._reset)

    def _primary(self) -> AnswerRatings | None:
        return self._source() if self._health.up else None

    async def rate(
        self, thread_id: str, message_id: str, rating: str, comment: str, now: float
    ) -> None:
        if (primary := self._primary()) is not None:
            try:
                await primary.rate(thread_id, message_id, rating, comment, now)
            except Exception as err:  # an outage goes on in memory
                if not self._health.is_outage(err):
                    raise
                self._health.failed(err)
            else:
                return
        self._health.nudge()
        self._aside[(thread_id, message_id)] = (rating, comment, now)
        self._health.changes += 1

    async def of_thread(self, thread_id: str) -> dict[str, dict[str, str]]:
        found: dict[str, dict[str, str]] = {}
        if (primary := self._primary()) is not None:
            try:
                found = await primary.of_thread(thread_id)
            except Exception as err:  # an outage goes on in memory
                if not self._health.is_outage(err):
                    raise
                self._health.failed(err)
        for (thread, message_id), (rating, comment, _) in self._aside.items():
            if thread == thread_id:
                found[message_id] = {"rating": rating, "comment": comment}
        return found

    async def _write_back(self) -> dict[str, Any]:
        primary = self._source()
        if primary is None:
            raise RuntimeError(f"{self._health.name} is not open")
        written = 0
        for key, (rating, comment, now) in list(self._aside.items()):
            await primary.rate(*key, rating, comment, now)
            if self._aside.get(key) == (rating, comment, now):
                del self._aside[key]
            written += 1
        return {"ratings": written}

    def pending(self) -> int:
        """Ratings given in memory and not yet written back."""
        return len(self._aside)

    def _reset(self) -> None:
        self._aside = {}
