"""The memory store that outlives its database (LangGraph's store interface).

While the database works, every call goes to it. While it is down, reads and writes go to
LangGraph's in-memory store at once: a turn finds the memories said since the outage began
(not the older ones, which stay in the database), and what is written is also kept in
order, to be written to the database again when it works (health.py). A memory written
twice is one row (a put replaces by key); a deletion is repeated as a deletion.

Where the database still answers reads while it refuses writes (an SQLite file that is
locked, full or read-only: `StorageHealth.reads_while_down`), reads during the outage also
ask it, and what was written or deleted in memory meanwhile takes precedence; a read that
fails too answers from memory alone.

At most `ASIDE_WRITES` writes are kept during an outage: past that the oldest are dropped
(logged once per outage), so the newest always reach the database.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
import logging
from typing import Any

from langgraph.store.base import BaseStore, Item, Op, PutOp, Result
from langgraph.store.memory import InMemoryStore

from .health import StorageHealth

_LOGGER = logging.getLogger(__name__)

# Writes kept in memory while the database is down.
ASIDE_WRITES = 2000

# A write to repeat: the store method's name and its arguments.
type _Write = tuple[str, tuple[Any, ...], dict[str, Any]]


class HealingStore(BaseStore):
    """LangGraph's store over a database store that may fail, with memory as the way on."""

    def __init__(
        self,
        source: Callable[[], BaseStore | None],
        health: StorageHealth,
        *,
        aside_writes: int = ASIDE_WRITES,
    ) -> None:
        """`source` gives the database's store (None while it could not be opened)."""
        self._source = source
        self._health = health
        self._aside_writes = aside_writes
        self._aside = InMemoryStore()
        self._writes: deque[_Write] = deque()
        self._dropped = 0
        # (namespace, key) of the items written or deleted in memory during the outage.
        self._changed: set[tuple[tuple[str, ...], str]] = set()
        health.add_part(self._write_back, self._reset)

    def _primary(self) -> BaseStore | None:
        return self._source() if self._health.up else None

    @property
    def complete_reads(self) -> bool:
        """Whether a read sees everything stored: the database is up, or it still answers
        reads. False tells a reader that "nothing found" may be untrue (the agents'
        document search then says the documents cannot be searched)."""
        return self._health.up or (self._health.reads_while_down and self._source() is not None)

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """`name` on the database's store while up; on the memory side when down (a
        write also kept for the write-back)."""
        if (primary := self._primary()) is not None:
            try:
                return await getattr(primary, name)(*args, **kwargs)
            except Exception as err:  # an outage goes on in memory
                if not self._health.is_outage(err):
                    raise
                self._health.failed(err)
        self._health.nudge()
        aside_kwargs = {key: value for key, value in kwargs.items() if key != "ttl"}
        result = await getattr(self._aside, name)(*args, **aside_kwargs)
        if name in ("aput", "adelete"):
            self._changed.add((tuple(args[0]), args[1]))
            self._keep((name, args, kwargs))
        return result

    async def _read_through(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """A read while the database refuses writes but may still answer reads; None when
        it does not (or may not be asked)."""
        source = self._source()
        if self._health.up or not self._health.reads_while_down or source is None:
            return None
        try:
            return await getattr(source, name)(*args, **kwargs)
        except Exception as err:
            if not self._health.is_outage(err):
                raise
            return None

    def _keep(self, write: _Write) -> None:
        self._writes.append(write)
        self._health.changes += 1
        while len(self._writes) > self._aside_writes:
            self._writes.popleft()
            if not self._dropped:
                _LOGGER.warning(
                    "More than %d memory writes during the outage of %s: the oldest are"
                    " dropped and will not be written back",
                    self._aside_writes,
                    self._health.name,
                )
            self._dropped += 1

    # -- LangGraph's store interface -----------------------------------------------------

    async def aget(self, namespace: tuple[str, ...], key: str, **kwargs: Any) -> Item | None:
        found = await self._call("aget", namespace, key, **kwargs)
        if found is None and (tuple(namespace), key) not in self._changed:
            found = await self._read_through("aget", namespace, key, **kwargs)
        return found

    async def asearch(self, namespace_prefix: tuple[str, ...], /, **kwargs: Any) -> list[Any]:
        found = await self._call("asearch", namespace_prefix, **kwargs)
        earlier = await self._read_through("asearch", namespace_prefix, **kwargs)
        if earlier:
            # What memory holds is newer; the database's items it changed are left out.
            found = [
                *found,
                *(item for item in earlier if (item.namespace, item.key) not in self._changed),
            ][: kwargs.get("limit", 10)]
        return found

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        *args: Any,
        **kwargs: Any,
    ) -> None:
        await self._call("aput", namespace, key, value, *args, **kwargs)

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        await self._call("adelete", namespace, key)

    async def alist_namespaces(self, **kwargs: Any) -> list[tuple[str, ...]]:
        return await self._call("alist_namespaces", **kwargs)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        if (primary := self._primary()) is not None:
            try:
                return await primary.abatch(ops)
            except Exception as err:  # an outage goes on in memory
                if not self._health.is_outage(err):
                    raise
                self._health.failed(err)
        self._health.nudge()
        results = await self._aside.abatch([_without_ttl(op) for op in ops])
        for op in ops:
            if isinstance(op, PutOp):
                self._changed.add((tuple(op.namespace), op.key))
                if op.value is None:
                    self._keep(("adelete", (op.namespace, op.key), {}))
                else:
                    ttl = {} if op.ttl is None else {"ttl": op.ttl}
                    self._keep(("aput", (op.namespace, op.key, op.value, op.index), ttl))
        return results

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        # As the stores below it (storage/sqlite/store.py): their work runs on the event loop
        # or a file's thread and is awaited there; a sync call from the loop would block it.
        raise RuntimeError(
            "HealingStore is async-only: use abatch, aget, aput, adelete, asearch or "
            "alist_namespaces"
        )

    # -- the write-back ------------------------------------------------------------------

    async def _write_back(self) -> dict[str, int]:
        """The writes kept in memory, in order, into the database (health.py calls this)."""
        primary = self._source()
        if primary is None:
            raise RuntimeError(f"{self._health.name} is not open")
        written = 0
        while self._writes:
            name, args, kwargs = self._writes[0]
            await getattr(primary, name)(*args, **kwargs)
            # Removed only once written: a failure leaves it for the next attempt.
            self._writes.popleft()
            written += 1
        return {"memory_writes": written}

    def pending(self) -> int:
        """Memory writes kept in memory and not yet written back."""
        return len(self._writes)

    def _reset(self) -> None:
        self._aside = InMemoryStore()
        self._writes.clear()
        self._changed.clear()
        self._dropped = 0


def _without_ttl(op: Op) -> Op:
    """The memory side keeps no time to live (the write-back passes it on)."""
    if isinstance(op, PutOp) and op.ttl is not None:
        return PutOp(op.namespace, op.key, op.value, op.index)
    return op
