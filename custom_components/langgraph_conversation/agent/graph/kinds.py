"""The kinds of agent: how an agent answers (a light module: the agent form and the
profile name kinds without loading the graphs)."""

from __future__ import annotations

from enum import StrEnum


class AgentKind(StrEnum):
    """How an agent answers; chosen per agent, one compiled graph each."""

    ASSISTANT = "assistant"
    CHATBOT = "chatbot"
    RAG = "rag"

    @property
    def uses_tools(self) -> bool:
        """Only the assistant binds tools; the others work with any chat model."""
        return self is AgentKind.ASSISTANT
