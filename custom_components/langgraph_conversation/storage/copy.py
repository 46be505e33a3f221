"""Copying conversations and memories from one storage to another (SQLite files, PostgreSQL).

Both directions go through LangGraph's saver and store interfaces only (alist/aput/
aput_writes, alist_namespaces/asearch/aput), so what arrives is read back exactly as the
agents read it. The copy adds, never deletes: the source is only read (its files or its
tables stay as they were), and what the target already holds is left alone, so running it
again after an interruption finishes the rest and a second run copies nothing.

- A conversation (thread) counts as already there when the target holds its newest
  checkpoint; otherwise its checkpoints are copied oldest first (those already there are
  skipped), with the pending writes of each (a confirmation waiting for a yes).
- A memory counts as already there when the target holds its key in its namespace.

The target's own retention applies to what arrives (PostgreSQL's saver keeps the newest
checkpoints per thread, as configured). Memories arrive with the copy's time as their
time; conversation links and answer ratings are copied (a link or a rating already there
is kept: it is the target's own, or a later one).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.store.base import BaseStore

from .backend import AnswerRatings, ConversationLinks, LinkTable, StorageBackend

# Memories read from the source per request.
_PAGE = 100


@dataclass(slots=True)
class CopyCounts:
    """What a copy did: copied now, and found already there."""

    threads_copied: int = 0
    threads_already_there: int = 0
    checkpoints_copied: int = 0
    memories_copied: int = 0
    memories_already_there: int = 0
    links_copied: int = 0
    links_already_there: int = 0
    ratings_copied: int = 0
    ratings_already_there: int = 0
    namespaces: set[tuple[str, ...]] = field(default_factory=set)

    def as_response(self) -> dict[str, Any]:
        return {
            "threads": {"copied": self.threads_copied, "already_there": self.threads_already_there},
            "checkpoints_copied": self.checkpoints_copied,
            "conversation_links": {
                "copied": self.links_copied,
                "already_there": self.links_already_there,
            },
            "ratings": {
                "copied": self.ratings_copied,
                "already_there": self.ratings_already_there,
            },
            "memories": {
                "copied": self.memories_copied,
                "already_there": self.memories_already_there,
                "namespaces": len(self.namespaces),
            },
        }


def _config(thread_id: str, namespace: str, checkpoint_id: str | None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": namespace}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


async def copy_threads(
    source: BaseCheckpointSaver, target: BaseCheckpointSaver, counts: CopyCounts
) -> None:
    """Every thread of `source` into `target` (see the module docstring)."""
    threads: dict[tuple[str, str], list[CheckpointTuple]] = defaultdict(list)
    async for found in source.alist(None):
        configurable = found.config["configurable"]
        threads[(configurable["thread_id"], configurable.get("checkpoint_ns", ""))].append(found)
    for (thread_id, namespace), newest_first in threads.items():
        await _copy_checkpoints(target, thread_id, namespace, newest_first, counts)


async def copy_thread(
    source: BaseCheckpointSaver,
    target: BaseCheckpointSaver,
    thread_id: str,
    namespace: str,
    counts: CopyCounts,
) -> None:
    """One thread (one namespace of it) of `source` into `target`, as copy_threads does."""
    newest_first = [found async for found in source.alist(_config(thread_id, namespace, None))]
    if newest_first:
        await _copy_checkpoints(target, thread_id, namespace, newest_first, counts)


async def _copy_checkpoints(
    target: BaseCheckpointSaver,
    thread_id: str,
    namespace: str,
    newest_first: list[CheckpointTuple],
    counts: CopyCounts,
) -> None:
    """A thread's checkpoints, oldest first, unless the target holds its newest already."""
    newest = newest_first[0].checkpoint["id"]
    if await target.aget_tuple(_config(thread_id, namespace, newest)) is not None:
        counts.threads_already_there += 1
        return
    for found in reversed(newest_first):
        checkpoint = found.checkpoint
        if await target.aget_tuple(_config(thread_id, namespace, checkpoint["id"])):
            continue
        parent = (found.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        saved = await target.aput(
            _config(thread_id, namespace, parent),
            checkpoint,
            found.metadata,
            dict(checkpoint["channel_versions"]),
        )
        await put_pending_writes(target, saved, found.pending_writes or ())
        counts.checkpoints_copied += 1
    counts.threads_copied += 1


async def put_pending_writes(
    target: BaseCheckpointSaver,
    saved: dict[str, Any],
    pending_writes: Iterable[tuple[str, str, Any]],
) -> None:
    """A checkpoint's pending writes (task id, channel, value) onto the checkpoint `saved`
    (the config `aput` returned), task by task as LangGraph writes them."""
    by_task: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for task_id, channel, value in pending_writes:
        by_task[task_id].append((channel, value))
    for task_id, writes in by_task.items():
        await target.aput_writes(saved, writes, task_id)


async def copy_memories(source: BaseStore, target: BaseStore, counts: CopyCounts) -> None:
    """Every item of every namespace of `source` into `target`, unless already there."""
    namespaces = await source.alist_namespaces(limit=100_000)
    for namespace in namespaces:
        counts.namespaces.add(namespace)
        offset = 0
        while page := await source.asearch(namespace, limit=_PAGE, offset=offset):
            offset += len(page)
            for item in page:
                if item.namespace != namespace:
                    continue  # a deeper namespace: copied in its own turn
                if await target.aget(namespace, item.key) is not None:
                    counts.memories_already_there += 1
                    continue
                await target.aput(namespace, item.key, item.value)
                counts.memories_copied += 1


async def copy_storage(source: StorageBackend, target: StorageBackend, counts: CopyCounts) -> None:
    """Everything of `source` into `target`: conversations, their links and ratings, and
    memories (each as its function below says); both must have every part open."""
    saver, links, ratings, store = _parts(source)
    target_saver, target_links, target_ratings, target_store = _parts(target)
    await copy_threads(saver, target_saver, counts)
    await copy_links(links, target_links, counts)
    await copy_ratings(ratings, target_ratings, counts)
    await copy_memories(store, target_store, counts)


def _parts(
    storage: StorageBackend,
) -> tuple[BaseCheckpointSaver, ConversationLinks, AnswerRatings, BaseStore]:
    saver, links, ratings, store = storage.saver, storage.links, storage.ratings, storage.store
    if saver is None or links is None or ratings is None or store is None:
        raise ValueError("a storage copy needs every part of both storages open")
    return saver, links, ratings, store


async def copy_links(
    source: ConversationLinks, target: ConversationLinks, counts: CopyCounts
) -> None:
    """Every conversation link (which conversation continues which thread) of `source` into
    `target`'s table, unless that conversation has a link there already."""
    rows = await source.read(lambda table: table.all_rows())

    def add(table: LinkTable) -> int:
        added = 0
        for agent, party, conversation, thread, last_used in rows:
            if table.thread_of(agent, party, conversation) is None:
                table.put(agent, party, conversation, thread, last_used)
                added += 1
        return added

    added = await target.write(add)
    counts.links_copied += added
    counts.links_already_there += len(rows) - added


async def copy_ratings(source: AnswerRatings, target: AnswerRatings, counts: CopyCounts) -> None:
    """Every answer rating of `source` into `target`, unless that answer is rated there
    already."""
    rows = await source.all_rows()
    added = await target.add_missing(rows)
    counts.ratings_copied += added
    counts.ratings_already_there += len(rows) - added
