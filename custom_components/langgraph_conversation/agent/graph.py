"""Agent graphs, one per agent kind, over one shared message state.

assistant  history → model ⇄ tools, until the model answers (the ReAct loop)
chatbot    history → model: one call, no tools, for models that cannot call tools
rag        history → retrieve → model: the documents are searched first (a follow-up is
           rewritten into a standalone search query), then the model answers from the
           passages found, without tools
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from dataclasses import replace
from enum import StrEnum
import logging
import time
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from .answer import ANSWER_TOO_SLOW, YIELD_INTERVAL, AnswerBuilder, AnswerLimitExceeded
from .confirmation import INTERRUPT_KIND, calls_needing_confirmation, is_affirmative
from .events import MessageStarted, ModelCallFinished, TextDelta, ToolCallsRequested
from .history import compact_history
from .knowledge import Passage, knowledge_block
from .model import answer_stream, classify_error, is_retryable, redacted_error, retry_delay
from .roles import ModelRole, RoleModel, falls_back
from .state import AgentState, TurnContext
from .text import clean_text
from .tool_calls import calls_to_run, requested_calls, run_tool_calls, with_kept_calls

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


async def _stream_with_fallback(
    context: TurnContext, prompt: list[Any], write: Any
) -> tuple[AnswerBuilder, RoleModel | None]:
    """Stream the answer: the main model with its retries, then the fallback.

    Only failures before the first word are tried again, on the main model if they may
    pass (rate limit, 5xx, dropped connection), else on the fallback if one is set (also
    after a timeout). Once words were spoken, a retry would repeat them: never. An answer
    past its bounds (answer.py: too long, or still streaming at its deadline) ends the
    turn: another attempt would most likely do the same.
    """
    models = context.answering_models
    for index, (role_model, model) in enumerate(models):
        retries = context.model_retries if index == 0 else 0
        for attempt in range(retries + 1):
            answer = AnswerBuilder()
            streamed = False
            deadline = asyncio.timeout(context.answer_deadline)
            try:
                async with deadline, aclosing(answer_stream(model, prompt)) as chunks:
                    paused = time.perf_counter()
                    async for chunk in chunks:
                        if text := answer.add(chunk):
                            write(TextDelta(text))
                            if not streamed:
                                # Chunks already buffered would otherwise all be read
                                # before the consumer runs once: let the first words
                                # reach the ChatLog (and TTS) now.
                                await asyncio.sleep(0)
                                paused = time.perf_counter()
                            streamed = True
                        if time.perf_counter() - paused > YIELD_INTERVAL:
                            # A long burst of buffered chunks is read without waiting
                            # for the network: give the loop a turn now and then.
                            await asyncio.sleep(0)
                            paused = time.perf_counter()
            except AnswerLimitExceeded:
                raise
            except Exception as err:  # noqa: BLE001  retried, passed on, or raised redacted
                if deadline.expired():
                    raise AnswerLimitExceeded(
                        ANSWER_TOO_SLOW,
                        f"the answer was still streaming after {context.answer_deadline:g} s",
                    ) from None
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
                return answer, role_model
    raise AssertionError("unreachable: the last model's failure is raised")


def _model_call_finished(
    answered_by: RoleModel | None,
    merged: AIMessage | AnswerBuilder | None,
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
    answer, answered_by = await _stream_with_fallback(context, prompt, write)
    write(_model_call_finished(answered_by, answer, context))
    message = with_kept_calls(answer.message(with_tools=with_tools) or AIMessage(content=""))
    if calls := requested_calls(message):
        write(ToolCallsRequested(calls))
    return {"messages": [message]}


def _system_prompt(state: AgentState, context: TurnContext, knowledge: str = "") -> SystemMessage:
    layers = replace(context.prompt, summary=state.get("summary", ""), knowledge=knowledge)
    # Every layer carries text from outside (entity names, memories, passages): cleaned
    # once here, as the provider's HTTP client refuses invalid Unicode.
    return SystemMessage(clean_text(layers.render()))


async def call_model(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """The assistant's model call, with its tools bound (the turn's first fits the history)."""
    state, fitted = await _history_fitted(state, runtime)
    prompt = [_system_prompt(state, runtime.context), *state["messages"]]
    return _after(fitted, await _stream_answer(prompt, runtime, with_tools=True))


async def _history_fitted(
    state: AgentState, runtime: Runtime[TurnContext]
) -> tuple[AgentState, dict[str, Any]]:
    """Before a turn's first model call (the request is the last message): the state with
    old turns summarised if the thread is too long, and that change as an update.

    Done inside the model's step rather than in a step of its own: every step is a
    checkpoint written and a round of LangGraph's scheduling, on every turn.
    """
    messages = state["messages"]
    if not messages or not isinstance(messages[-1], HumanMessage):
        return state, {}
    update = await fit_history(state, runtime)
    if not update:
        return state, {}
    removed = {message.id for message in update["messages"]}
    fitted: AgentState = {
        **state,
        "summary": update["summary"],
        "messages": [message for message in messages if message.id not in removed],
    }
    return fitted, update


def _after(fitted: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """One update of the history's changes, then the answer."""
    if not fitted:
        return answer
    return {**fitted, "messages": [*fitted["messages"], *answer["messages"]]}


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
    state, fitted = await _history_fitted(state, runtime)
    prompt = [_system_prompt(state, runtime.context), *plain_conversation(state["messages"])]
    return _after(fitted, await _stream_answer(prompt, runtime, with_tools=False))


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
    state, fitted = await _history_fitted(state, runtime)
    context = runtime.context
    if context.knowledge is None:
        return {**fitted, "knowledge": None}
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
        return {**fitted, "knowledge": None}
    return {**fitted, "knowledge": [{"source": p.source, "text": p.text} for p in passages]}


async def call_tools(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Run the tool calls of the last assistant message, in parallel.

    Critical calls first need the user's yes: the graph pauses (`interrupt`) and this node
    runs again from the top when the next user message resumes it, with that message as
    the value `interrupt` returns.
    """
    message = state["messages"][-1]
    assert isinstance(message, AIMessage)
    tools = runtime.context.tools
    # Only calls that may run are asked about (tool_calls.py: count and size limits).
    needed = await calls_needing_confirmation(calls_to_run(message), tools)
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


async def fit_history(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Summarise old turns if the thread is too long (an update of summary and removals)."""
    context = runtime.context
    model = context.housekeeping_model
    if model is None:
        return {}
    role = context.roles.fast if context.roles is not None else None

    def report(answer: AIMessage) -> None:
        context.emit(_model_call_finished(role, answer, context, answer=False))

    return await compact_history(model, dict(state), context.history_budget, report)


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
