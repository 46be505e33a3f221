"""A repair issue when Ollama cut an agent's request to its context window.

The agent notices the cut (agent/graph/window.py: Ollama read clearly fewer prompt tokens than
were sent) and reports it as an event; this turn observer raises the issue, one per
agent, naming the option to raise. It is removed when the agent is set up again (its
options were changed, or Home Assistant restarted).
"""

from __future__ import annotations

from homeassistant.core import HomeAssistant
from homeassistant.helpers import issue_registry as ir

from .agent.events import PromptTruncated
from .agent.hooks import TurnHooks
from .const import DOMAIN

ISSUE_PREFIX = "context_window_too_small"


def issue_id(agent_id: str) -> str:
    """The repair issue of one agent (its subentry id)."""
    return f"{ISSUE_PREFIX}_{agent_id}"


class WindowIssueReporter(TurnHooks):
    """Raises the agent's repair issue when a request of the turn was cut."""

    def __init__(self, hass: HomeAssistant, agent_id: str, agent_name: str) -> None:
        """Report for one agent (subentry id and name)."""
        self._hass = hass
        self._agent_id = agent_id
        self._agent_name = agent_name

    def on_prompt_truncated(self, truncated: PromptTruncated) -> None:
        """Ollama cut a request: ask the user to raise the window."""
        ir.async_create_issue(
            self._hass,
            DOMAIN,
            issue_id(self._agent_id),
            is_fixable=False,
            severity=ir.IssueSeverity.WARNING,
            translation_key=ISSUE_PREFIX,
            translation_placeholders={
                "agent": self._agent_name,
                "window": str(truncated.window),
                "sent": str(truncated.sent),
                "evaluated": str(truncated.evaluated),
            },
        )


def clear_window_issue(hass: HomeAssistant, agent_id: str) -> None:
    """The agent was set up again: its window may have changed."""
    ir.async_delete_issue(hass, DOMAIN, issue_id(agent_id))
