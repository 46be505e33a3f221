"""Who is talking, in Home Assistant's terms: the party a thread belongs to.

The rule itself is in agent/memory/threads.py; this module reads a turn's or an action's
Home Assistant input into it: the device (a voice satellite) and the signed-in user,
and whether Home Assistant issued the conversation id for this very turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from homeassistant.components import conversation
from homeassistant.core import Context
from homeassistant.util.ulid import ulid_to_bytes

from .agent.guard import storable_key
from .agent.memory import Party, ThreadRequest, continue_window
from .profile import AgentProfile


def party_of_turn(user_input: conversation.ConversationInput) -> Party:
    """The device (or satellite) and the user of a turn, whichever it has."""
    device = user_input.device_id or getattr(user_input, "satellite_id", None)
    return Party(device=device or None, user=user_input.context.user_id or None)


def party_of_action(context: Context, data: Mapping[str, Any]) -> Party:
    """Whose conversation an action addresses: the caller's own (their user, no device),
    unless it names a device or user (`device_id`, `user_id`) to address theirs."""
    device, user = data.get("device_id"), data.get("user_id")
    if device or user:
        return Party(device=device or None, user=user or None)
    return Party(user=context.user_id or None)


def issued_now(chat_log: conversation.ChatLog) -> bool:
    """Whether Home Assistant issued the conversation id for this turn.

    Home Assistant keeps an id it knows, hands out a new ULID when none is given or
    the given one expired, and keeps an unknown id that is not a ULID (the client chose
    it, so the client named the conversation). A ULID it knows has earlier content in
    its chat log; one issued now has only the system prompt and this request.
    """
    try:
        ulid_to_bytes(chat_log.conversation_id)
    except ValueError:
        return False
    return len(chat_log.content) <= 2


def thread_request(
    profile: AgentProfile,
    user_input: conversation.ConversationInput,
    chat_log: conversation.ChatLog,
) -> ThreadRequest:
    """What a turn of the agent of `profile` asks of the thread directory (see
    agent/memory/threads.py)."""
    party = party_of_turn(user_input)
    sent = user_input.conversation_id
    issued = issued_now(chat_log)
    # Ids are stored: invalid Unicode is written as escapes (agent/guard/text.py).
    return ThreadRequest(
        agent_id=profile.agent_id,
        conversation_id=storable_key(chat_log.conversation_id),
        party=party,
        replaced_id=storable_key(sent) if sent and sent != chat_log.conversation_id else None,
        window=continue_window(
            party,
            issued_now=issued,
            minutes=profile.continue_minutes,
            text_clients=profile.continue_text,
        ),
        issued_now=issued,
    )
