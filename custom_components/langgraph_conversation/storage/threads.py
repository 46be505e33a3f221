"""Which LangGraph thread a conversation turn belongs to.

A thread id derives from the agent and Home Assistant's conversation id, so a
conversation continues whenever the client sends the same id again (the chat panel does,
and so can `conversation.process`), across Home Assistant's 5-minute session expiry and
across restarts: the thread itself is in threads.db.

Voice satellites start a new conversation at every wake word. With a "continue recent"
window, a new conversation from the same satellite (or the same user, in the chat panel)
within the window continues the previous thread, so "and tomorrow?" works after a new
wake word. Those links are kept in memory only: they matter for minutes, not across
restarts.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

# Links kept between a conversation id and the thread it continues.
MAX_LINKS = 2000


@dataclass(frozen=True, slots=True)
class _Recent:
    thread_id: str
    last_used: float


def thread_id_for(agent_id: str, conversation_id: str) -> str:
    """The thread of a conversation that continues nothing older."""
    return f"{agent_id}:{conversation_id}"


class ThreadDirectory:
    """Conversation id (and origin) → thread id, for one runtime."""

    def __init__(self) -> None:
        self._links: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._recent: dict[tuple[str, str], _Recent] = {}

    def resolve(
        self,
        agent_id: str,
        conversation_id: str,
        *,
        origin: str | None,
        now: float,
        window: float,
    ) -> str:
        """The thread for this turn; `origin` is the satellite or user, `window` seconds."""
        key = (agent_id, conversation_id)
        thread_id = self._links.get(key)
        if thread_id is None:
            recent = self._recent.get((agent_id, origin)) if origin else None
            if recent is not None and window > 0 and now - recent.last_used <= window:
                thread_id = recent.thread_id
            else:
                thread_id = thread_id_for(agent_id, conversation_id)
        self._links[key] = thread_id
        self._links.move_to_end(key)
        while len(self._links) > MAX_LINKS:
            self._links.popitem(last=False)
        if origin:
            self._recent[(agent_id, origin)] = _Recent(thread_id, now)
        return thread_id
