"""The runtime: compiled graphs, cached models, per-thread locks, run_turn → events."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
import logging
import sqlite3
from typing import Any
import weakref

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langchain_core.tools import BaseTool
from langchain_litellm import ChatLiteLLM
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.store.base import BaseStore
from langgraph.types import Command, Interrupt

from ..storage.threads import ThreadDirectory
from .confirmation import INTERRUPT_KIND
from .events import AgentEvent, ConfirmationRequested, MessageStarted, TextDelta
from .graph import MODEL_NODE, build_assistant_graph, recursion_limit
from .memory import MEMORY_INSTRUCTIONS, MemoryScope, memory_block, memory_tools, recall
from .model import (
    ModelAccess,
    ModelError,
    ModelSettings,
    build_chat_model,
    to_model_error,
)
from .state import TurnContext

_LOGGER = logging.getLogger(__name__)


def memory_checkpointer() -> InMemorySaver:
    """Threads kept in memory only: the fallback when threads.db is unavailable.

    Imported here rather than in the integration's __init__ so that LangGraph is first
    imported after this package has set LANGGRAPH_STRICT_MSGPACK (read once at import).
    """
    return InMemorySaver()


# Conversations kept when they fell back to memory (least recently used go first).
_MEMORY_THREADS = 200
# Seconds running turns get to finish when the runtime closes, before they are cancelled.
CLOSE_GRACE = 5.0


class _StorageFailure(Exception):
    """The conversations file failed during a turn."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class TurnError(Exception):
    """A turn could not finish. `kind` is a ModelErrorKind value or "tool_rounds"."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Turn:
    """One user message to one thread, with everything the graph needs for it."""

    thread_id: str
    text: str
    system_prompt: str
    settings: ModelSettings
    tools: list[BaseTool]
    max_tool_rounds: int
    # What happened in the conversation since this agent's last turn without it
    # (commands another agent handled, announcements), as (role, text) pairs.
    earlier: tuple[tuple[str, str], ...] = ()
    # Whose memories this turn may use; None turns memory off for the turn.
    memory: MemoryScope | None = None
    memory_recall_limit: int = 5
    # Token budget of the thread before older turns are summarised; None keeps all.
    history_budget: int | None = None
    # Extra attempts of a model call that failed before its first word.
    model_retries: int = 0


class AgentRuntime:
    """Owns what lives as long as a config entry: graph, models, checkpointer."""

    def __init__(
        self,
        access: ModelAccess,
        checkpointer: BaseCheckpointSaver,
        *,
        store: BaseStore | None = None,
        max_threads: int | None = None,
    ) -> None:
        """`max_threads` bounds how many threads are kept (least recently used go first).

        The in-memory checkpointer would otherwise keep every voice conversation of a
        Home Assistant run forever.
        """
        self.access = access
        self.checkpointer = checkpointer
        self.store = store
        self._graph = build_assistant_graph(checkpointer)
        self._models: dict[ModelSettings, ChatLiteLLM] = {}
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._max_threads = max_threads
        self._recent_threads: OrderedDict[str, None] = OrderedDict()
        self.threads = ThreadDirectory()
        # Set when the conversations file failed and conversations went to memory.
        self.storage_failed = False
        # Told once when that happens (the integration raises a repair issue).
        self.on_storage_error: Callable[[Exception], None] | None = None
        # Turns running now (their tasks, and a future set when each turn is over), and
        # whether the runtime is closing (see aclose).
        self._running: dict[asyncio.Task[Any], asyncio.Future[None]] = {}
        self._closing = False

    def chat_model(self, settings: ModelSettings) -> ChatLiteLLM:
        """One client per distinct settings, reused by every turn."""
        model = self._models.get(settings)
        if model is None:
            model = self._models[settings] = build_chat_model(self.access, settings)
        return model

    def _lock(self, thread_id: str) -> asyncio.Lock:
        lock = self._locks.get(thread_id)
        if lock is None:
            lock = self._locks[thread_id] = asyncio.Lock()
        return lock

    async def _touch_thread(self, thread_id: str) -> None:
        """Mark a thread as just used; drop the least recently used beyond the bound."""
        self._recent_threads[thread_id] = None
        self._recent_threads.move_to_end(thread_id)
        if self._max_threads is None:
            return
        while len(self._recent_threads) > self._max_threads:
            oldest, _ = self._recent_threads.popitem(last=False)
            await self.checkpointer.adelete_thread(oldest)

    async def messages(self, thread_id: str) -> list[Any]:
        """The messages a thread holds now (the model's view of the conversation)."""
        state = await self._graph.aget_state({"configurable": {"thread_id": thread_id}})
        return list(state.values.get("messages", []))

    async def pending_confirmation(self, thread_id: str) -> tuple[str, ...]:
        """The critical actions a thread is waiting to have confirmed, if any."""
        state = await self._graph.aget_state({"configurable": {"thread_id": thread_id}})
        return _confirmation_actions(
            interrupt for task in state.tasks for interrupt in task.interrupts
        )

    async def run_turn(self, turn: Turn) -> AsyncIterator[AgentEvent]:
        """Run one turn, yielding events as they happen.

        Turns on one thread run one at a time. If the thread waits for a confirmation,
        this turn's text is the answer and resumes it. A turn that fails is removed from
        the thread again, so the next turn starts from a consistent history; the failure
        is raised as TurnError.

        If the conversations file fails (locked, full, read-only, corrupted), the runtime
        goes on with conversations in memory, and the turn is run again there when
        nothing of it had happened yet; `on_storage_error` is told once.
        """
        config: dict[str, Any] = {
            "configurable": {"thread_id": turn.thread_id},
            "recursion_limit": recursion_limit(turn.max_tool_rounds),
        }
        system_prompt, tools = await self._with_memory(turn)
        context = TurnContext.create(
            system_prompt,
            self.chat_model(turn.settings),
            tools,
            turn.history_budget,
            turn.model_retries,
        )
        async with self._lock(turn.thread_id), self._tracked():
            await self._touch_thread(turn.thread_id)
            started = False
            try:
                async for event in self._turn_events(turn, config, context):
                    started = True
                    yield event
                return
            except _StorageFailure as failure:
                if started or self.storage_failed:
                    raise TurnError("storage", str(failure.error)) from None
                self._continue_in_memory(failure.error)
            async for event in self._turn_events(turn, config, context):
                yield event

    @asynccontextmanager
    async def _tracked(self) -> AsyncIterator[None]:
        """Register the running turn so aclose can wait for it (or cancel it)."""
        task = asyncio.current_task()
        over: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if task is not None:
            self._running[task] = over
        try:
            yield
        finally:
            if task is not None:
                self._running.pop(task, None)
            over.set_result(None)

    async def aclose(self, grace: float = CLOSE_GRACE) -> None:
        """Before the storage closes (unload, stop): end every running turn cleanly.

        Turns get `grace` seconds to finish; the rest are cancelled and remove what they
        had added to their thread while the file is still open (otherwise the thread
        would keep a request without an answer). Their users hear that the agent stopped.
        """
        self._closing = True
        running = dict(self._running)
        if not running:
            return
        _, late = await asyncio.wait(running.values(), timeout=grace)
        for task, over in running.items():
            if over in late:
                task.cancel()
        if late:
            await asyncio.wait(late, timeout=grace)

    def _continue_in_memory(self, error: Exception) -> None:
        """Conversations from now on live in memory; what the file holds stays there."""
        _LOGGER.error("The conversations file failed, continuing in memory: %s", error)
        self.storage_failed = True
        self.checkpointer = memory_checkpointer()
        self._graph = build_assistant_graph(self.checkpointer)
        self._max_threads = self._max_threads or _MEMORY_THREADS
        if self.on_storage_error is not None:
            self.on_storage_error(error)

    async def _turn_events(
        self, turn: Turn, config: dict[str, Any], context: TurnContext
    ) -> AsyncIterator[AgentEvent]:
        """The turn on the current graph; storage errors come out as _StorageFailure."""
        # Ids the thread held before this turn; None until they were read (nothing to undo).
        before: set[str | None] | None = None
        try:
            messages = await self.messages(turn.thread_id)
            graph_input: Any
            if await self.pending_confirmation(turn.thread_id):
                graph_input = Command(resume=turn.text)
                # A failure now also undoes the paused exchange (its request and the
                # assistant's tool calls), which would otherwise end without results.
                messages = messages[: _last_human_index(messages)]
            else:
                graph_input = {"messages": [*_folded(turn.earlier), HumanMessage(turn.text)]}
            before = {message.id for message in messages}
            answered = False
            # Each step is saved before the next runs: a failing file stops the turn
            # before anything it could not record happens.
            async for mode, payload in self._graph.astream(
                graph_input,
                config,
                context=context,
                stream_mode=["custom", "updates"],
                durability="sync",
            ):
                if mode == "updates":
                    if actions := _confirmation_actions(payload.get("__interrupt__", ())):
                        answered = True
                        yield MessageStarted()
                        yield ConfirmationRequested(actions)
                    continue
                if isinstance(payload, MessageStarted):
                    answered = False
                elif isinstance(payload, TextDelta) and payload.text.strip():
                    answered = True
                yield payload
            if not answered:
                # Nothing to say is no answer: a voice user would hear silence.
                raise TurnError("empty_answer", "the model returned no text")
        except BaseException as err:
            if before is not None:
                await self._forget_turn(config, before)
            if isinstance(err, asyncio.CancelledError) and self._closing:
                # aclose cancelled this turn: the user is told instead of cut off.
                if (task := asyncio.current_task()) is not None:
                    task.uncancel()
                raise TurnError("unloading", "stopped while unloading") from None
            if isinstance(err, sqlite3.Error):
                raise _StorageFailure(err) from err
            if isinstance(err, GraphRecursionError):
                raise TurnError(
                    "tool_rounds", f"more than {turn.max_tool_rounds} tool rounds"
                ) from None
            if isinstance(err, Exception) and not isinstance(err, TurnError):
                error: ModelError = to_model_error(err, self.access)
                raise TurnError(error.kind.value, error.detail) from None
            raise

    async def _with_memory(self, turn: Turn) -> tuple[str, list[BaseTool]]:
        """The turn's prompt and tools, with recalled memories and memory tools if enabled.

        A memory store that fails must not cost the user their answer: the turn goes on
        without memories, and the failure is logged.
        """
        if self.store is None or turn.memory is None:
            return turn.system_prompt, turn.tools
        try:
            memories = await recall(self.store, turn.memory, turn.text, turn.memory_recall_limit)
        except Exception:
            _LOGGER.exception("Could not read memories; answering without them")
            return turn.system_prompt, turn.tools
        prompt = "\n\n".join(
            part
            for part in (turn.system_prompt, MEMORY_INSTRUCTIONS, memory_block(memories))
            if part
        )
        return prompt, [*turn.tools, *memory_tools(self.store, turn.memory)]

    async def _forget_turn(self, config: dict[str, Any], before: set[str | None]) -> None:
        """Remove what a failed turn added, so the thread holds only whole turns."""
        thread_only = {"configurable": config["configurable"]}
        try:
            added = [
                m
                for m in await self.messages(config["configurable"]["thread_id"])
                if m.id not in before
            ]
            if added:
                await self._graph.aupdate_state(
                    thread_only,
                    {"messages": [RemoveMessage(id=m.id) for m in added]},
                    as_node=MODEL_NODE,
                )
        except Exception:
            _LOGGER.exception("Could not remove a failed turn from its thread")


def _confirmation_actions(interrupts: Iterable[Interrupt]) -> tuple[str, ...]:
    """The actions of confirmation interrupts (other interrupts are not ours)."""
    actions: list[str] = []
    for pending in interrupts:
        value = pending.value
        if isinstance(value, dict) and value.get("kind") == INTERRUPT_KIND:
            actions.extend(str(action) for action in value.get("actions", []))
    return tuple(actions)


def _last_human_index(messages: list[Any]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return index
    return len(messages)


def _folded(earlier: tuple[tuple[str, str], ...]) -> list[HumanMessage | AIMessage]:
    """Messages for what others said in the conversation, so the model knows about it."""
    return [
        HumanMessage(text) if role == "user" else AIMessage(text)
        for role, text in earlier
        if text.strip()
    ]
