"""Agent graphs, one per agent kind, over one shared message state.

assistant  model ⇄ tools, until the model answers (the ReAct loop)
chatbot    model: one call, no tools, for models that cannot call tools
rag        retrieve → model: the documents are searched first (a follow-up is
           rewritten into a standalone search query), then the model answers from the
           passages found, without tools

Old turns are summarised after an answer, between turns (the runtime's job, see
history.py), never inside a graph: a summary must not delay the first word.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from enum import StrEnum
import json
import logging
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.ai import add_ai_message_chunks
from langchain_core.messages.tool import InvalidToolCall, ToolCall, invalid_tool_call
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from .confirmation import INTERRUPT_KIND, calls_needing_confirmation, is_affirmative
from .events import MessageStarted, ModelCallFinished, TextDelta, ToolCallsRequested
from .knowledge import Passage, knowledge_block
from .model import answer_stream, classify_error, is_retryable, redacted_error, retry_delay
from .roles import ModelRole, RoleModel, falls_back
from .state import AgentState, TurnContext
from .tool_calls import requested_calls, run_tool_calls

_LOGGER = logging.getLogger(__name__)

MODEL_NODE = "model"
TOOLS_NODE = "tools"
RETRIEVE_NODE = "retrieve"


class AgentKind(StrEnum):
    """How an agent answers; chosen per agent, one compiled graph each."""

    ASSISTANT = "assistant"
    CHATBOT = "chatbot"
    RAG = "rag"

    @property
    def uses_tools(self) -> bool:
        """Only the assistant binds tools; the others work with any chat model."""
        return self is AgentKind.ASSISTANT


REWRITE_INSTRUCTIONS = (
    "Rewrite the person's last question as a standalone search query for their "
    "documents, using the conversation for context: name the things it refers to. "
    "Reply with the query only, on one line, in the language of the question."
)
# How many recent messages the rewrite reads, and the longest query kept.
_REWRITE_CONTEXT_MESSAGES = 6
_MAX_QUERY_CHARS = 300


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


async def _stream_with_fallback(
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
            chunks: list[AIMessageChunk] = []
            streamed = False
            try:
                async for chunk in answer_stream(model, prompt):
                    if text := chunk_text(chunk):
                        write(TextDelta(text))
                        if not streamed:
                            # Chunks already buffered would otherwise all be read before
                            # the consumer runs once: let the first words reach the ChatLog
                            # (and TTS) now. Later chunks wait for the network, which lets
                            # the consumer run anyway; a pause per chunk would only cost.
                            await asyncio.sleep(0)
                        streamed = True
                    chunks.append(chunk)
            except Exception as err:  # noqa: BLE001  retried, passed on, or raised redacted
                # Only a redacted copy leaves the node: LangGraph would store the original
                # (whose text may echo an API key) in threads.db.
                if streamed:
                    raise redacted_error(err) from None
                if attempt < retries and is_retryable(err):
                    delay = retry_delay(err, attempt)
                    _LOGGER.info(
                        "Model call failed (%s), retrying in %.1f s", classify_error(err), delay
                    )
                    await asyncio.sleep(delay)
                    continue
                if index == len(models) - 1 or not falls_back(err):
                    raise redacted_error(err) from None
                next_model = models[index + 1][0]
                _LOGGER.warning(
                    "The main model failed (%s); the fallback model %s answers",
                    classify_error(err),
                    next_model.name if next_model else "",
                )
                break
            else:
                # One merge at the end: adding chunk by chunk re-merges the growing
                # message every time (quadratic in the answer's length).
                merged = add_ai_message_chunks(chunks[0], *chunks[1:]) if chunks else None
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


async def _stream_answer(
    prompt: list[AnyMessage], runtime: Runtime[TurnContext], *, with_tools: bool
) -> dict[str, Any]:
    """Stream one model answer; every token goes out as it arrives."""
    context = runtime.context
    write = runtime.context.emit
    write(MessageStarted())
    merged, answered_by = await _stream_with_fallback(context, prompt, write)
    write(_model_call_finished(answered_by, merged, context))
    if merged is None:
        message = AIMessage(content="")
    elif not with_tools:
        # A model that was offered no tools may still invent a call; the kinds without a
        # tools node must not leave a call without its result in the thread.
        message = AIMessage(
            content=merged.content,
            id=merged.id,
            usage_metadata=merged.usage_metadata,
            response_metadata=merged.response_metadata,
        )
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


def _system_prompt(state: AgentState, context: TurnContext, knowledge: str = "") -> SystemMessage:
    layers = replace(context.prompt, summary=state.get("summary", ""), knowledge=knowledge)
    return SystemMessage(layers.render())


async def call_model(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """The assistant's model call, with its tools bound."""
    prompt = [_system_prompt(state, runtime.context), *state["messages"]]
    return await _stream_answer(prompt, runtime, with_tools=True)


def plain_conversation(messages: list[AnyMessage]) -> list[AnyMessage]:
    """The thread without tool calls and results, for a model that is offered no tools.

    A thread may hold tool exchanges from before an agent became a chatbot; providers and
    models without tool support reject them when no tools are declared.
    """
    plain: list[AnyMessage] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            continue
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            if message.text.strip():
                plain.append(AIMessage(message.text, id=message.id))
            continue
        plain.append(message)
    return plain


async def chat(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """The chatbot's one model call: instructions and conversation, no tools."""
    prompt = [_system_prompt(state, runtime.context), *plain_conversation(state["messages"])]
    return await _stream_answer(prompt, runtime, with_tools=False)


async def answer_from_knowledge(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """The rag kind's model call: the retrieved passages are the last prompt layer."""
    found = state.get("knowledge")
    passages = None if found is None else [Passage(p["source"], p["text"]) for p in found]
    prompt = [
        _system_prompt(state, runtime.context, knowledge_block(passages)),
        *plain_conversation(state["messages"]),
    ]
    return await _stream_answer(prompt, runtime, with_tools=False)


def _question_and_before(messages: list[AnyMessage]) -> tuple[str, list[AnyMessage]]:
    """The last user message's text, and the conversation before it."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return messages[index].text, messages[:index]
    return "", messages


async def rewrite_as_search_query(
    model: BaseChatModel, earlier: list[AnyMessage], question: str, summary: str = ""
) -> tuple[str, AIMessage]:
    """One short model call: a follow-up ("and how often?") as a standalone query.

    Returns the query and the model's message (its token usage counts for the turn).
    """
    conversation = [
        f"{'Person' if isinstance(m, HumanMessage) else 'Assistant'}: {m.text.strip()}"
        for m in plain_conversation(earlier)[-_REWRITE_CONTEXT_MESSAGES:]
        if m.text.strip()
    ]
    transcript = "\n".join(conversation)
    answer = await model.ainvoke(
        [
            SystemMessage(REWRITE_INSTRUCTIONS),
            HumanMessage(
                (f"Earlier summary:\n{summary}\n\n" if summary else "")
                + f"Conversation:\n{transcript}\n\nLast question:\n{question}"
            ),
        ]
    )
    lines = [line.strip() for line in answer.text.splitlines() if line.strip()]
    return (lines[0][:_MAX_QUERY_CHARS] if lines else ""), answer


async def retrieve_knowledge(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Before the rag kind's answer: search the documents for this question.

    A follow-up is first rewritten into a standalone query, as "and how often?" finds
    nothing by itself. Documents that cannot be searched cost the passages, not the
    answer: the model is told, and says so.
    """
    context = runtime.context
    if context.knowledge is None:
        return {"knowledge": None}
    question, earlier = _question_and_before(state["messages"])
    query = question
    summary = state.get("summary", "")
    # A one-line job: the fast model when the agent has one, else the main model.
    rewrite_model = context.housekeeping_model
    if rewrite_model is not None and (summary or any(m.text.strip() for m in earlier)):
        try:
            query, answer = await rewrite_as_search_query(rewrite_model, earlier, question, summary)
            role = context.roles.fast if context.roles is not None else None
            context.emit(_model_call_finished(role, answer, context, answer=False))
        except Exception as err:  # noqa: BLE001  the question itself is still a query
            _LOGGER.warning("Could not rewrite a follow-up into a search query: %s", err)
        query = query or question
    try:
        passages = await context.knowledge.search(query)
    except Exception:
        _LOGGER.exception("Could not search the documents of %s", context.knowledge.source.agent)
        return {"knowledge": None}
    return {"knowledge": [{"source": p.source, "text": p.text} for p in passages]}


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
        message, tools, runtime.context.emit, declined_ids=declined_ids, reply=str(reply)
    )
    return {"messages": results}


async def route_after_model(state: AgentState) -> Literal["tools", "__end__"]:
    """Tools if the last answer asked for any, otherwise the turn is over.

    A coroutine so that LangGraph awaits it on the loop: a plain function would be run
    in the executor, one thread round trip per model answer.
    """
    messages = state["messages"]
    if messages and isinstance(messages[-1], AIMessage) and requested_calls(messages[-1]):
        return TOOLS_NODE
    return END


def build_assistant_graph(checkpointer: BaseCheckpointSaver) -> CompiledStateGraph:
    """The ReAct tool loop, compiled once per runtime (never per turn)."""
    graph = StateGraph(AgentState, context_schema=TurnContext)
    graph.add_node(MODEL_NODE, call_model)
    graph.add_node(TOOLS_NODE, call_tools)
    graph.add_edge(START, MODEL_NODE)
    graph.add_conditional_edges(MODEL_NODE, route_after_model, [TOOLS_NODE, END])
    graph.add_edge(TOOLS_NODE, MODEL_NODE)
    return graph.compile(checkpointer=checkpointer)


def _sequence_graph(
    checkpointer: BaseCheckpointSaver, steps: list[tuple[str, Any]]
) -> CompiledStateGraph:
    """Steps run one after the other, once per turn."""
    graph = StateGraph(AgentState, context_schema=TurnContext)
    graph.add_sequence(steps)
    graph.add_edge(START, steps[0][0])
    graph.add_edge(steps[-1][0], END)
    return graph.compile(checkpointer=checkpointer)


def build_chatbot_graph(checkpointer: BaseCheckpointSaver) -> CompiledStateGraph:
    """One model call per turn, no tools."""
    return _sequence_graph(checkpointer, [(MODEL_NODE, chat)])


def build_rag_graph(checkpointer: BaseCheckpointSaver) -> CompiledStateGraph:
    """Retrieve, then one model call that answers from what was found."""
    return _sequence_graph(
        checkpointer,
        [(RETRIEVE_NODE, retrieve_knowledge), (MODEL_NODE, answer_from_knowledge)],
    )


_BUILDERS = {
    AgentKind.ASSISTANT: build_assistant_graph,
    AgentKind.CHATBOT: build_chatbot_graph,
    AgentKind.RAG: build_rag_graph,
}


def build_graphs(checkpointer: BaseCheckpointSaver) -> dict[AgentKind, CompiledStateGraph]:
    """Every kind's graph on one checkpointer, compiled once per runtime."""
    return {kind: build(checkpointer) for kind, build in _BUILDERS.items()}


def recursion_limit(max_tool_rounds: int) -> int:
    """Graph steps for `max_tool_rounds` tool rounds (a tools step and a model step each)
    after the first model call; the other kinds take at most two steps."""
    return max(2 * max_tool_rounds + 1, 2)
