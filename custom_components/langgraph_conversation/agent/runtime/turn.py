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
from ..guard import EffectGuard, Requester
from ..hooks import TurnHooks


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
