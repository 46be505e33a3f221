"""Prompt layers: what the system prompt is made of, and in which order.

Providers cache the longest unchanged beginning of a prompt (OpenAI, Anthropic, Gemini,
and local servers that reuse their KV cache), so the layers go from the most stable to
the most volatile:

1. base prompt        the agent kind's (a file in base_prompts/), or the agent's override
2. voice rule         only for a voice satellite: short, plain, speakable answers
3. memory rules       only when the memory tools are bound
4. speaker            the device and area the person speaks through, when known
5. instructions       the user's instructions as Home Assistant rendered them (a template,
                      with the Assist API's prompt and possibly the time)
6. summary            older turns summarised away (changes when the thread is compacted)
7. memories           recalled for this question
8. knowledge          passages retrieved for this question (rag)

Recalled memories and retrieved passages are data someone wrote; their sections say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .history import summary_section
from .injection import scan_text
from .memory import MEMORY_INSTRUCTIONS
from .quoting import quoted_flagged

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


@dataclass(frozen=True, slots=True)
class PromptLayers:
    """The layers of one turn's system prompt; `render` joins them in their fixed order."""

    base: str
    voice: bool = False
    memory_rules: bool = False
    speaker: str = ""
    instructions: str = ""
    summary: str = ""
    memories: str = ""
    knowledge: str = ""

    def render(self) -> str:
        """The system prompt: stable layers first, volatile ones last."""
        return "\n\n".join(
            part
            for part in (
                self.base,
                VOICE_RULE if self.voice else "",
                MEMORY_INSTRUCTIONS if self.memory_rules else "",
                self.speaker,
                self.instructions,
                summary_section(self.summary),
                self.memories,
                self.knowledge,
            )
            if part and part.strip()
        )
