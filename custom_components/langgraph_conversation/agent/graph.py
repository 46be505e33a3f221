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
from .events import MessageStarted, ModelCallFinished, TextDelta, ToolCallsRequested
from .history import compact_history, summary_section
from .model import classify_error, is_retryable, retry_delay
from .roles import ModelRole, RoleModel, falls_back
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


async def _stream_answer(
    context: TurnContext, prompt: list[Any], write: Any
) -> tuple[AIMessageChunk | None, RoleModel | None]:
    """Stream the answer: the main model with its retries, then the fallback.

    Only failures before the first word are tried again, on the main model if they may
    pass (rate limit, 5xx, dropped connection), else on the fallback if one is set (also
    after a timeout). Once words were spoken, a retry would repeat them: never.
    """
    models = context.answering_models
    for index, (role_model, model) in enumerate(models):
        retries = context.model_retries if index == 0 else 0
        for attempt in range(retries + 1):
            merged: AIMessageChunk | None = None
            streamed = False
            try:
                async for chunk in model.astream(prompt):
                    if text := chunk_text(chunk):
                        streamed = True
                        write(TextDelta(text))
                        # Chunks already buffered would otherwise all be read before the
                        # consumer runs once: let the delta reach the ChatLog (and TTS) now.
                        await asyncio.sleep(0)
                    merged = chunk if merged is None else merged + chunk
            except Exception as err:
                if streamed:
                    raise
                if attempt < retries and is_retryable(err):
                    delay = retry_delay(err, attempt)
                    _LOGGER.info(
                        "Model call failed (%s), retrying in %.1f s", classify_error(err), delay
                    )
                    await asyncio.sleep(delay)
                    continue
                if index == len(models) - 1 or not falls_back(err):
                    raise
                next_model = models[index + 1][0]
                _LOGGER.warning(
                    "The main model failed (%s); the fallback model %s answers",
                    classify_error(err),
                    next_model.name if next_model else "",
                )
                break
            else:
                return merged, role_model
    raise AssertionError("unreachable: the last model's failure is raised")


def _model_call_finished(
    answered_by: RoleModel | None,
    merged: AIMessage | None,
    context: TurnContext,
    *,
    answer: bool = True,
) -> ModelCallFinished:
    """Which model answered, with the tokens the provider reported in the stream."""
    usage = merged.usage_metadata if merged is not None else None
    return ModelCallFinished(
        answer=answer,
        role=str(answered_by.role) if answered_by else ModelRole.MAIN,
        model=answered_by.name if answered_by else str(getattr(context.chat_model, "model", "")),
        input_tokens=usage["input_tokens"] if usage else 0,
        output_tokens=usage["output_tokens"] if usage else 0,
    )


async def call_model(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Stream one model answer; every token goes out as it arrives."""
    context = runtime.context
    write = runtime.stream_writer
    write(MessageStarted())
    system = "\n\n".join(
        part for part in (context.system_prompt, summary_section(state.get("summary", ""))) if part
    )
    prompt = [SystemMessage(system), *state["messages"]]
    merged, answered_by = await _stream_answer(context, prompt, write)
    write(_model_call_finished(answered_by, merged, context))
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
    model = context.housekeeping_model
    if model is None:
        return {}
    role = context.roles.fast if context.roles is not None else None

    def report(answer: AIMessage) -> None:
        runtime.stream_writer(_model_call_finished(role, answer, context, answer=False))

    return await compact_history(model, dict(state), context.history_budget, report)


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
