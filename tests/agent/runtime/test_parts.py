"""The runtime's parts, each on its own: the thread directory, housekeeping, the
knowledge library and the turn runner's undo (no model server needed)."""

from __future__ import annotations

import asyncio
from pathlib import Path
import sqlite3
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from custom_components.langgraph_conversation.agent.graph import MODEL_NODE, NOTE_ID_PREFIX
from custom_components.langgraph_conversation.agent.knowledge import KnowledgeSource
from custom_components.langgraph_conversation.agent.memory import (
    MemoryLinkStore,
    Party,
    ThreadRequest,
)
from custom_components.langgraph_conversation.agent.memory.threads import thread_id_for
from custom_components.langgraph_conversation.agent.models import ModelAccess, ModelCache
from custom_components.langgraph_conversation.agent.runtime.housekeeping import Housekeeping
from custom_components.langgraph_conversation.agent.runtime.knowledge_library import (
    KnowledgeLibrary,
)
from custom_components.langgraph_conversation.agent.runtime.thread_directory import (
    MEMORY_THREADS,
    ThreadDirectory,
)
from custom_components.langgraph_conversation.agent.runtime.turn_runner import (
    _RESUMED,
    TurnRunner,
)

ACCESS = ModelAccess("openai/gpt-test", "key", "http://127.0.0.1:9")


async def _write(threads: ThreadDirectory, thread_id: str, messages: list[Any]) -> None:
    config = {"configurable": {"thread_id": thread_id}}
    await threads.graph.aupdate_state(config, {"messages": messages}, as_node=MODEL_NODE)


async def test_the_directory_keeps_the_most_recent_threads() -> None:
    """Beyond the bound the least recently used thread goes, with its links."""
    threads = ThreadDirectory(InMemorySaver(), max_threads=2)
    for thread_id in ("a", "b"):
        await _write(threads, thread_id, [HumanMessage("hi", id=f"{thread_id}1")])
        await threads.touch(thread_id)
    await threads.touch("a")
    await threads.touch("c")
    assert await threads.messages("b") == []
    assert [m.id for m in await threads.messages("a")] == ["a1"]


class _FailingLinks:
    """A link store whose file is broken."""

    async def read(self, work: Any) -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    async def write(self, work: Any) -> Any:
        raise sqlite3.OperationalError("disk I/O error")


async def test_a_failing_file_moves_the_directory_to_memory() -> None:
    """A storage error while choosing a thread: conversations go on in memory, bounded,
    and whoever listens is told once."""
    told: list[Exception] = []
    threads = ThreadDirectory(InMemorySaver(), links=_FailingLinks(), on_storage_error=told.append)
    choice = await threads.choose(ThreadRequest("agent", "conversation", Party()), 0.0)
    assert choice.thread_id
    assert threads.storage_failed
    assert [type(error) for error in told] == [sqlite3.OperationalError]
    assert threads._max_threads == MEMORY_THREADS
    party = Party()
    assert await threads.find("agent", "conversation", party) == choice.thread_id


async def test_housekeeping_waits_then_cancels() -> None:
    """Background work gets its time at close; what is still running then is cancelled."""
    threads = ThreadDirectory(InMemorySaver())
    housekeeping = Housekeeping(ACCESS, ModelCache(), threads, None)
    finished: list[str] = []

    async def work(name: str, seconds: float) -> None:
        await asyncio.sleep(seconds)
        finished.append(name)

    quick = housekeeping.in_background(work("quick", 0), "quick")
    slow = housekeeping.in_background(work("slow", 60), "slow")
    await housekeeping.wait(timeout=0.5)
    assert finished == ["quick"]
    assert quick.done()
    assert slow.cancelled()


async def test_the_library_without_a_store_has_no_indexes(tmp_path: Path) -> None:
    """No memory store, no documents: nothing to index or read again."""
    threads = ThreadDirectory(InMemorySaver())
    library = KnowledgeLibrary(None, Housekeeping(ACCESS, ModelCache(), threads, None))
    source = KnowledgeSource(tmp_path, "agent")
    assert library.index(source) is None
    assert await library.reindex(source) is None


async def test_the_library_keeps_one_index_per_agent(tmp_path: Path) -> None:
    """The same agent gets the same index; a renamed folder gets a new one."""
    threads = ThreadDirectory(InMemorySaver())
    housekeeping = Housekeeping(ACCESS, ModelCache(), threads, None)
    library = KnowledgeLibrary(InMemoryStore(), housekeeping)
    first = library.index(KnowledgeSource(tmp_path, "agent"))
    assert library.index(KnowledgeSource(tmp_path, "agent")) is first
    renamed = library.index(KnowledgeSource(tmp_path / "other", "agent"))
    assert renamed is not None
    assert renamed is not first
    await library.aclose()
    await housekeeping.wait()


async def test_a_failed_resumed_exchange_is_undone_from_its_question() -> None:
    """The runtime's side of the one rule (prompts.last_question_index): a resumed
    exchange that fails is removed from the person's last message on; the turns before
    it, and the note that came with that request, stay."""
    threads = ThreadDirectory(InMemorySaver())
    housekeeping = Housekeeping(ACCESS, ModelCache(), threads, None)
    runner = TurnRunner(
        ACCESS, ModelCache(), None, threads, KnowledgeLibrary(None, housekeeping), housekeeping
    )
    earlier = [HumanMessage("Hi", id="q1"), AIMessage("Hello", id="a1")]
    note = HumanMessage("Current time is 08:00.", id=f"{NOTE_ID_PREFIX}n2")
    exchange = [
        HumanMessage("Unlock the door", id="q2"),
        AIMessage("", id="a2", tool_calls=[{"name": "unlock", "args": {}, "id": "call"}]),
    ]
    await _write(threads, "t", [*earlier, note, *exchange])
    await runner._undo({"configurable": {"thread_id": "t"}}, _RESUMED)
    assert [m.id for m in await threads.messages("t")] == ["q1", "a1", note.id]


class _SlowLinks:
    """Links in memory whose writes wait until `open` is set (a slow disk)."""

    def __init__(self) -> None:
        self.inner = MemoryLinkStore()
        self.open = asyncio.Event()
        self.writes = 0

    async def read(self, work: Any) -> Any:
        return await self.inner.read(work)

    async def write(self, work: Any) -> Any:
        self.writes += 1
        await self.open.wait()
        return await self.inner.write(work)


_ISSUED = "01JBNEWCONVERSATION0000000"


async def test_a_new_conversation_goes_on_while_its_link_is_written() -> None:
    """A conversation Home Assistant issued for this turn has its thread at once; the
    link is written meanwhile, and whoever looks the conversation up (its next turn, a
    service) waits for that write."""
    links = _SlowLinks()
    threads = ThreadDirectory(InMemorySaver(), links=links)
    party = Party(user="a")
    request = ThreadRequest("agent", _ISSUED, party, issued_now=True)

    choice = await asyncio.wait_for(threads.choose(request, 0.0), 60)

    assert choice.thread_id == thread_id_for("agent", _ISSUED, party)
    assert links.writes == 1
    found = asyncio.ensure_future(threads.find("agent", _ISSUED, party))
    await asyncio.sleep(0.1)
    assert not found.done()
    links.open.set()
    assert await asyncio.wait_for(found, 60) == choice.thread_id
    # The next turn of that conversation (no longer issued now) continues the thread.
    again = await threads.choose(ThreadRequest("agent", _ISSUED, party), 1.0)
    assert again.thread_id == choice.thread_id


async def test_a_link_failing_behind_its_turn_moves_the_directory_to_memory() -> None:
    """The file fails the link of a new conversation after its turn went on: the
    directory continues in memory, where the link is, and says so once."""
    told: list[Exception] = []
    threads = ThreadDirectory(InMemorySaver(), links=_FailingLinks(), on_storage_error=told.append)
    party = Party(user="a")
    request = ThreadRequest("agent", _ISSUED, party, issued_now=True)

    choice = await threads.choose(request, 0.0)
    await threads.links_settled()

    assert threads.storage_failed
    assert [type(error) for error in told] == [sqlite3.OperationalError]
    assert await threads.find("agent", _ISSUED, party) == choice.thread_id
