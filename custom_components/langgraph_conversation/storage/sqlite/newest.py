"""What a SQLite saver keeps of its threads' newest checkpoints, to read them back cheaply.

A turn reads its thread's newest checkpoint twice (the check for a pending confirmation,
then LangGraph's read to run the graph), and the checkpoint it reads is, most of the time,
the one the saver wrote at the end of the thread's last turn. Two things spare the file
and the interpreter that work, each only while the file says it still holds:

- `Prefetched`: the rows the check read, for the read of the same checkpoint that follows
  it, once, while no write was submitted to the file since (`SqliteDatabase.changes`).
- `Written`: the channel values the saver last wrote for a thread, for any read whose row,
  read from the file in the read's own transaction, is still that checkpoint.

Shared by a saver's clones (LangGraph clones a saver per compiled graph).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

# Threads whose newest checkpoint rows an interrupt check keeps for the read that follows.
PREFETCHED_KEPT = 16
# Threads whose newest checkpoint's channel values the saver keeps as it wrote them.
WRITTEN_KEPT = 64

type Row = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Written:
    """A thread's newest checkpoint (root namespace) as the saver stored it: its id, its
    channel versions as stored (JSON text) and its channel values, the objects LangGraph
    handed `aput` (their containers copied).

    A read whose row is still this checkpoint (the same id and the same channel versions)
    does not read the values back and revive them: it answers with these, their
    containers copied again (LangGraph replaces a channel's value, it does not change one
    in place). Reviving every message of a long conversation was most of a turn's
    reading: about 1 ms at 100 messages (scripts/bench, figure 1). Whatever else wrote
    the file since (another saver, a deletion) changed the row, and the read goes to the
    file as before.
    """

    checkpoint_id: str
    channel_versions: str
    values: dict[str, Any]

    def is_row_of(self, checkpoint_id: str, channel_versions: str) -> bool:
        """Whether a stored checkpoint is this one: the same id and the same channel
        versions, so the same values (a version's value is stored once, never changed)."""
        return checkpoint_id == self.checkpoint_id and channel_versions == self.channel_versions

    def channel_values(self) -> dict[str, Any]:
        """The values for a reader of their own."""
        return {channel: container_copy(value) for channel, value in self.values.items()}


# A checkpoint as read: its row, its channel values (as stored, or as the saver wrote them
# when the row says they are those) and its pending writes (as stored).
type Found = tuple[Row, list[Row] | Written, list[Row]]


class NotPrefetched:
    """No rows kept for the read: it goes to the file."""


NOT_PREFETCHED = NotPrefetched()


class NewestCheckpoints:
    """The rows interrupt checks read, and the checkpoints the saver wrote, per thread."""

    def __init__(self) -> None:
        self._prefetched: OrderedDict[str, tuple[int, Found | None]] = OrderedDict()
        self._written: OrderedDict[str, Written] = OrderedDict()

    def written(self, thread_id: str) -> Written | None:
        """The thread's newest checkpoint as the saver wrote it, if it is kept."""
        return self._written.get(thread_id)

    def wrote(
        self, thread_id: str, checkpoint_id: str, channel_versions: str, values: dict[str, Any]
    ) -> None:
        """The saver stored this checkpoint as the thread's newest (root namespace)."""
        self._written.pop(thread_id, None)
        self._written[thread_id] = Written(
            checkpoint_id,
            channel_versions,
            {channel: container_copy(value) for channel, value in values.items()},
        )
        _bound(self._written, WRITTEN_KEPT)

    def forget(self, thread_id: str) -> None:
        """The thread was deleted."""
        self._written.pop(thread_id, None)

    def prefetched(self, thread_id: str, changes: int, found: Found | None) -> None:
        """An interrupt check read these rows; `changes`: the file's count of writes
        submitted when it was read."""
        self._prefetched.pop(thread_id, None)
        self._prefetched[thread_id] = (changes, found)
        _bound(self._prefetched, PREFETCHED_KEPT)

    def take_prefetched(self, thread_id: str, changes: int) -> Found | NotPrefetched | None:
        """The rows the thread's last interrupt check read, once, if the file's count of
        writes is still `changes`; else NOT_PREFETCHED."""
        entry = self._prefetched.pop(thread_id, None)
        if entry is None or entry[0] != changes:
            return NOT_PREFETCHED
        return entry[1]


def container_copy(value: Any) -> Any:
    """A channel value's own container copied (a list or dict of messages, the held
    confirmation): the objects it holds are shared, never changed in place."""
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def _bound(kept: OrderedDict[str, Any], size: int) -> None:
    while len(kept) > size:
        kept.popitem(last=False)
