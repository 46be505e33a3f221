"""Agent graphs. The assistant: model node ⇄ tools node, until the model answers."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Literal

from langchain_core.messages import AIMessage, AIMessageChunk, SystemMessage
from langchain_core.messages.tool import InvalidToolCall, ToolCall, invalid_tool_call
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from .confirmation import INTERRUPT_KIND, calls_needing_confirmation, is_affirmative
from .events import MessageStarted, TextDelta, ToolCallsRequested
from .history import compact_history, summary_section
from .model import classify_error, is_retryable, redacted_error, retry_delay
from .state import AgentState, TurnContext
from .tool_calls import requested_calls, run_tool_calls

_LOGGER = logging.getLogger(__name__)

HISTORY_NODE = "history"
MODEL_NODE = "model"
TOOLS_NODE = "tools"


def chunk_text(chunk: AIMessageChunk) -> str:
    """The text of a streamed chunk (providers send a string or a list of blocks)."""
    content = chunk.content
    if isinstance(content, str):
        return content
    return "".join(
        block.get("text", "")
        for block in content
        if isinstance(block, dict) and block.get("type") == "text"
    )


def strictly_parsed_tool_calls(
    merged: AIMessageChunk,
) -> tuple[list[ToolCall], list[InvalidToolCall]]:
    """Split streamed tool calls into those whose arguments are complete JSON, and the rest.

    langchain-core parses streamed arguments leniently (`parse_partial_json`), so a
    truncated `{"name": "Kitch` would become a call for "Kitch". A call must never run
    on arguments the model did not finish writing.
    """
    raw_args = {chunk.get("id"): chunk.get("args") or "" for chunk in merged.tool_call_chunks}
    valid: list[ToolCall] = []
    invalid: list[InvalidToolCall] = list(merged.invalid_tool_calls)
    for call in merged.tool_calls:
        raw = raw_args.get(call["id"], "")
        try:
            if raw.strip():
                json.loads(raw)
        except ValueError:
            invalid.append(
                invalid_tool_call(
                    name=call["name"], args=raw, id=call["id"], error="arguments are not JSON"
                )
            )
        else:
            valid.append(call)
    return valid, invalid


async def call_model(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Stream one model answer; every token goes out as it arrives."""
    context = runtime.context
    write = runtime.stream_writer
    write(MessageStarted())
    merged: AIMessageChunk | None = None
    system = "\n\n".join(
        part for part in (context.system_prompt, summary_section(state.get("summary", ""))) if part
    )
    prompt = [SystemMessage(system), *state["messages"]]
    for attempt in range(context.model_retries + 1):
        merged, streamed = None, False
        try:
            async for chunk in context.model.astream(prompt):
                if text := chunk_text(chunk):
                    streamed = True
                    write(TextDelta(text))
                    # Chunks already buffered would otherwise all be read before the
                    # consumer runs once: let the delta reach the ChatLog (and TTS) now.
                    await asyncio.sleep(0)
                merged = chunk if merged is None else merged + chunk
            break
        except Exception as err:  # noqa: BLE001  retried, or raised again redacted
            # Once words were spoken, a retry would repeat them: only failures before the
            # first word, of a kind that may pass, are tried again.
            if streamed or attempt == context.model_retries or not is_retryable(err):
                # Only a redacted copy leaves the node: LangGraph would store the original
                # (whose text may echo the API key) in threads.db.
                raise redacted_error(err) from None
            delay = retry_delay(err, attempt)
            _LOGGER.info("Model call failed (%s), retrying in %.1f s", classify_error(err), delay)
            await asyncio.sleep(delay)
    if merged is None:
        message = AIMessage(content="")
    else:
        valid, invalid = strictly_parsed_tool_calls(merged)
        message = AIMessage(
            content=merged.content,
            id=merged.id,
            tool_calls=valid,
            invalid_tool_calls=invalid,
            usage_metadata=merged.usage_metadata,
            response_metadata=merged.response_metadata,
        )
    if calls := requested_calls(message):
        write(ToolCallsRequested(calls))
    return {"messages": [message]}


async def call_tools(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Run the tool calls of the last assistant message, in parallel.

    Critical calls first need the user's yes: the graph pauses (`interrupt`) and this node
    runs again from the top when the next user message resumes it, with that message as
    the value `interrupt` returns.
    """
    message = state["messages"][-1]
    assert isinstance(message, AIMessage)
    tools = runtime.context.tools
    needed = await calls_needing_confirmation(requested_calls(message), tools)
    declined_ids: frozenset[str] = frozenset()
    reply = ""
    if needed:
        reply = interrupt({"kind": INTERRUPT_KIND, "actions": list(needed.values())})
        if not is_affirmative(reply):
            declined_ids = frozenset(needed)
    results = await run_tool_calls(
        message, tools, runtime.stream_writer, declined_ids=declined_ids, reply=str(reply)
    )
    return {"messages": results}


def route_after_model(state: AgentState) -> Literal["tools", "__end__"]:
    """Tools if the last answer asked for any, otherwise the turn is over."""
    messages = state["messages"]
    if messages and isinstance(messages[-1], AIMessage) and requested_calls(messages[-1]):
        return TOOLS_NODE
    return END


async def fit_history(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Before the turn's first model call: summarise old turns if the thread is too long."""
    context = runtime.context
    if context.chat_model is None:
        return {}
    return await compact_history(context.chat_model, dict(state), context.history_budget)


def build_assistant_graph(checkpointer: BaseCheckpointSaver) -> CompiledStateGraph:
    """The ReAct tool loop, compiled once per runtime (never per turn)."""
    graph = StateGraph(AgentState, context_schema=TurnContext)
    graph.add_node(HISTORY_NODE, fit_history)
    graph.add_node(MODEL_NODE, call_model)
    graph.add_node(TOOLS_NODE, call_tools)
    graph.add_edge(START, HISTORY_NODE)
    graph.add_edge(HISTORY_NODE, MODEL_NODE)
    graph.add_conditional_edges(MODEL_NODE, route_after_model, [TOOLS_NODE, END])
    graph.add_edge(TOOLS_NODE, MODEL_NODE)
    return graph.compile(checkpointer=checkpointer)


def recursion_limit(max_tool_rounds: int) -> int:
    """Graph steps for the history step, `max_tool_rounds` tool rounds and the answer."""
    return 2 * max_tool_rounds + 2
