"""A thread belongs to whoever opened it: agent, conversation id and party (device, user).

Every case asserts on what reached the fake model server: a second party's request
must never carry the first party's words, tool calls, tool results or memories, unless
the rule says the two turns are one conversation (the same party, or the same satellite
continuing within the "continue recent" window).
"""

from __future__ import annotations

import asyncio
from contextlib import closing
from dataclasses import dataclass
import itertools
import json
from pathlib import Path
import sqlite3
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import (
    MockConfigEntry,
    MockUser,
    async_test_home_assistant,
)

from custom_components.langgraph_conversation.const import (
    CONF_CONTINUE_TEXT,
    DOMAIN,
    SUBENTRY_CONVERSATION,
)
from fakes import FakeOpenAIServer, ToolCall
from homeassistant import loader
from homeassistant.components import conversation
from homeassistant.config_entries import ConfigSubentryData
from homeassistant.core import Context, HomeAssistant
from homeassistant.setup import async_setup_component

from ...conftest import agent_entity_id
from ...helpers import assist_tool_name


@dataclass(frozen=True, slots=True)
class Who:
    """A party as a test describes it: which user and which satellite, if any."""

    user: str | None  # "a", "b" or None
    device: str | None  # "x", "y" or None

    def __str__(self) -> str:
        return f"user-{self.user or 'none'}/device-{self.device or 'none'}"


PARTIES = [Who(user, device) for user in ("a", "b", None) for device in ("x", "y", None)]
COMBINATIONS = list(itertools.product(PARTIES, PARTIES))


@pytest.fixture
def users(hass_admin_user: MockUser, hass_read_only_user: MockUser) -> dict[str | None, str | None]:
    """Two real Home Assistant users, and nobody."""
    return {"a": hass_admin_user.id, "b": hass_read_only_user.id, None: None}


async def _say(
    hass: HomeAssistant,
    entry: MockConfigEntry,
    users: dict[str | None, str | None],
    who: Who,
    text: str,
    conversation_id: str | None,
) -> conversation.ConversationResult:
    return await conversation.async_converse(
        hass,
        text,
        conversation_id,
        Context(user_id=users[who.user]),
        agent_id=agent_entity_id(hass, entry),
        device_id=f"satellite-{who.device}" if who.device else None,
    )


def _sent(server: FakeOpenAIServer, since: int) -> str:
    """Everything the model server received since request number `since`."""
    return json.dumps(server.requests[since:])


FIRST_PARTY_MARKS = ("FIRST-REQUEST", "FIRST-TOOL-ARGUMENT", "FIRST-ANSWER")


def _carries_first_party(sent: str) -> bool:
    found = {mark for mark in FIRST_PARTY_MARKS if mark in sent}
    # All or nothing: a thread is shared whole, never in parts.
    assert found in (set(), set(FIRST_PARTY_MARKS)), found
    return bool(found)


@pytest.mark.parametrize(
    ("first", "second"), COMBINATIONS, ids=[f"{a}-{b}" for a, b in COMBINATIONS]
)
async def test_who_shares_a_thread(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    users: dict[str | None, str | None],
    first: Who,
    second: Who,
) -> None:
    """Every pair of parties (users a/b/none x satellites x/y/none), on the same
    conversation id, on a new one Home Assistant issues, and on another named one."""
    turn_on = await assist_tool_name(hass, "HassTurnOn")
    openai_server.add_tool_calls([ToolCall(turn_on, {"name": "FIRST-TOOL-ARGUMENT lamp"})])
    openai_server.add_text("FIRST-ANSWER given.")
    await _say(hass, setup_integration, users, first, "FIRST-REQUEST here", "chat-shared")
    tool_result = openai_server.requests[1]["messages"][-1]
    assert tool_result["role"] == "tool"
    assert "FIRST-TOOL-ARGUMENT" in tool_result["content"]  # the result names it too

    # The same conversation id: one thread only for the very same party.
    since = openai_server.request_count
    await _say(hass, setup_integration, users, second, "Second on the same id", "chat-shared")
    assert _carries_first_party(_sent(openai_server, since)) == (first == second)

    # A new conversation Home Assistant issues: continued only from the same satellite
    # (and the same user or none on both), within the window.
    since = openai_server.request_count
    await _say(hass, setup_integration, users, second, "Second, new conversation", None)
    assert _carries_first_party(_sent(openai_server, since)) == (
        first == second and first.device is not None
    )

    # A conversation id the client names itself (not one Home Assistant issued): fresh.
    since = openai_server.request_count
    await _say(hass, setup_integration, users, second, "Second, named", "chat-other")
    assert not _carries_first_party(_sent(openai_server, since))


@pytest.mark.parametrize("agent_overrides", [{CONF_CONTINUE_TEXT: True}])
@pytest.mark.parametrize(
    ("second", "continued"),
    [(Who("a", None), True), (Who("b", None), False), (Who(None, None), False)],
    ids=str,
)
async def test_text_clients_continue_only_when_the_agent_says_so(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    users: dict[str | None, str | None],
    second: Who,
    continued: bool,
) -> None:
    """With the option on, a user's new chat conversation continues their own, only."""
    openai_server.add_tool_calls(
        [ToolCall(await assist_tool_name(hass, "HassTurnOn"), {"name": "FIRST-TOOL-ARGUMENT"})]
    )
    openai_server.add_text("FIRST-ANSWER given.")
    await _say(hass, setup_integration, users, Who("a", None), "FIRST-REQUEST", None)
    since = openai_server.request_count
    await _say(hass, setup_integration, users, second, "A new chat", None)
    assert _carries_first_party(_sent(openai_server, since)) == continued


async def test_another_user_never_sees_recalled_memories(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    users: dict[str | None, str | None],
) -> None:
    """User a's memory, recalled by a tool in a's conversation, never reaches user b,
    who sends the same conversation id."""
    await hass.services.async_call(
        DOMAIN,
        "add_memory",
        {"text": "My passport number is PASSPORT-4711"},
        blocking=True,
        context=Context(user_id=users["a"]),
    )
    openai_server.add_tool_calls([ToolCall("memory", {"action": "recall", "text": "passport"})])
    openai_server.add_text("It is on file.")
    await _say(hass, setup_integration, users, Who("a", None), "My passport number?", "family")
    assert "PASSPORT-4711" in _sent(openai_server, 0)

    since = openai_server.request_count
    await _say(hass, setup_integration, users, Who("b", None), "What was said here?", "family")
    assert "PASSPORT-4711" not in _sent(openai_server, since)
    assert "My passport number?" not in _sent(openai_server, since)


async def test_local_turns_of_another_party_are_not_folded_in(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    users: dict[str | None, str | None],
) -> None:
    """What Home Assistant's chat log holds of a conversation another party used (a
    command handled by another agent) is folded into that party's thread, not ours."""
    agent = agent_entity_id(hass, setup_integration)
    await _say(hass, setup_integration, users, Who("a", None), "Hello from a", "shared-log")
    # Another agent (Home Assistant's own) answers a's next request in the same log.
    await conversation.async_converse(
        hass,
        "what time is it FOLDED-MARK",
        "shared-log",
        Context(user_id=users["a"]),
        agent_id=conversation.HOME_ASSISTANT_AGENT,
    )
    since = openai_server.request_count
    await _say(hass, setup_integration, users, Who("b", None), "Hi from b", "shared-log")
    assert "FOLDED-MARK" not in _sent(openai_server, since)
    # a's own next turn still learns what happened in between.
    since = openai_server.request_count
    await conversation.async_converse(
        hass, "And a again", "shared-log", Context(user_id=users["a"]), agent_id=agent
    )
    assert "Hello from a" in _sent(openai_server, since)


async def _second_instance_entry(hass: HomeAssistant, first: MockConfigEntry) -> MockConfigEntry:
    """The same entry and agent (same ids) in another Home Assistant."""
    hass.data.pop(loader.DATA_CUSTOM_COMPONENTS, None)  # find our integration again
    for component in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, component, {})
    subentry = next(iter(first.subentries.values()))
    entry = MockConfigEntry(
        domain=DOMAIN,
        entry_id=first.entry_id,
        title=first.title,
        data=dict(first.data),
        subentries_data=[
            ConfigSubentryData(
                data=dict(subentry.data),
                subentry_id=subentry.subentry_id,
                subentry_type=SUBENTRY_CONVERSATION,
                title=subentry.title,
                unique_id=None,
            )
        ],
    )
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    return entry


SATELLITE_X = Who(None, "x")
SATELLITE_Y = Who(None, "y")
NOBODY: dict[str | None, str | None] = {None: None}


# Home Assistant's chat session cleanup timer of the stopped instance stays behind.
@pytest.mark.parametrize("expected_lingering_timers", [True])
async def test_satellite_links_survive_reload_and_restart(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A satellite's new conversations continue its thread after a reload of the entry,
    and a linked conversation continues after Home Assistant restarts (with the new
    conversation ids Home Assistant issues then)."""
    first = await _say(hass, setup_integration, NOBODY, SATELLITE_X, "FIRST-REQUEST", None)
    assert await hass.config_entries.async_reload(setup_integration.entry_id)
    await hass.async_block_till_done()

    second = await _say(hass, setup_integration, NOBODY, SATELLITE_X, "SECOND-REQUEST", None)
    assert second.conversation_id != first.conversation_id
    assert "FIRST-REQUEST" in _sent(openai_server, openai_server.request_count - 1)
    await _say(hass, setup_integration, NOBODY, SATELLITE_Y, "Other satellite", None)
    assert "FIRST-REQUEST" not in _sent(openai_server, openai_server.request_count - 1)

    await hass.async_stop()
    async with async_test_home_assistant(config_dir=hass.config.config_dir) as restarted:
        entry = await _second_instance_entry(restarted, setup_integration)
        # The satellite sends the id of its linked conversation; Home Assistant no longer
        # knows it and issues a new one.
        third = await _say(
            restarted, entry, NOBODY, SATELLITE_X, "THIRD-REQUEST", second.conversation_id
        )
        assert third.conversation_id != second.conversation_id
        sent = _sent(openai_server, openai_server.request_count - 1)
        assert "FIRST-REQUEST" in sent
        assert "SECOND-REQUEST" in sent
        # The other satellite, sending that same id, still gets a thread of its own.
        await _say(restarted, entry, NOBODY, SATELLITE_Y, "Y again", second.conversation_id)
        assert "FIRST-REQUEST" not in _sent(openai_server, openai_server.request_count - 1)
        await restarted.async_stop()


def _links(path: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(
            "SELECT conversation_id, thread_id FROM conversation_links"
        ).fetchall()


async def test_actions_follow_the_links(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
) -> None:
    """export_thread and clear_thread find a linked conversation as its turns do; clearing
    removes the thread with its links, and the satellite then starts fresh."""
    agent = agent_entity_id(hass, setup_integration)
    first = await _say(hass, setup_integration, NOBODY, SATELLITE_X, "FIRST-REQUEST", None)
    second = await _say(hass, setup_integration, NOBODY, SATELLITE_X, "SECOND-REQUEST", None)
    assert second.conversation_id != first.conversation_id
    data = {
        "agent": agent,
        "conversation_id": second.conversation_id,
        "device_id": "satellite-x",
    }

    async def export(data: dict[str, Any]) -> list[str]:
        response = await hass.services.async_call(
            DOMAIN,
            "export_thread",
            data,
            blocking=True,
            context=Context(user_id=hass_admin_user.id),
            return_response=True,
        )
        return [message["content"] for message in response["messages"]]

    exported = await export(data)
    assert exported[0] == "FIRST-REQUEST"
    assert "SECOND-REQUEST" in exported
    # The same id seen from another satellite, or by the caller itself: nothing.
    assert await export({**data, "device_id": "satellite-y"}) == []
    assert await export({"agent": agent, "conversation_id": second.conversation_id}) == []

    path = Path(hass.config.path(DOMAIN, "threads.db"))
    assert len(await hass.async_add_executor_job(_links, path)) == 2
    await hass.services.async_call(
        DOMAIN, "clear_thread", data, blocking=True, context=Context(user_id=hass_admin_user.id)
    )
    assert await export(data) == []
    assert await hass.async_add_executor_job(_links, path) == []

    await _say(hass, setup_integration, NOBODY, SATELLITE_X, "After clearing", None)
    assert "FIRST-REQUEST" not in _sent(openai_server, openai_server.request_count - 1)


async def test_different_conversations_do_not_wait_for_each_other(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    users: dict[str | None, str | None],
) -> None:
    """One user's second chat conversation finishes while the first one's slow answer is
    still on its way: they are two threads, not one waiting for the other."""
    openai_server.add_text("Slow answer.", first_byte_delay=1.5)
    openai_server.add_text("Quick answer.")
    order: list[str] = []

    async def slow() -> None:
        await _say(hass, setup_integration, users, Who("a", None), "Slow one", None)
        order.append("slow")

    slow_turn = hass.async_create_task(slow())
    await openai_server.wait_for_requests(1)
    await _say(hass, setup_integration, users, Who("a", None), "Quick one", None)
    order.append("quick")
    await slow_turn
    assert order == ["quick", "slow"]
    assert "Slow one" not in _sent(openai_server, 1)


async def test_twenty_conversations_of_one_person_run_at_once(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    users: dict[str | None, str | None],
) -> None:
    """20 new chat conversations of one user at once: all 20 requests reach the model
    before the first answer is done (none waits for another's thread), and each request
    holds only its own conversation."""
    openai_server.first_byte_delay = 3.0
    requests_when_first_done: list[int] = []

    async def one(number: int) -> None:
        await _say(hass, setup_integration, users, Who("a", None), f"Conversation {number}", None)
        requests_when_first_done.append(openai_server.request_count)

    await asyncio.gather(*(one(number) for number in range(20)))
    assert requests_when_first_done[0] == 20
    for request in openai_server.requests:
        assert [m["content"] for m in request["messages"] if m["role"] == "user"] in (
            [[f"Conversation {n}"] for n in range(20)]
        )
