"""The conversations' saver that outlives its database (LangGraph's saver interface).

While the database works, every call goes to it, and the newest checkpoint of each recently
used conversation is remembered (by reference, no copy: `MIRRORED_THREADS` of them), so
that a conversation can go on when the database fails. While it is down, calls go to
LangGraph's in-memory saver at once; a conversation met there for the first time starts
from its remembered checkpoint, so its history continues and the chain of checkpoints
stays the database's own. What the memory side received (conversations written, and
conversations deleted) is written back when the database works again (health.py), through
storage/copy.py, which skips what is already there: nothing is written twice, and a step
that failed half-way in the database is simply written again whole.

A conversation the memory side began afresh although the database holds it (it was not
used since Home Assistant started, or the database could not be opened at start) would
hide the database's history if written back as it is: its newest checkpoint is written
as the continuation of the database's newest instead, with the database's messages first
(`history_channel`, LangGraph's "messages" by convention), once each; so is what a turn
begun in memory writes after the database is back. Nothing said is lost either way.

At most `ASIDE_THREADS` conversations are kept in memory during an outage: past that, the
least recently used is dropped (logged once per outage), so the newest always survive.

A checkpoint is handed to the database without waiting for it to be written (`aput`): the
turn that made it answers while the database's thread writes it. Every later call about the
same conversation (a read, its next checkpoint, its deletion) first waits for that write
to end, so nobody reads a conversation older than its last answer; a write that fails puts
the checkpoint in memory, as a failed call always does, before that wait ends. The
storage's close waits for every write still on its way (`settled`).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Collection, Sequence
import copy
from dataclasses import dataclass, field
import logging
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.types import INTERRUPT

from ..copy import CopyCounts, copy_thread, put_pending_writes
from .health import StorageHealth

_LOGGER = logging.getLogger(__name__)

# Conversations whose newest checkpoint is remembered while the database works.
MIRRORED_THREADS = 500
# Conversations kept in memory while the database is down.
ASIDE_THREADS = 500
# Allow-lists whose clone is kept (each compiled graph asks with its own).
_ALLOWLISTS_KEPT = 16

type _Key = tuple[str, str]  # (thread id, checkpoint namespace)


def _key(config: RunnableConfig) -> _Key:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))


def _thread_config(key: _Key) -> RunnableConfig:
    return {"configurable": {"thread_id": key[0], "checkpoint_ns": key[1]}}


_IDENTITY = ("thread_id", "checkpoint_ns", "checkpoint_id")


def _identity(config: RunnableConfig) -> RunnableConfig:
    """Which checkpoint a config names, and nothing else.

    The config LangGraph hands `aput` also carries its run's internals (the runtime with
    the run's context: a turn's tools, models and memories); a remembered checkpoint that
    kept it would keep each conversation's last turn alive (scripts/bench figure 4:
    ~40 KiB per conversation).
    """
    configurable = config["configurable"]
    return {
        "configurable": {name: configurable[name] for name in _IDENTITY if name in configurable}
    }


@dataclass
class _Latest:
    """A conversation's newest checkpoint as last written or read, with its writes."""

    found: CheckpointTuple
    writes: dict[tuple[str, int], tuple[str, str, Any]] = field(default_factory=dict)


@dataclass
class _Sides:
    """What every clone of one HealingSaver shares (LangGraph clones a saver to give it
    another serializer allow-list, see with_allowlist)."""

    aside: InMemorySaver = field(default_factory=InMemorySaver)
    mirror: OrderedDict[_Key, _Latest] = field(default_factory=OrderedDict)
    # Conversations in the memory side (least recently used first) and those written there
    # since the last write-back pass; conversations deleted while down.
    in_aside: OrderedDict[_Key, None] = field(default_factory=OrderedDict)
    dirty: set[_Key] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    # Conversations begun afresh in memory although the database may hold them. Kept past
    # the write-back: a turn begun in memory may end after the database is back, and its
    # checkpoints go after the database's history until one holds it already.
    afresh: set[_Key] = field(default_factory=set)
    dropped: int = 0
    # Every allow-list the graphs asked for: the write-back reads the memory side with it.
    allowlist: frozenset[tuple[str, ...]] = frozenset()
    # The database's and the memory side's clones for each allow-list in use, by the
    # saver's id (with the saver, so that a new saver under an old id is not mistaken).
    clones: dict[
        tuple[int, frozenset[tuple[str, ...]]], tuple[BaseCheckpointSaver, BaseCheckpointSaver]
    ] = field(default_factory=dict)
    # The clones with_allowlist made, by the allow-list asked for (its id and size, and the
    # clone's own allow-list), with that very collection: LangGraph asks at every run,
    # with its compiled graph's same set.
    allowlisted: OrderedDict[tuple[int, int, frozenset[tuple[str, ...]]], tuple[object, Any]] = (
        field(default_factory=OrderedDict)
    )
    # Checkpoints handed to the database and not yet written, by conversation (see aput).
    saving: dict[_Key, asyncio.Task[RunnableConfig]] = field(default_factory=dict)


def _latest_of(found: CheckpointTuple) -> _Latest:
    """A checkpoint as remembered: its pending writes by (task, index), as savers keep them."""
    latest = _Latest(found)
    for index, (task_id, channel, value) in enumerate(found.pending_writes or ()):
        latest.writes[(task_id, WRITES_IDX_MAP.get(channel, index))] = (task_id, channel, value)
    return latest


class HealingSaver(BaseCheckpointSaver):
    """LangGraph's saver over a database saver that may fail, with memory as the way on."""

    def __init__(
        self,
        source: Callable[[], BaseCheckpointSaver | None],
        health: StorageHealth,
        *,
        aside_threads: int = ASIDE_THREADS,
        history_channel: str = "messages",
    ) -> None:
        """`source` gives the database's saver (None while it could not be opened);
        `health` says whether it is up and writes back through this saver's part;
        `history_channel` is the state's list of messages (see the module docstring)."""
        super().__init__()
        self._source = source
        self._history_channel = history_channel
        self._health = health
        self._aside_threads = aside_threads
        self._sides = _Sides()
        self._allowlist: frozenset[tuple[str, ...]] = frozenset()
        health.add_part(self._write_back, self._reset)

    # -- which saver answers -------------------------------------------------------------

    def _clone(
        self, saver: BaseCheckpointSaver, allowlist: frozenset[tuple[str, ...]] | None = None
    ) -> BaseCheckpointSaver:
        """`saver` reading with this clone's allow-list (or `allowlist`)."""
        allowlist = self._allowlist if allowlist is None else allowlist
        if not allowlist:
            return saver
        key = (id(saver), allowlist)
        known = self._sides.clones.get(key)
        if known is None or known[0] is not saver:
            known = self._sides.clones[key] = (saver, saver.with_allowlist(allowlist))
        return known[1]

    def _primary(self) -> BaseCheckpointSaver | None:
        """The database's saver while it is up, else None."""
        source = self._source() if self._health.up else None
        return self._clone(source) if source is not None else None

    @property
    def _aside(self) -> BaseCheckpointSaver:
        return self._clone(self._sides.aside)

    def _failed(self, error: BaseException) -> None:
        """A database call failed: down if it is an outage, else the error stands."""
        if not self._health.is_outage(error):
            raise error
        self._health.failed(error)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> HealingSaver:
        """A clone whose database and memory savers read with the allow-list too (made
        once per allow-list: copying the saver and the allow-list is no work for a run)."""
        sides = self._sides
        key = (id(extra_allowlist), len(extra_allowlist), self._allowlist)
        known = sides.allowlisted.get(key)
        if known is not None and known[0] is extra_allowlist:
            sides.allowlisted.move_to_end(key)
            return known[1]
        clone = copy.copy(self)
        clone._allowlist = self._allowlist | frozenset(tuple(entry) for entry in extra_allowlist)
        sides.allowlist |= clone._allowlist
        sides.allowlisted[key] = (extra_allowlist, clone)
        while len(sides.allowlisted) > _ALLOWLISTS_KEPT:
            sides.allowlisted.popitem(last=False)
        return clone

    def get_next_version(self, current: Any, channel: None) -> Any:
        saver = self._source() or self._sides.aside
        return saver.get_next_version(current, channel)

    # -- LangGraph's saver interface -----------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        await self._settled(_key(config))
        if (primary := self._primary()) is not None:
            try:
                found = await primary.aget_tuple(config)
            except Exception as err:  # noqa: BLE001  _failed raises what is no outage
                self._failed(err)
            else:
                if "checkpoint_id" not in config["configurable"]:
                    self._remember(_key(config), found)
                return found
        self._health.nudge()
        await self._seed(_key(config))
        return await self._aside.aget_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # LangGraph's parameter name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        if config is None:
            await self.settled()
        else:
            await self._settled(_key(config))
        found: list[CheckpointTuple] | None = None
        if (primary := self._primary()) is not None:
            try:
                found = [
                    item
                    async for item in primary.alist(
                        config, filter=filter, before=before, limit=limit
                    )
                ]
            except Exception as err:  # noqa: BLE001  _failed raises what is no outage
                self._failed(err)
        if found is None:
            self._health.nudge()
            if config is not None:
                await self._seed(_key(config))
            found = [
                item
                async for item in self._aside.alist(
                    config, filter=filter, before=before, limit=limit
                )
            ]
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Hand the checkpoint to the database and return without waiting for its write
        (see the module docstring); in memory at once while the database is down.

        The write starts before this returns (an eager task runs up to the database's
        queue), so whatever the database is asked next comes after it. What fails before
        the database is reached (a value that cannot be stored) is raised here, as ever.
        """
        key = _key(config)
        await self._settled(key)
        if (primary := self._primary()) is None:
            return await self._put_aside(key, config, checkpoint, metadata)
        # The loop named: Python 3.13's Task asks the argument, not the loop it found,
        # whether it runs before starting eagerly.
        saving = asyncio.Task(
            self._save(primary, key, config, checkpoint, metadata, new_versions),
            loop=asyncio.get_running_loop(),
            eager_start=True,
        )
        if saving.done():
            return saving.result()
        self._sides.saving[key] = saving
        saving.add_done_callback(lambda ended: self._save_ended(key, ended))
        # What the database's saver returns once written: the checkpoint's identity.
        return {
            "configurable": {
                "thread_id": key[0],
                "checkpoint_ns": key[1],
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def _save(
        self,
        primary: BaseCheckpointSaver,
        key: _Key,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """The database's write of a checkpoint, or memory's if the database fails."""
        try:
            target = (config, checkpoint, new_versions)
            if key in self._sides.afresh:
                target = await self._after_database(primary, key, *target)
            saved = await primary.aput(target[0], target[1], metadata, target[2])
        except Exception as err:  # noqa: BLE001  _failed raises what is no outage
            self._failed(err)
        else:
            parent = _identity(target[0]) if "checkpoint_id" in target[0]["configurable"] else None
            self._remember(key, CheckpointTuple(_identity(saved), target[1], metadata, parent, []))
            return saved
        return await self._put_aside(key, config, checkpoint, metadata)

    def _save_ended(self, key: _Key, ended: asyncio.Task[RunnableConfig]) -> None:
        """A write handed over by aput ended. Its turn has answered already: an error that
        is no outage (which would have failed the turn) can only be logged now."""
        if self._sides.saving.get(key) is ended:
            del self._sides.saving[key]
        if not ended.cancelled() and (error := ended.exception()) is not None:
            _LOGGER.error(
                "Conversation %s could not be saved, its last turn is not kept: %s",
                key[0],
                error,
                exc_info=error,
            )

    async def _settled(self, key: _Key) -> None:
        """The conversation's write handed over by aput has ended (written, or in memory)."""
        if (saving := self._sides.saving.get(key)) is not None:
            await asyncio.wait((saving,))

    async def settled(self) -> None:
        """Every write handed over by aput has ended (the storage closes after this)."""
        while saving := list(self._sides.saving.values()):
            await asyncio.wait(saving)

    async def _put_aside(
        self,
        key: _Key,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
    ) -> RunnableConfig:
        """A checkpoint into memory (the database is down, or failed to take it)."""
        await self._seed(key)
        # Every channel's value goes in: the memory side has none of the earlier blobs.
        saved = await self._aside.aput(
            config, checkpoint, metadata, dict(checkpoint["channel_versions"])
        )
        await self._kept(key)
        return saved

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        key = _key(config)
        await self._settled(key)
        if (primary := self._primary()) is not None:
            try:
                await primary.aput_writes(config, writes, task_id, task_path)
            except Exception as err:  # noqa: BLE001  _failed raises what is no outage
                self._failed(err)
            else:
                self._remember_writes(key, config, writes, task_id)
                return
        await self._seed(key)
        await self._aside.aput_writes(config, writes, task_id, task_path)
        await self._kept(key)

    async def adelete_thread(self, thread_id: str) -> None:
        for key in [key for key in self._sides.saving if key[0] == thread_id]:
            await self._settled(key)
        for key in [key for key in self._sides.mirror if key[0] == thread_id]:
            del self._sides.mirror[key]
        if (primary := self._primary()) is not None:
            try:
                await primary.adelete_thread(thread_id)
            except Exception as err:  # noqa: BLE001  _failed raises what is no outage
                self._failed(err)
            else:
                return
        sides = self._sides
        await self._aside.adelete_thread(thread_id)
        for key in [key for key in sides.in_aside if key[0] == thread_id]:
            del sides.in_aside[key]
            sides.dirty.discard(key)
        sides.deleted.add(thread_id)
        sides.afresh -= {key for key in sides.afresh if key[0] == thread_id}
        self._health.changes += 1

    async def apending_interrupts(self, thread_id: str) -> list[Any]:
        """The interrupts the thread's newest checkpoint waits on (the database saver's own
        quick read when it has one)."""
        await self._settled((thread_id, ""))
        primary = self._primary()
        read = getattr(primary, "apending_interrupts", None)
        if read is not None:
            try:
                return list(await read(thread_id))
            except Exception as err:  # noqa: BLE001  _failed raises what is no outage
                self._failed(err)
        found = await self.aget_tuple(_thread_config((thread_id, "")))
        writes = (found.pending_writes or []) if found is not None else []
        return [
            interrupt for _, channel, value in writes if channel == INTERRUPT for interrupt in value
        ]

    # -- the mirror, and the memory side -------------------------------------------------

    def _remember(self, key: _Key, found: CheckpointTuple | None) -> None:
        mirror = self._sides.mirror
        if found is None:
            mirror.pop(key, None)
            return
        latest = mirror.get(key)
        if latest is None or latest.found.checkpoint["id"] != found.checkpoint["id"]:
            latest = _latest_of(found)
        mirror[key] = latest
        mirror.move_to_end(key)
        while len(mirror) > MIRRORED_THREADS:
            mirror.popitem(last=False)

    def _remember_writes(
        self, key: _Key, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str
    ) -> None:
        latest = self._sides.mirror.get(key)
        if latest is None or latest.found.checkpoint["id"] != config["configurable"].get(
            "checkpoint_id"
        ):
            return
        for index, (channel, value) in enumerate(writes):
            latest.writes[(task_id, WRITES_IDX_MAP.get(channel, index))] = (task_id, channel, value)

    async def _seed(self, key: _Key) -> None:
        """A conversation met in memory for the first time starts from the checkpoint the
        database last gave or took for it (and its pending writes, such as a question
        waiting for a yes)."""
        sides = self._sides
        if key in sides.in_aside:
            return
        sides.in_aside[key] = None
        latest = sides.mirror.get(key)
        if latest is None:
            found = await self._read_through(key)
            if found is None:
                sides.afresh.add(key)
                return
            latest = _latest_of(found)
        found = latest.found
        checkpoint = found.checkpoint
        saved = await self._aside.aput(
            found.parent_config or _thread_config(key),
            checkpoint,
            found.metadata,
            dict(checkpoint["channel_versions"]),
        )
        await put_pending_writes(self._aside, saved, latest.writes.values())

    async def _read_through(self, key: _Key) -> CheckpointTuple | None:
        """The database's newest checkpoint of a conversation not remembered, where the
        database may still answer reads while it refuses writes (StorageHealth); none for
        a conversation deleted meanwhile (the database's copy is yet to be deleted)."""
        source = self._source()
        if source is None or not self._health.reads_while_down or key[0] in self._sides.deleted:
            return None
        try:
            return await self._clone(source).aget_tuple(_thread_config(key))
        except Exception as err:
            if not self._health.is_outage(err):
                raise
            return None

    async def _kept(self, key: _Key) -> None:
        """Something was written to memory for `key`: it waits for the write-back."""
        sides = self._sides
        sides.in_aside[key] = None
        sides.in_aside.move_to_end(key)
        sides.dirty.add(key)
        self._health.changes += 1
        while len(sides.in_aside) > self._aside_threads:
            oldest, _ = sides.in_aside.popitem(last=False)
            sides.dirty.discard(oldest)
            await self._sides.aside.adelete_thread(oldest[0])
            if not sides.dropped:
                _LOGGER.warning(
                    "More than %d conversations during the outage of %s: the least recently"
                    " used are dropped from memory and will not be written back",
                    self._aside_threads,
                    self._health.name,
                )
            sides.dropped += 1

    async def _write_back(self) -> dict[str, int]:
        """What the memory side received, into the database (health.py calls this)."""
        primary = self._source()
        if primary is None:
            raise RuntimeError(f"{self._health.name} is not open")
        sides = self._sides
        counts = CopyCounts()
        deleted = 0
        for thread_id in list(sides.deleted):
            await primary.adelete_thread(thread_id)
            sides.deleted.discard(thread_id)
            deleted += 1
        for key in list(sides.dirty):
            if key[0] in sides.deleted:
                # Deleted during this pass (and maybe begun again): the next pass deletes
                # it from the database first, then writes what came after.
                continue
            # Taken first: a turn writing to it meanwhile marks it again for the next pass.
            sides.dirty.discard(key)
            try:
                aside = self._clone(sides.aside, sides.allowlist)
                target = self._clone(primary, sides.allowlist)
                if not await self._rebased(aside, target, key, counts):
                    await copy_thread(aside, target, key[0], key[1], counts)
                # The next outage continues from what the database holds now, not from the
                # checkpoint remembered before this one (unless deleted meanwhile: the
                # next pass deletes it from the database).
                found = await target.aget_tuple(_thread_config(key))
                if key[0] not in sides.deleted:
                    self._remember(key, found)
            except BaseException:
                sides.dirty.add(key)
                raise
        return {
            "conversations": counts.threads_copied,
            "checkpoints": counts.checkpoints_copied,
            "conversations_deleted": deleted,
        }

    async def _rebased(
        self,
        aside: BaseCheckpointSaver,
        target: BaseCheckpointSaver,
        key: _Key,
        counts: CopyCounts,
    ) -> bool:
        """Write a conversation begun afresh in memory after the database's own history,
        if the database has one (see the module docstring); whether it did."""
        chain = [found async for found in aside.alist(_thread_config(key))]
        if not chain or chain[-1].parent_config is not None:
            return False  # continued from the database's own checkpoint: copied as is
        base = await target.aget_tuple(_thread_config(key))
        if base is None:
            return False  # new to the database too
        newest = chain[0]
        if await target.aget_tuple(newest.config) is not None:
            return True  # written back already
        checkpoint = copy.copy(newest.checkpoint)
        checkpoint["channel_values"] = self._after_history(base.checkpoint, checkpoint)
        saved = await target.aput(
            base.config, checkpoint, newest.metadata, dict(checkpoint["channel_versions"])
        )
        await put_pending_writes(target, saved, newest.pending_writes or ())
        counts.checkpoints_copied += 1
        counts.threads_copied += 1
        return True

    async def _after_database(
        self,
        primary: BaseCheckpointSaver,
        key: _Key,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
    ) -> tuple[RunnableConfig, Checkpoint, ChannelVersions]:
        """Where a checkpoint of a conversation begun afresh goes in the database: after
        the database's newest with its messages first while it lacks them, else as it is
        (and the conversation is no longer watched)."""
        base = await primary.aget_tuple(_thread_config(key))
        channel = self._history_channel
        if base is not None and channel in checkpoint["channel_versions"]:
            values = self._after_history(base.checkpoint, checkpoint)
            if len(values[channel]) > len(checkpoint["channel_values"].get(channel) or ()):
                # The history's value is stored anew under the checkpoint's own version.
                versions = {**new_versions, channel: checkpoint["channel_versions"][channel]}
                return base.config, {**checkpoint, "channel_values": values}, versions
        self._sides.afresh.discard(key)
        return config, checkpoint, new_versions

    def _after_history(self, base: Checkpoint, checkpoint: Checkpoint) -> dict[str, Any]:
        """`checkpoint`'s values with the messages of `base` it does not hold first. By id:
        the database's newest may be an earlier pass's write-back of this conversation,
        whose messages the checkpoint holds already (they are not repeated)."""
        channel = self._history_channel
        values = dict(checkpoint["channel_values"])
        own = list(values.get(channel) or [])
        held = {message_id for message in own if (message_id := getattr(message, "id", None))}
        earlier = [
            message
            for message in base["channel_values"].get(channel) or ()
            if not (message_id := getattr(message, "id", None)) or message_id not in held
        ]
        values[channel] = [*earlier, *own]
        return values

    def pending(self) -> int:
        """Conversations written or deleted in memory and not yet written back."""
        return len(self._sides.dirty) + len(self._sides.deleted)

    def _reset(self) -> None:
        """The database holds everything again: the memory side starts empty."""
        sides = self._sides
        sides.aside = InMemorySaver()
        sides.in_aside.clear()
        sides.dirty.clear()
        sides.deleted.clear()
        sides.dropped = 0
        sides.clones.clear()
