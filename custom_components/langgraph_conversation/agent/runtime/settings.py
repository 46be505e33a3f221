"""One agent's settings, as every one of its turns sees them (a light module: the Home
Assistant side builds them from the options without loading the runtime)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..graph import AgentKind
from ..knowledge import KnowledgeSource
from ..models import ModelSettings, RoleAccesses


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """One agent as every one of its turns sees it.

    The defaults here switch features off; the defaults a user gets live with the
    options (profile.py on the Home Assistant side).
    """

    # The main model's generation settings.
    settings: ModelSettings
    # Model calls a turn may make before it gives up (the graph's recursion limit).
    max_tool_rounds: int
    # Which graph answers; only the assistant binds tools.
    kind: AgentKind = AgentKind.ASSISTANT
    # The agent's own base prompt instead of its kind's (None or blank: the kind's).
    base_prompt: str | None = None
    # The agent's fast and fallback models (see models/roles.py); unset roles use the main model.
    roles: RoleAccesses = field(default_factory=RoleAccesses)
    # Extra attempts of a model call that failed before its first word.
    model_retries: int = 0
    # Token budget of a thread before older turns are summarised; None keeps all.
    history_budget: int | None = None
    # Whether turns read (and the assistant writes) the memories of who is speaking.
    memory: bool = False
    memory_recall_limit: int = 5
    # After the answer, the housekeeping model saves lasting facts the person told
    # (memory/extraction.py); needs `memory`.
    learn_memories: bool = False
    # The agent's documents: searched first by the rag kind, and by the assistant's
    # search_knowledge tool when `search_knowledge` is on.
    knowledge: KnowledgeSource | None = None
    search_knowledge: bool = False
    # The fast model rates requests without a person that lead to critical effects.
    safety_check: bool = False

    @property
    def uses_knowledge(self) -> bool:
        """Whether turns read the agent's documents (the rag kind always; the assistant
        when its search_knowledge tool is on)."""
        return self.kind is AgentKind.RAG or (self.kind.uses_tools and self.search_knowledge)
