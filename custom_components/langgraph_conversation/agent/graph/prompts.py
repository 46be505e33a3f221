"""Prompt layers: what a request is made of, and in which order.

Providers and local servers cache the longest unchanged beginning of a request (OpenAI,
Anthropic, Gemini; llama.cpp and Ollama keep their KV cache). Chat templates render the
tool list right after the system message (Qwen and Llama style), so a change anywhere in
the system message makes the model read every tool again. A request is therefore laid
out from the most stable to the most volatile part:

1. system message     only what stays the same turn after turn:
                      base prompt (the agent kind's, or the agent's override),
                      voice rule (voice satellites), memory rules (memory tool bound),
                      instructions (the user's, as Home Assistant rendered them, without
                      the clock line)
2. tools              in a stable order (Home Assistant's, then ours)
3. summary            older turns summarised away; changes only when the thread is cut,
                      which changes everything after it anyway
4. history            the thread; each turn's context note stays where it was written
5. context note       this turn's volatile parts: the clock, where the person speaks
                      from, the memories recalled for this request; written into the
                      thread right before the request, so the next request reads it as
                      history and its prefix stays byte-identical
6. knowledge          passages retrieved for this question (rag), right before it, never
                      stored (they are only for this answer)
7. the request

Recalled memories and retrieved passages are data someone wrote; their sections say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_core.messages import HumanMessage

from ..guard import quoted_flagged, scan_text
from ..memory import MEMORY_INSTRUCTIONS

_BASE_PROMPT_DIR = Path(__file__).parent / "base_prompts"


def _load_base_prompts() -> dict[str, str]:
    """Base prompt per agent kind, by file name.

    Read once, when this module is imported: Home Assistant imports the integration in
    its executor, so these reads never run on the event loop.
    """
    return {
        path.stem: path.read_text(encoding="utf-8").strip()
        for path in sorted(_BASE_PROMPT_DIR.glob("*.md"))
    }


BASE_PROMPTS: dict[str, str] = _load_base_prompts()

VOICE_RULE = (
    "You are heard through a voice satellite, not read. Answer briefly, in one to three "
    "short sentences of plain spoken text: no lists, Markdown, emoji, links or code. "
    "Write numbers, times and units the way they are said."
)


def base_prompt(kind: str, override: str | None = None) -> str:
    """The agent's own base prompt if it set one, else its kind's."""
    if override and override.strip():
        return override.strip()
    return BASE_PROMPTS[kind]


def _name(name: str) -> str:
    """A device or area name, quoted as people (or integrations) chose it."""
    return quoted_flagged(name, scan_text(name))


def speaker_layer(device: str | None, area: str | None) -> str:
    """Where the person speaks from; names are quoted (and flagged when they look like
    instructions), as people chose them."""
    if area and device:
        return (
            f"The person is speaking through the device {_name(device)} in the area "
            f"{_name(area)}. Requests without a place mean this area."
        )
    if area:
        return f"The person is in the area {_name(area)}. Requests without a place mean this area."
    if device:
        return f"The person is speaking through the device {_name(device)}."
    return ""


# Marks a context note in the thread (its message id starts with it): notes are the
# agent's own, not the person's words, and some readers (the search query rewrite) skip them.
NOTE_ID_PREFIX = "note-"
# Ids of the request's other user messages that are not the person's: the summary of
# older turns (after the system message) and retrieved passages (before the question).
SUMMARY_ID = "summary"
KNOWLEDGE_ID = "knowledge"
NOTE_HEADER = "[Context for the request that follows, not written by the person]"


def is_note(message: object) -> bool:
    """Whether a thread message is a context note (see the module docstring)."""
    return str(getattr(message, "id", "") or "").startswith(NOTE_ID_PREFIX)


def last_question_index(messages: Sequence[object]) -> int:
    """Where the person's last message is: the index of the last human message that is
    not a context note, len(messages) when there is none.

    A note is a human message too, stored right before the request it came with, so it
    is never the question. The graph puts a question's retrieved passages right before
    it and reads it as the question; the runtime undoes a failed resumed exchange from
    it (the exchange began with that request).
    """
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage) and not is_note(messages[index]):
            return index
    return len(messages)


@dataclass(frozen=True, slots=True)
class PromptLayers:
    """The layers of one turn's request; `render` joins the system message's, `note` the
    volatile ones."""

    base: str
    voice: bool = False
    memory_rules: bool = False
    instructions: str = ""
    # Volatile: in the turn's context note, never in the system message.
    clock: str = ""
    speaker: str = ""
    memories: str = ""
    # Rendered by the graph after the system message (summary) and before the request
    # (knowledge).
    summary: str = ""
    knowledge: str = ""

    def render(self) -> str:
        """The system message: only the layers that stay the same from turn to turn."""
        return "\n\n".join(
            part
            for part in (
                self.base,
                VOICE_RULE if self.voice else "",
                MEMORY_INSTRUCTIONS if self.memory_rules else "",
                self.instructions,
            )
            if part and part.strip()
        )

    def note(self) -> str:
        """This turn's context note ("" when there is nothing volatile to say)."""
        parts = [p.strip() for p in (self.clock, self.speaker, self.memories) if p and p.strip()]
        return "\n".join([NOTE_HEADER, *parts]) if parts else ""
