"""Running a turn: its hooks, the thread's lock, the graph run (a new request, or the
answer to a pending confirmation), undoing what a failed run added, the move to memory
when the conversations file fails, and ending running turns when the runtime closes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, replace
import logging
import time
from typing import Any
import uuid

from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Command, Interrupt

from ..errors import ModelError, TurnError
from ..events import AgentEvent, ConfirmationRequested, MessageStarted, TextDelta
from ..graph import (
    MODEL_NODE,
    NOTE_ID_PREFIX,
    TurnContext,
    is_note,
    last_question_index,
    recursion_limit,
)
from ..guard import Decision, clean_text, decide
from ..hooks import TurnHooks, TurnRecorder
from ..memory import MemoryPresence, MemoryScope
from ..models import (
    AnswerLimitExceeded,
    ModelAccess,
    ModelCache,
    answer_deadline,
    bounded_settings,
    to_model_error,
    window_of,
)
from .graph_run import confirmation_pause, run_graph
from .housekeeping import Housekeeping
from .knowledge_library import KnowledgeLibrary
from .settings import AgentSettings
from .thread_directory import ThreadDirectory
from .turn import Turn
from .turn_setup import fit_turn, guarded_request, history_budget, prompt_and_tools

_LOGGER = logging.getLogger(__name__)

# Seconds running turns get to finish when the runtime closes, before they are cancelled.
CLOSE_GRACE = 5.0

# `undo_from` of a turn that resumed a paused exchange.
_RESUMED = "resumed"


class _StorageFailure(Exception):
    """The conversations file failed during a turn."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True)
class _PreparedTurn:
    """A turn ready for its graph: what it sends, and the events it reports first."""

    config: dict[str, Any]
    context: TurnContext
    request: list[BaseMessage]
    flagged: Sequence[AgentEvent]


class TurnRunner:
    """Runs turns on the entry's threads, one at a time per thread."""

    def __init__(
        self,
        access: ModelAccess,
        models: ModelCache,
        store: BaseStore | None,
        threads: ThreadDirectory,
        library: KnowledgeLibrary,
        housekeeping: Housekeeping,
    ) -> None:
        self._access = access
        self._models = models
        self._store = store
        self._threads = threads
        self._library = library
        self._housekeeping = housekeeping
        # Observers of every turn (see hooks.py), read at each turn's start.
        self.hooks: list[TurnHooks] = []
        # Turns running now (their tasks, and a future set when each turn is over), and
        # whether the runtime is closing (see aclose).
        self._running: dict[asyncio.Task[Any], asyncio.Future[None]] = {}
        self._closing = False

    async def run(self, agent: AgentSettings, turn: Turn) -> AsyncIterator[AgentEvent]:
        """Run one turn of `agent`, yielding events as they happen, and tell the hooks
        about it.

        `on_turn_start` and `on_turn_end` fire exactly once per turn, `on_error` once
        when it fails (TurnError) before `on_turn_end`; a failing hook is only logged.
        """
        recorder = TurnRecorder((*self.hooks, *turn.hooks), turn.thread_id, turn.text)
        await recorder.start(self._access.model)
        error: str | None = "cancelled"
        answer: list[str] = []
        paused = False
        # The thread's state at the end of the turn (set by run_graph).
        outcome: dict[str, Any] = {}
        # Whose memories the turn reads and writes: the requester's and the household's.
        memory = (
            MemoryScope.for_user(turn.requester.user_id, turn.person_id) if agent.memory else None
        )
        try:
            # Closed explicitly when our consumer stops early, so the thread's lock and
            # the graph's stream are released at once, not whenever it is collected.
            async with aclosing(self._run(agent, turn, memory, outcome)) as events:
                async for event in events:
                    await recorder.see(event)
                    if isinstance(event, TextDelta):
                        answer.append(event.text)
                    elif isinstance(event, ConfirmationRequested):
                        paused = True
                    yield event
            error = None
            if not paused:
                self._housekeeping.learn_later(agent, memory, turn.text, "".join(answer))
                self._housekeeping.summarise_later(
                    agent, turn.thread_id, history_budget(agent, outcome), outcome.get("values")
                )
        except TurnError as err:
            error = err.kind
            await recorder.fail(err.kind, err.detail)
            raise
        except Exception as err:
            model_error = to_model_error(err, self._access)
            error = model_error.kind.value
            await recorder.fail(error, model_error.detail)
            raise
        finally:
            await recorder.end(error)

    async def _run(
        self,
        agent: AgentSettings,
        turn: Turn,
        memory: MemoryScope | None,
        outcome: dict[str, Any],
    ) -> AsyncIterator[AgentEvent]:
        """Run one turn, yielding events as they happen; `memory`: whose memories it uses.

        Turns on one thread run one at a time. If the thread waits for a confirmation,
        this turn's text is the answer and resumes it. A turn that fails is removed from
        the thread again, so the next turn starts from a consistent history; the failure
        is raised as TurnError.

        If the conversations file fails (locked, full, read-only, corrupted), the runtime
        goes on with conversations in memory, and the turn is run again there when
        nothing of it had happened yet; `on_storage_error` is told once.
        """
        async with self._threads.lock(turn.thread_id), self._tracked():
            # Whether the thread waits for a confirmation is read (conversations file)
            # while the turn is prepared (its memories: the memory file): two round trips
            # at once, not one after the other. Under the lock: a turn running on this
            # thread is over before its pause is read.
            prepared, pending = await asyncio.gather(
                self._prepare(agent, turn, memory, outcome),
                self._threads.pending_interrupts(turn.thread_id),
            )
            for event in prepared.flagged:
                yield event
            run = (agent, turn, prepared.config, prepared.context, prepared.request, outcome)
            await self._threads.touch(turn.thread_id)
            started = False
            try:
                async for event in self._turn_events(*run, pending=pending):
                    started = True
                    yield event
                return
            except _StorageFailure as failure:
                if started or self._threads.storage_failed:
                    raise TurnError("storage", str(failure.error)) from None
                self._threads.continue_in_memory(failure.error)
            async for event in self._turn_events(*run):
                yield event

    async def _prepare(
        self,
        agent: AgentSettings,
        turn: Turn,
        memory: MemoryScope | None,
        outcome: dict[str, Any],
    ) -> _PreparedTurn:
        """The turn's request, prompt, tools and window plan, before it takes its lock."""
        config: dict[str, Any] = {
            "configurable": {"thread_id": turn.thread_id},
            "recursion_limit": recursion_limit(agent.max_tool_rounds),
        }
        presence = (
            MemoryPresence(self._store, memory)
            if self._store is not None and memory is not None
            else None
        )
        prompt, tools, knowledge, flagged = await prompt_and_tools(
            agent, turn, memory, presence, self._store, self._library
        )
        request, request_flags = guarded_request(turn)
        if note := prompt.note():
            # Right before the request, stored with it: the next turn reads it as history
            # (graph/prompts.py: a follow-up's beginning stays what this request sent).
            request.insert(len(request) - 1, HumanMessage(clean_text(note), id=NOTE_ID_PREFIX))
        # The window is bounded by what the model holds (Ollama's /api/show, cached).
        settings = await bounded_settings(self._access, agent.settings)
        window_plan = None
        if (window := window_of(self._access, settings)) is not None:
            fit = fit_turn(agent, turn, window, settings, prompt, tools, request)
            prompt, tools, window_plan = fit.prompt, fit.tools, fit.plan
            outcome["history_room"] = fit.history_room
        roles = self._models.roles(self._access, agent.roles, settings)
        context = replace(
            TurnContext.create(
                prompt,
                roles.main.model,
                tools,
                agent.history_budget,
                agent.model_retries,
                knowledge,
                roles=roles,
            ),
            answer_deadline=answer_deadline(agent.settings.request_timeout),
        )
        context = replace(
            context,
            effects=turn.effects,
            requester=turn.requester,
            now=turn.now or time.time(),
            safety_check=agent.safety_check,
            window=window_plan,
            memories_exist=presence,
        )
        return _PreparedTurn(config, context, request, (*turn.flagged, *flagged, *request_flags))

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
        """End every running turn cleanly: `grace` seconds to finish, then cancelled
        (removing what they had added to their thread; their users hear that the agent
        stopped)."""
        self._closing = True
        running = dict(self._running)
        if running:
            _, late = await asyncio.wait(running.values(), timeout=grace)
            for task, over in running.items():
                if over in late:
                    task.cancel()
            if late:
                await asyncio.wait(late, timeout=grace)

    async def _turn_events(
        self,
        agent: AgentSettings,
        turn: Turn,
        config: dict[str, Any],
        context: TurnContext,
        request: list[BaseMessage],
        outcome: dict[str, Any],
        *,
        pending: list[Interrupt] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """The turn on the current graph; storage errors come out as _StorageFailure.

        A thread that waits for a confirmation is answered first: a clear yes from the
        requester resumes it (the held effects run, the model reports); anything else
        drops the held effects, and the message is then handled as a new request:
        `request`, what the turn adds to the thread (see guarded_request). `pending`: what
        the thread waits on, if already read under the thread's lock (else read here).
        """
        if pending is None:
            pending = await self._threads.pending_interrupts(turn.thread_id)
        pause = confirmation_pause(pending)
        if pause is not None:
            decision = decide(pause, context.requester, turn.text, context.now)
            if decision.confirmed and not agent.kind.uses_tools:
                # The agent became a kind without tools since it asked: it no longer
                # acts on the home, so what it asked about does not run either.
                decision = Decision(False, "declined")
            async for event in self._resume(agent, config, context, decision, outcome):
                yield event
            if decision.confirmed:
                return
            _LOGGER.info("A pending confirmation was not given (%s)", decision.reason)
        for message in request:
            message.id = f"{NOTE_ID_PREFIX if is_note(message) else ''}{uuid.uuid4()}"
        async for event in self._run_and_undo(
            agent,
            self._threads.graphs[agent.kind],
            {"messages": request},
            config,
            context,
            request[0].id,
            outcome=outcome,
        ):
            yield event

    def _resume(
        self,
        agent: AgentSettings,
        config: dict[str, Any],
        context: TurnContext,
        decision: Decision,
        outcome: dict[str, Any],
    ) -> AsyncIterator[AgentEvent]:
        """Answer the pause. Only the assistant's graph pauses; an agent that has become
        another kind since then finishes the pause there (its tools are gone)."""
        answer = Command(resume={"confirmed": decision.confirmed, "reason": decision.reason})
        # A failure now also undoes the paused exchange (its request and the assistant's
        # tool calls), which would otherwise end without results.
        return self._run_and_undo(
            agent,
            self._threads.graph,
            answer,
            config,
            context,
            _RESUMED,
            expect_answer=decision.confirmed,
            outcome=outcome,
        )

    async def _run_and_undo(
        self,
        agent: AgentSettings,
        graph: CompiledStateGraph,
        graph_input: Any,
        config: dict[str, Any],
        context: TurnContext,
        undo_from: str,
        *,
        expect_answer: bool = True,
        outcome: dict[str, Any] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """One graph run; what it added is removed again if it fails.

        `undo_from` is the id of the run's first new message, or _RESUMED (from the
        paused exchange's request).
        """
        try:
            answered = False
            async for payload in run_graph(graph, graph_input, config, context, outcome):
                if isinstance(payload, MessageStarted):
                    answered = False
                elif isinstance(payload, TextDelta) and payload.text.strip():
                    answered = True
                elif isinstance(payload, ConfirmationRequested):
                    answered = True
                    yield MessageStarted()
                yield payload
            if expect_answer and not answered:
                # Nothing to say is no answer: a voice user would hear silence.
                raise TurnError("empty_answer", "the model returned no text")
        except BaseException as err:
            await self._undo(config, undo_from)
            replacement = self._turn_error(agent, err)
            if replacement is None:
                raise
            # The conversations file's own error stays attached: it is what the log shows.
            raise replacement from (err if isinstance(replacement, _StorageFailure) else None)

    def _turn_error(self, agent: AgentSettings, err: BaseException) -> Exception | None:
        """What a failed graph run raises instead of `err`: a TurnError that says why, or
        _StorageFailure for the conversations file; None keeps `err` (a TurnError already,
        or not an Exception)."""
        if isinstance(err, asyncio.CancelledError) and self._closing:
            # aclose cancelled this turn: the user is told instead of cut off.
            if (task := asyncio.current_task()) is not None:
                task.uncancel()
            return TurnError("unloading", "stopped while unloading")
        if isinstance(err, self._threads.storage_errors):
            return _StorageFailure(err)
        if isinstance(err, AnswerLimitExceeded):
            return TurnError(err.kind, err.detail)
        if isinstance(err, GraphRecursionError):
            return TurnError("tool_rounds", f"more than {agent.max_tool_rounds} tool rounds")
        if isinstance(err, Exception) and not isinstance(err, TurnError):
            error: ModelError = to_model_error(err, self._access)
            return TurnError(error.kind.value, error.detail)
        return None

    async def _undo(self, config: dict[str, Any], undo_from: str) -> None:
        """Remove what a failed turn added, so the thread holds only whole turns.

        New messages are appended, so the turn's are its first one and all after it; a
        resumed exchange's begin at its request, the person's last message.
        """
        thread_only = {"configurable": config["configurable"]}
        try:
            messages = await self._threads.messages(config["configurable"]["thread_id"])
            if undo_from == _RESUMED:
                start = last_question_index(messages)
            else:
                ids = [message.id for message in messages]
                start = ids.index(undo_from) if undo_from in ids else len(messages)
            added = messages[start:]
            if added:
                await self._threads.graph.aupdate_state(
                    thread_only,
                    {"messages": [RemoveMessage(id=m.id) for m in added]},
                    as_node=MODEL_NODE,
                )
        except Exception:
            _LOGGER.exception("Could not remove a failed turn from its thread")
