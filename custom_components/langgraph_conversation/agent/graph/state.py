"""The state every agent graph shares: the thread's messages, and the turn's context."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph.message import add_messages

from ..guard import EffectGuard, Requester
from ..knowledge import KnowledgeIndex
from ..models import RoleModel, RoleModels
from .prompts import PromptLayers
from .window import WindowPlan


class AgentState(TypedDict):
    """Checkpointed per thread: langchain messages and plain text, so strict msgpack can
    revive it."""

    messages: Annotated[list[AnyMessage], add_messages]
    # Older turns that were summarised away (see history.py).
    summary: NotRequired[str]
    # Passages the rag kind retrieved for this turn ({"source", "text"}); None when the
    # documents could not be searched. Replaced every rag turn.
    knowledge: NotRequired[list[dict[str, str]] | None]
    # Effects held during the last tool round, waiting for the requester's yes
    # (confirmation.pause_value; plain values); None once answered.
    held: NotRequired[dict[str, Any] | None]
    # Whether the last answered confirmation was a yes (routes the confirm step).
    confirmed: NotRequired[bool]


def _ignore(_event: Any) -> None:
    """No listener: events are dropped."""


# Top-level keywords langchain's conversion moves out of a tool's JSON schema.
_NOT_PARAMETERS = frozenset({"title", "description", "definitions", "$defs"})


def openai_tool(tool: BaseTool) -> dict[str, Any]:
    """A tool in the OpenAI format chat models are bound with.

    Tools with a JSON schema (Home Assistant's and ours, sanitised by tools/schema.py: no
    references, no titles) are written out directly: langchain's conversion walks every
    schema again on every turn (dereferencing, dropping titles) to produce the same dict.
    """
    schema = tool.args_schema
    if not isinstance(schema, dict):
        return convert_to_openai_tool(tool)
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": {k: v for k, v in schema.items() if k not in _NOT_PARAMETERS},
        },
    }


@dataclass(frozen=True, slots=True)
class TurnContext:
    """What one turn brings along and is never checkpointed.

    The system prompt is rebuilt every turn (Home Assistant renders the time, the
    exposed entities and the user's template into it), so its layers are passed here
    instead of being stored in the thread; the graph adds the summary and, for rag, the
    retrieved passages.
    """

    prompt: PromptLayers
    model: Runnable
    tools: Mapping[str, BaseTool] = field(default_factory=dict)
    # The unbound chat model, for housekeeping calls such as summaries.
    chat_model: BaseChatModel | None = None
    # Token budget of the thread before older turns are summarised; None keeps all.
    history_budget: int | None = None
    # Extra attempts of a model call that failed before its first word (rate limit, 5xx,
    # dropped connection).
    model_retries: int = 0
    # The agent's documents, for the rag kind's retrieval (None: no knowledge).
    knowledge: KnowledgeIndex | None = None
    # The models of each role (main, fast, fallback); None: the main model does all.
    roles: RoleModels | None = None
    # The fallback model bound to the same tools, tried when the main model fails.
    fallback_model: Runnable | None = None
    # Where the graph's nodes send the turn's events (tokens, tool results, model calls),
    # in order, as they happen; the runtime sets it for each run. Called on the event
    # loop only: every node is a coroutine (LangGraph runs plain functions in threads).
    emit: Callable[[Any], None] = _ignore
    # Home Assistant's effect gate for this turn (None: nothing is gated, e.g. in tests
    # of the agent alone), who asked, and the turn's clock (seconds since the epoch).
    effects: EffectGuard | None = None
    requester: Requester = field(default_factory=Requester)
    now: float = 0.0
    # Rate unattended requests that lead to critical effects first (guard/safety.py).
    safety_check: bool = False
    # Seconds one model answer may stream in all (models/answer.py); None: no bound.
    answer_deadline: float | None = None
    # The model's context window and how this turn's requests fit it (window.py); None:
    # the provider takes no window (only Ollama's native API does).
    window: WindowPlan | None = None
    # Which memory ids still exist, for the memories stored in context notes
    # (note_memories.py); None: the turn reads no memories.
    memories_exist: Callable[[set[str]], Awaitable[set[str]]] | None = None

    @property
    def housekeeping_model(self) -> BaseChatModel | None:
        """The model for summaries, query rewriting and memory extraction: fast, else main."""
        return self.roles.fast.model if self.roles is not None else self.chat_model

    @property
    def answering_models(self) -> list[tuple[RoleModel | None, Runnable]]:
        """The models that may answer, in order: the main model, then the fallback."""
        main = self.roles.main if self.roles is not None else None
        models: list[tuple[RoleModel | None, Runnable]] = [(main, self.model)]
        if self.roles is not None and self.roles.fallback and self.fallback_model is not None:
            models.append((self.roles.fallback, self.fallback_model))
        return models

    @classmethod
    def create(
        cls,
        prompt: PromptLayers,
        chat_model: BaseChatModel,
        tools: list[BaseTool],
        history_budget: int | None = None,
        model_retries: int = 0,
        knowledge: KnowledgeIndex | None = None,
        *,
        roles: RoleModels | None = None,
    ) -> TurnContext:
        """Bind the tools to the model once per turn, not once per model call.

        With `roles`, `chat_model` should be `roles.main.model`; the fallback gets the
        same tools.
        """

        formatted = [openai_tool(tool) for tool in tools]

        def bound(model: BaseChatModel) -> Runnable:
            return model.bind_tools(formatted) if formatted else model

        fallback = roles.fallback if roles is not None else None
        return cls(
            prompt,
            bound(chat_model),
            {tool.name: tool for tool in tools},
            chat_model,
            history_budget,
            model_retries,
            knowledge,
            roles,
            bound(fallback.model) if fallback is not None else None,
        )
