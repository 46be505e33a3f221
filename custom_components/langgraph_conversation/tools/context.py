"""The compact home context: a short area/domain summary instead of every exposed entity.

Home Assistant's Assist API prompt lists every exposed entity, which costs thousands of
tokens in a large home and overwhelms small local models. With the option on, that list is
replaced by a summary by floor and area, and the agent finds exact names and states with
its entity tools when it needs them.
"""

from __future__ import annotations

from homeassistant.core import HomeAssistant
from homeassistant.helpers import llm

from .entities import home_summary

COMPACT_INTRO = (
    "The home, by area (counts of exposed devices): {summary}\n"
    "This is a summary, not the full list. Before acting on or answering about a "
    "device, use home_find_entities to find its exact name and state, or home_get_state "
    "to read one."
)


def compact_system_prompt(
    hass: HomeAssistant, system_prompt: str, api: llm.APIInstance | None, assistant: str
) -> str:
    """The system prompt with the API's entity listing replaced by the home summary."""
    summary = COMPACT_INTRO.format(summary=home_summary(hass, assistant) or "nothing exposed")
    if api is not None and api.api_prompt and api.api_prompt in system_prompt:
        return system_prompt.replace(api.api_prompt, summary)
    return f"{system_prompt}\n{summary}"
