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

from collections.abc import Awaitable, Callable
import logging
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from ..events import (
    MessageStarted,
    ModelCallFinished,
    PromptTruncated,
    TextFlagged,
    ToolCallFinished,
    ToolCallsRequested,
)
from ..guard import SafetyRating, clean_text, pause_value, rate_unattended_request
from ..knowledge import Passage, knowledge_block, passage_flags
from ..models import (
    AnswerBuilder,
    ModelRole,
    RoleModel,
    cached_input_tokens,
    provider_of,
    stream_with_fallback,
)
from .history import summary_findings, summary_section
from .kinds import AgentKind
from .note_memories import without_stale_memories
from .prompts import KNOWLEDGE_ID, SUMMARY_ID, is_note, last_question_index
from .state import AgentState, TurnContext
from .tool_calls import (
    confirmed_results,
    requested_calls,
    run_tool_calls,
    tool_message,
    with_kept_calls,
)
from .window import WindowPlan, messages_tokens, truncated

_LOGGER = logging.getLogger(__name__)

MODEL_NODE = "model"
TOOLS_NODE = "tools"
CONFIRM_NODE = "confirm"
RETRIEVE_NODE = "retrieve"


REWRITE_INSTRUCTIONS = (
    "Rewrite the person's last question as a standalone search query for their "
    "documents, using the conversation for context: name the things it refers to. "
    "Reply with the query only, on one line, in the language of the question."
)
# How many recent messages the rewrite reads, and the longest query kept.
_REWRITE_CONTEXT_MESSAGES = 6
_MAX_QUERY_CHARS = 300


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
        cached_input_tokens=cached_input_tokens(usage),
    )


async def _stream_answer(
    prompt: list[AnyMessage], runtime: Runtime[TurnContext], *, with_tools: bool
) -> dict[str, Any]:
    """Stream one model answer; every token goes out as it arrives.

    With a context window (Ollama's native API), the prompt is fitted into it first, and
    Ollama's count of the prompt tokens it read is checked afterwards (window.py).
    """
    context = runtime.context
    write = runtime.context.emit
    if context.window is not None:
        prompt, trimmed = context.window.fit(prompt)
        if trimmed is not None:
            write(trimmed)
    if context.memories_exist is not None:
        # After the fit: a memory is left out of a later note only when the earlier note
        # that shows it is still sent.
        prompt = await without_stale_memories(prompt, context.memories_exist)
    write(MessageStarted())
    answer, answered_by = await stream_with_fallback(
        context.answering_models,
        prompt,
        write,
        retries=context.model_retries,
        deadline=context.answer_deadline,
    )
    write(_model_call_finished(answered_by, answer, context))
    if context.window is not None and (answered_by is None or answered_by.role == ModelRole.MAIN):
        _check_truncation(context.window, prompt, answer, write)
    message = with_kept_calls(answer.message(with_tools=with_tools) or AIMessage(content=""))
    if calls := requested_calls(message):
        write(ToolCallsRequested(calls))
    return {"messages": [message]}


def _check_truncation(
    window: WindowPlan, prompt: list[AnyMessage], answer: AnswerBuilder, write: Any
) -> None:
    """Report a prompt Ollama read clearly less of than was sent (it cut the start)."""
    usage = answer.usage_metadata
    evaluated = usage["input_tokens"] if usage else 0
    sent = messages_tokens(prompt) + window.tools
    if truncated(sent, evaluated):
        _LOGGER.warning(
            "Ollama read %d of about %d prompt tokens: it cut the request to its window of %d "
            "tokens. Raise the agent's context window",
            evaluated,
            sent,
            window.window,
        )
        write(PromptTruncated(window.window, sent, evaluated))


# Providers whose prompt cache needs explicit breakpoints (Anthropic's cache_control);
# OpenAI, Gemini and local servers cache the longest unchanged prefix by themselves.
_BREAKPOINT_PROVIDERS = frozenset({"anthropic"})


def _wants_breakpoints(context: TurnContext) -> bool:
    model = str(getattr(context.chat_model, "model", "") or "")
    return provider_of(model) in _BREAKPOINT_PROVIDERS or model.startswith("claude")


def _system_prompt(context: TurnContext) -> SystemMessage:
    # Every layer carries text from outside (entity names, instructions): cleaned once
    # here, as the provider's HTTP client refuses invalid Unicode.
    text = clean_text(context.prompt.render())
    if _wants_breakpoints(context):
        # Anthropic caches up to a marked block: tools and system message, which stay the
        # same turn after turn (prompts.py), are read from the cache by later requests.
        return SystemMessage(
            [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]
        )
    return SystemMessage(text)


def _summary_messages(state: AgentState) -> list[AnyMessage]:
    """The summary of older turns, right after the system message and the tools.

    Not in the system message: it changes when the thread is cut, and a change there
    would make the model read every tool again.
    """
    if section := summary_section(state.get("summary", "")):
        return [HumanMessage(clean_text(section), id=SUMMARY_ID)]
    return []


def _request(
    state: AgentState, context: TurnContext, messages: list[AnyMessage], knowledge: str = ""
) -> list[AnyMessage]:
    """System message, summary, history (with its context notes), then the passages
    retrieved for this question right before it (prompts.py has the order and why)."""
    if knowledge:
        index = last_question_index(messages)
        messages = [
            *messages[:index],
            HumanMessage(clean_text(knowledge), id=KNOWLEDGE_ID),
            *messages[index:],
        ]
    return [_system_prompt(context), *_summary_messages(state), *messages]


async def call_model(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """The assistant's model call, with its tools bound."""
    _report_summary(state, runtime)
    prompt = _request(state, runtime.context, state["messages"])
    return await _stream_answer(prompt, runtime, with_tools=True)


def _report_summary(state: AgentState, runtime: Runtime[TurnContext]) -> None:
    """At a turn's first step: what the scan flagged in the summary of old turns, which
    rides along in every call of the turn (reported once)."""
    messages = state["messages"]
    first_step = bool(messages) and isinstance(messages[-1], HumanMessage)
    if first_step and (found := summary_findings(state.get("summary", ""))):
        runtime.context.emit(TextFlagged("summary", "", found))


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
    _report_summary(state, runtime)
    prompt = _request(state, runtime.context, plain_conversation(state["messages"]))
    return await _stream_answer(prompt, runtime, with_tools=False)


async def answer_from_knowledge(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """The rag kind's model call: the retrieved passages are the last prompt layer."""
    found = state.get("knowledge")
    passages = None if found is None else [Passage(p["source"], p["text"]) for p in found]
    prompt = _request(
        state, runtime.context, plain_conversation(state["messages"]), knowledge_block(passages)
    )
    return await _stream_answer(prompt, runtime, with_tools=False)


def _question_and_before(messages: list[AnyMessage]) -> tuple[str, list[AnyMessage]]:
    """The last user message's text, and the conversation before it."""
    index = last_question_index(messages)
    # Context notes are the agent's own, not part of the conversation.
    earlier = [m for m in messages[:index] if not is_note(m)]
    if index < len(messages):
        return messages[index].text, earlier
    return "", earlier


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
    _report_summary(state, runtime)
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
    if passages is None:
        return {"knowledge": None}
    for flagged in passage_flags(passages):
        context.emit(flagged)
    return {"knowledge": [{"source": p.source, "text": p.text} for p in passages]}


async def call_tools(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Run the tool calls of the last assistant message, in parallel.

    Home Assistant's effect gate holds every critical effect a call is about to have
    (tools/effects.py). The calls whose effects were held get no result yet: the held
    effects go into the state, and the confirm step asks the user.
    """
    message = state["messages"][-1]
    assert isinstance(message, AIMessage)
    context = runtime.context
    effects = context.effects
    held = None

    def held_ids() -> frozenset[str]:
        nonlocal held
        held = effects.take_held() if effects is not None else None
        return frozenset(held.by_call) if held is not None else frozenset()

    results = await run_tool_calls(message, context.tools, context.emit, held=held_ids)
    if held is None:
        return {"messages": results}
    if not context.requester.present and context.safety_check:
        rating = await _safety_rating(state, context, held.actions)
        if rating is not None and rating.blocks:
            await effects.release(held.token, confirmed=False)  # type: ignore[union-attr]
            refused = [
                ToolCallFinished(
                    call,
                    {
                        "error": "refused_by_safety_check",
                        "error_text": (
                            f"Not done: the safety check rated this unattended request HIGH risk "
                            f"({rating.reason})."
                        ),
                    },
                    is_error=True,
                )
                for call in requested_calls(message)
                if call.id in held.by_call
            ]
            for done in refused:
                context.emit(done)
            return {"messages": [*results, *(tool_message(done) for done in refused)]}
    return {"messages": results, "held": pause_value(held, context.requester, context.now)}


async def _safety_rating(
    state: AgentState, context: TurnContext, actions: tuple[str, ...]
) -> SafetyRating | None:
    """The fast model's rating of the request that led to critical actions."""
    model = context.housekeeping_model
    if model is None:
        return None
    request, _ = _question_and_before(state["messages"])
    rating = await rate_unattended_request(model, request, actions)
    _LOGGER.warning(
        "Safety check of an unattended request leading to %s: %s (%s)",
        ", ".join(actions),
        rating.level,
        rating.reason,
    )
    return rating


async def confirm_effects(state: AgentState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Ask for the user's yes, then run or drop the held effects.

    The graph pauses here (`interrupt`, saved in the checkpoint); the runtime resumes it
    with the decision on the next message (confirmation.decide: only a clear yes from the
    same requester before it expires confirms). This step runs again from the top then,
    so it does nothing before the interrupt that must not happen twice.
    """
    pause = state.get("held") or {}
    decision = interrupt(pause)
    confirmed = bool(isinstance(decision, dict) and decision.get("confirmed"))
    reason = decision.get("reason", "") if isinstance(decision, dict) else ""
    context = runtime.context
    waiting = pause.get("calls") or {}
    calls = {
        call.id: call
        for message in state["messages"]
        if isinstance(message, AIMessage)
        for call in requested_calls(message)
        if call.id in waiting
    }
    released = None
    if context.effects is not None and pause.get("token"):
        released = await context.effects.release(str(pause["token"]), confirmed=confirmed)
    if confirmed and released is None:
        reason = "expired"
    results = confirmed_results(calls, released if confirmed else None, reason)
    for done in results:
        context.emit(done)
    return {
        "messages": [tool_message(done) for done in results],
        "held": None,
        "confirmed": confirmed,
    }


def _after_model(state: AgentState, update: dict[str, Any]) -> str:
    """Tools if the answer just given asked for any, otherwise the turn is over."""
    answer = update["messages"][-1]
    return TOOLS_NODE if isinstance(answer, AIMessage) and requested_calls(answer) else END


def _after_tools(state: AgentState, update: dict[str, Any]) -> str:
    """To the confirm step when effects wait for a yes, else back to the model."""
    held = update["held"] if "held" in update else state.get("held")
    return CONFIRM_NODE if held else MODEL_NODE


def _after_confirm(state: AgentState, update: dict[str, Any]) -> str:
    """After a yes the model reports what was done; anything else ends the paused
    exchange here, and the runtime handles the reply as the new request it is."""
    confirmed = update["confirmed"] if "confirmed" in update else state.get("confirmed")
    return MODEL_NODE if confirmed else END


type _Node = Callable[[AgentState, Runtime[TurnContext]], Awaitable[dict[str, Any]]]


def _routed(node: _Node, route: Callable[[AgentState, dict[str, Any]], str]) -> _Node:
    """`node`, whose result also says where the run goes next (a Command's goto).

    The same routing as a conditional edge (the same `branch:to:<node>` channels, so a
    thread saved by either continues under the other), without its cost: LangGraph runs
    every conditional edge's function as a traced run of its own, two more asyncio tasks
    per step (the function, and its callback manager's end of run), about 0.2 ms a step.
    """

    async def routed(state: AgentState, runtime: Runtime[TurnContext]) -> Command:
        update = await node(state, runtime)
        return Command(update=update, goto=route(state, update))

    routed.__name__ = node.__name__
    routed.__doc__ = node.__doc__
    return routed


def build_assistant_graph(checkpointer: BaseCheckpointSaver) -> CompiledStateGraph:
    """The ReAct tool loop, compiled once per runtime (never per turn)."""
    graph = StateGraph(AgentState, context_schema=TurnContext)
    graph.add_node(MODEL_NODE, _routed(call_model, _after_model), destinations=(TOOLS_NODE, END))
    graph.add_node(
        TOOLS_NODE, _routed(call_tools, _after_tools), destinations=(MODEL_NODE, CONFIRM_NODE)
    )
    graph.add_node(
        CONFIRM_NODE, _routed(confirm_effects, _after_confirm), destinations=(MODEL_NODE, END)
    )
    graph.add_edge(START, MODEL_NODE)
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
