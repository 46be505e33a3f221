"""The state every agent graph shares: the thread's messages, and the turn's context."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, NotRequired, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.graph.message import add_messages


class AgentState(TypedDict):
    """Checkpointed per thread: langchain messages and plain text, so strict msgpack can
    revive it."""

    messages: Annotated[list[AnyMessage], add_messages]
    # Older turns that were summarised away (see history.py).
    summary: NotRequired[str]


@dataclass(frozen=True, slots=True)
class TurnContext:
    """What one turn brings along and is never checkpointed.

    The system prompt is rebuilt every turn (Home Assistant renders the time, the
    exposed entities and the user's template into it), so it is passed here instead of
    being stored in the thread.
    """

    system_prompt: str
    model: Runnable
    tools: Mapping[str, BaseTool] = field(default_factory=dict)
    # The unbound chat model, for housekeeping calls such as summaries.
    chat_model: BaseChatModel | None = None
    # Token budget of the thread before older turns are summarised; None keeps all.
    history_budget: int | None = None
    # Extra attempts of a model call that failed before its first word (rate limit, 5xx,
    # dropped connection).
    model_retries: int = 0

    @classmethod
    def create(
        cls,
        system_prompt: str,
        chat_model: BaseChatModel,
        tools: list[BaseTool],
        history_budget: int | None = None,
        model_retries: int = 0,
    ) -> TurnContext:
        """Bind the tools to the model once per turn, not once per model call."""
        model: Runnable = chat_model.bind_tools(tools) if tools else chat_model
        return cls(
            system_prompt,
            model,
            {tool.name: tool for tool in tools},
            chat_model,
            history_budget,
            model_retries,
        )
