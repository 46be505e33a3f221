"""One run of a compiled graph as a stream of events, and the confirmations it pauses on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace
from typing import Any

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Interrupt

from ..events import AgentEvent, ConfirmationRequested
from ..graph import TurnContext
from ..guard import INTERRUPT_KIND

# The end of a graph run in its event queue.
_DONE = object()


async def run_graph(
    graph: CompiledStateGraph,
    graph_input: Any,
    config: dict[str, Any],
    context: TurnContext,
    outcome: dict[str, Any] | None = None,
) -> AsyncIterator[AgentEvent]:
    """Run the graph, yielding the events its nodes emit, as they emit them.

    The nodes put events straight into a queue on the loop. LangGraph's "custom" stream
    would carry them too, but hands each one over with call_soon_threadsafe (a wake-up of
    the loop through its self-pipe) and through its own stream machinery: the cost of a
    whole step per answer. A pause for a confirmation ends the run with the interrupt in
    its result. The thread's values at the end go into `outcome["values"]`.
    """
    events: asyncio.Queue[Any] = asyncio.Queue()
    run = asyncio.ensure_future(
        # The run is saved once, as it ends (an answer, a pause for a confirmation, a
        # failure or a cancellation): a turn is recorded whole or not at all. Saving every
        # step cost two to four more round trips to the file per turn; a failing file no
        # longer stops a turn (storage/healing keeps the run in memory), so they bought
        # nothing but a half turn after a crash. The saver takes the checkpoint without
        # waiting for the file's write (storage/healing/saver.py): the answer is out while
        # it is written, and every later read of the thread waits for it.
        graph.ainvoke(
            graph_input,
            config,
            context=replace(context, emit=events.put_nowait),
            durability="exit",
        )
    )
    run.add_done_callback(lambda _: events.put_nowait(_DONE))
    try:
        while (event := await events.get()) is not _DONE:
            yield event
        result = run.result()
        if outcome is not None:
            outcome["values"] = result
    finally:
        if not run.done():
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
    if actions := confirmation_actions(result.get("__interrupt__", ())):
        yield ConfirmationRequested(actions)


def confirmation_pause(interrupts: Iterable[Interrupt]) -> dict[str, Any] | None:
    """The thread's pending confirmation (confirmation.pause_value), if it waits for one."""
    for pending in interrupts:
        value = pending.value
        if isinstance(value, dict) and value.get("kind") == INTERRUPT_KIND:
            return value
    return None


def confirmation_actions(interrupts: Iterable[Interrupt]) -> tuple[str, ...]:
    """The actions of confirmation interrupts (other interrupts are not ours)."""
    actions: list[str] = []
    for pending in interrupts:
        value = pending.value
        if isinstance(value, dict) and value.get("kind") == INTERRUPT_KIND:
            actions.extend(str(action) for action in value.get("actions", []))
    return tuple(actions)
