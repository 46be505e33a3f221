"""Home Assistant's Assist wording that every request carries, said in fewer tokens.

Texts of the Assist API ride along with every request: the live-context guidance in its
prompt (when the listing answers, when the live-context tool must be called), its rule on
which parameters to pass, and the live-context tool's description and parameters. Each is
said here in our own, shorter words with the same instructions: small models need every
one of them, not their length.

A rewrite was written for one exact text of Home Assistant's, known by its digest below.
A Home Assistant version whose text differs gets its own words sent unchanged, and
tests/tools/test_assist_wording.py fails on that version so that a rewrite is written for
its text: nothing Home Assistant adds is ever lost to an old rewrite.
"""

from __future__ import annotations

import hashlib
from typing import Any

try:  # Home Assistant 2026.10 and later
    from homeassistant.components.homeassistant.llm import DYNAMIC_CONTEXT_PROMPT
except ImportError:  # Home Assistant 2026.2
    from homeassistant.helpers.llm import DYNAMIC_CONTEXT_PROMPT

EXISTENCE = (
    'Whether a device exists or its type ("Do I have lights in the bedroom?"): answer from '
    "the static context below."
)
# The same rule where the compact home context replaced the listing (tools/context.py).
COMPACT_EXISTENCE = (
    'Whether a device exists or its type ("Do I have lights in the bedroom?"): search with '
    "home_find_entities."
)
_GENERAL = "General knowledge, not about the home: answer truthfully from what you know."


def _guidance(tool: str, answer: str) -> str:
    return "\n".join(
        (
            f"You CAN read the home's current state with {tool} (a primary function): "
            "never say you lack it.",
            EXISTENCE,
            'A CURRENT state, value or mode ("Is the lock locked?", "Is the fan on?", "What '
            'mode is the thermostat in?", "What is the temperature outside?") needs live data '
            f"(local weather, lock status): you MUST call {tool}, then {answer}",
            _GENERAL,
        )
    )


_ANSWER = "answer with the actual value or state it returned."

_LIVE_CONTEXT = (
    "CURRENT state, value or mode of devices, sensors, entities or areas: for questions "
    "about now ('Is the light on?') and first in conditional actions ('if it rains, turn "
    "off the sprinklers')."
)

# Digest (first 16 hex digits of SHA-256) of Home Assistant's text → ours.
_SHORTER: dict[str, str] = {
    # The prompt's live-context guidance, 2026.2 (its example answer, "The temperature
    # outside is [value from tool].", says what 2026.11 says in words)
    "194229cceffff0ab": _guidance("`GetLiveContext`", _ANSWER),
    # 2026.10
    "02d5bfab4530a735": _guidance("the live-context tool", _ANSWER),
    # 2026.11
    "f0052553d2043637": _guidance("the live-context tool", _ANSWER),
    # The live-context tool's description, 2026.2 (it takes no filters there)
    "cc88baa42a694784": _LIVE_CONTEXT,
    # 2026.10 and 2026.11
    "52a226e4a1975585": (
        f"{_LIVE_CONTEXT} Filter by name, domain, area or a mix; prefer domain for several "
        "of one type."
    ),
    # Its parameters (2026.10 and 2026.11)
    "68fac65492b865dc": "Name or alias, any case",
    "ac0655c6ddbd3c22": "e.g. light, sensor",
    "907495c4bdea24d7": "Area name or alias, any case",
}


# Home Assistant's targeting rule (every supported version) names `domain`, which a tool
# serving one domain no longer offers (tools/schema.py): said for every tool set.
TARGETING = (
    "When controlling a device, prefer passing just name and domain. "
    "When controlling an area, prefer passing just area name and domain."
)
SHORTER_TARGETING = (
    "For a device or area, prefer passing just name or area, plus domain if the tool has it."
)


def digest(text: str) -> str:
    """The key of `text` in the rewrites."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shorter(text: str) -> str:
    """Our shorter words for one of Home Assistant's texts (the text itself if unknown)."""
    return _SHORTER.get(digest(text), text)


def shorter_prompt(system_prompt: str) -> str:
    """The prompt with Home Assistant's live-context guidance and targeting rule in
    shorter words (each left as it is where its text is not the known one)."""
    system_prompt = system_prompt.replace(TARGETING, SHORTER_TARGETING, 1)
    guidance = DYNAMIC_CONTEXT_PROMPT.rstrip("\n")
    short = shorter(DYNAMIC_CONTEXT_PROMPT)
    if short is DYNAMIC_CONTEXT_PROMPT or guidance not in system_prompt:
        return system_prompt
    return system_prompt.replace(guidance, short, 1)


def shorter_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool schema whose parameters' descriptions are in shorter words where known."""
    properties = parameters.get("properties")
    if not isinstance(properties, dict):
        return parameters
    return {
        **parameters,
        "properties": {
            name: (
                {**sub, "description": shorter(sub["description"])}
                if isinstance(sub, dict) and isinstance(sub.get("description"), str)
                else sub
            )
            for name, sub in properties.items()
        },
    }
