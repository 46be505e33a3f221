"""What the runtime is given for a turn: the agent (fixed until its options change) and
the message (everything that differs from one message to the next).

The agent is built once per agent by the Home Assistant side (profile.py) and shared by
all of its turns; a turn carries only what the message brought.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from langchain_core.tools import BaseTool

from ..events import TextFlagged
from ..graph import AgentKind
from ..guard import EffectGuard, Requester
from ..hooks import TurnHooks
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


@dataclass(frozen=True, slots=True)
class Turn:
    """One user message to one thread: what this message brought, nothing of the agent."""

    thread_id: str
    text: str
    # The user's instructions as Home Assistant rendered them (one layer of the prompt).
    system_prompt: str
    tools: list[BaseTool]
    # What happened in the conversation since this agent's last turn without it
    # (commands another agent handled, announcements), as (role, text) pairs.
    earlier: tuple[tuple[str, str], ...] = ()
    # Observers of this turn only (the runtime's own `hooks` observe every turn).
    hooks: tuple[TurnHooks, ...] = ()
    # Spoken through a voice satellite: the prompt asks for short, speakable answers.
    voice: bool = False
    # Where the person speaks from (prompts.speaker_layer), "" when unknown.
    speaker: str = ""
    # The date and time line Home Assistant would put into its prompt (conversation.py
    # takes it out): it goes into the turn's context note, not the system message.
    clock: str = ""
    # Home Assistant's effect gate for this turn's tool calls (confirmation.EffectGuard).
    effects: EffectGuard | None = None
    # Who asks: a pending yes binds to them (confirmation.decide), and their memories
    # are the ones the turn uses (when the agent uses memories).
    requester: Requester = field(default_factory=Requester)
    # The person entity the requester's user belongs to (`person.alice`), if any: their
    # memories are kept under it, the same on every instance sharing the storage
    # (memory/memories.py).
    person_id: str | None = None
    # When the turn started (seconds since the epoch); 0 reads the clock.
    now: float = 0.0
    # What the caller's own scan flagged in text it put into the turn (device, area and
    # entity names); reported with the turn's other flags.
    flagged: tuple[TextFlagged, ...] = ()
    # Fitting the request into the model's window (graph/window.py): tools that may be left
    # out when it is too long (the runtime's own memory and document tools may too), the
    # instructions with the entity listing in compact form, made only when needed, and
    # the tools offered only then (entity search, needless while the listing is there).
    optional_tools: frozenset[str] = frozenset()
    compact_instructions: Callable[[], str] | None = None
    compact_tools: tuple[BaseTool, ...] = ()

    @property
    def unattended(self) -> bool:
        """No person is behind the request (no user and no device: an automation, a
        script): its text is scanned for injection like any other untrusted text."""
        return not self.requester.present
