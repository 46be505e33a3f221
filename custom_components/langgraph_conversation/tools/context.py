"""The compact home context: a short area/domain summary instead of every exposed entity.

Home Assistant's Assist API prompt lists every exposed entity, which costs thousands of
tokens in a large home and overwhelms small local models. With the option on, that list is
replaced by a summary by floor and area, and the agent finds exact names and states with
its entity tools when it needs them.
"""

from __future__ import annotations

import re

from homeassistant.core import HomeAssistant

from .assist_wording import COMPACT_EXISTENCE, EXISTENCE
from .entities import home_summary

COMPACT_INTRO = (
    "The home, by area (counts of exposed devices only): {summary}\n"
    "Find a device's exact name with home_find_entities."
)

# The entity listing of Home Assistant's Assist prompt: its header line and the YAML list
# after it (every line of which starts with "- " or two spaces). Only this is replaced;
# every instruction around it stays as Home Assistant wrote it.
_ENTITY_LISTING = re.compile(r"^Static Context: [^\n]*\n(?:(?:- |  )[^\n]*(?:\n|$))*", re.MULTILINE)


def entity_listing(system_prompt: str) -> str:
    """The entity listing inside Home Assistant's prompt ("" when it has none)."""
    found = _ENTITY_LISTING.search(system_prompt)
    return found.group() if found else ""


def compact_system_prompt(hass: HomeAssistant, system_prompt: str, assistant: str) -> str:
    """The system prompt with only the entity listing replaced by the home summary.

    Home Assistant's instructions (how to lock and unlock, when to ask for an area, the
    live-context guidance) stay: small models need them most. A prompt without a listing
    (nothing exposed, no API) is left as it is.
    """
    listing = entity_listing(system_prompt)
    if not listing:
        return system_prompt
    summary = COMPACT_INTRO.format(summary=home_summary(hass, assistant) or "nothing exposed")
    ending = "\n" if listing.endswith("\n") else ""
    # The counts are no listing to answer from: whether a device exists is found the same
    # way as its name; its current state still comes from the live-context tool alone.
    prompt = system_prompt.replace(EXISTENCE, COMPACT_EXISTENCE, 1)
    return prompt.replace(listing, summary + ending, 1)


# Home Assistant's clock line (llm.DATE_TIME_PROMPT as it renders), which it adds to the
# prompt when no date/time tool is offered. A contract test renders the version's own
# template against this pattern.
_CLOCK_LINE = re.compile(
    r"^Current time is \d{2}:\d{2}:\d{2}\. Today's date is \d{4}-\d{2}-\d{2}\.[ \t]*$\n?",
    re.MULTILINE,
)


def split_clock(system_prompt: str) -> tuple[str, str]:
    """Home Assistant's prompt without its clock line, and the clock line ("" if none).

    The clock changes every second; in the system message it would make every request
    read the whole prompt and every tool again. It goes into the turn's context note,
    after the history, instead (agent/graph/prompts.py).
    """
    found = list(_CLOCK_LINE.finditer(system_prompt))
    if not found:
        return system_prompt, ""
    last = found[-1]
    rest = system_prompt[: last.start()] + system_prompt[last.end() :]
    return rest.rstrip("\n") if last.end() == len(system_prompt) else rest, last.group().strip()
