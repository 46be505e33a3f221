"""Memory and conversation actions, with their permission rules."""

from __future__ import annotations

from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, MockUser

from custom_components.langgraph_conversation.const import (
    CONF_AGENT_KIND,
    CONF_CHECKPOINTS_KEPT,
    DOMAIN,
)
from fakes import FakeOpenAIServer
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.exceptions import HomeAssistantError, ServiceValidationError, Unauthorized
from homeassistant.setup import async_setup_component

from .conftest import add_test_entry, agent_entity_id


async def _call(
    hass: HomeAssistant, service: str, data: dict, user: MockUser | None, response: bool = False
):
    return await hass.services.async_call(
        DOMAIN,
        service,
        data,
        blocking=True,
        context=Context(user_id=user.id if user else None),
        return_response=response,
    )


async def test_people_manage_their_own_memories(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    hass_admin_user: MockUser,
    hass_read_only_user: MockUser,
) -> None:
    """Own memories for anyone; someone else's only for administrators."""
    user = hass_read_only_user
    added = await _call(hass, "add_memory", {"text": "Likes jazz"}, user, response=True)
    listed = await _call(hass, "list_memories", {}, user, response=True)
    assert [m["text"] for m in listed["memories"]] == ["Likes jazz"]
    assert listed["memories"][0]["id"] == added["id"]

    with pytest.raises(Unauthorized):
        await _call(hass, "list_memories", {"user_id": hass_admin_user.id}, user, response=True)
    as_admin = await _call(
        hass, "list_memories", {"user_id": user.id}, hass_admin_user, response=True
    )
    assert [m["text"] for m in as_admin["memories"]] == ["Likes jazz"]
    # The admin's own list does not hold it.
    own = await _call(hass, "list_memories", {}, hass_admin_user, response=True)
    assert own["memories"] == []

    with pytest.raises(ServiceValidationError):
        await _call(hass, "delete_memory", {"memory_id": "nope"}, user)
    await _call(hass, "delete_memory", {"memory_id": added["id"]}, user)
    assert (await _call(hass, "list_memories", {}, user, response=True))["memories"] == []


async def test_household_memories(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    hass_admin_user: MockUser,
    hass_read_only_user: MockUser,
) -> None:
    """Anyone adds household facts; clearing them all needs an administrator."""
    await _call(
        hass,
        "add_memory",
        {"text": "Bins go out on Tuesday", "household": True},
        hass_read_only_user,
    )
    await _call(hass, "add_memory", {"text": "Guests on Friday", "household": True}, None)
    listed = await _call(
        hass, "list_memories", {"household": True}, hass_read_only_user, response=True
    )
    assert sorted(m["text"] for m in listed["memories"]) == [
        "Bins go out on Tuesday",
        "Guests on Friday",
    ]
    with pytest.raises(Unauthorized):
        await _call(hass, "clear_memories", {"household": True}, hass_read_only_user)
    cleared = await _call(
        hass, "clear_memories", {"household": True}, hass_admin_user, response=True
    )
    assert cleared == {"deleted": 2}
    with pytest.raises(ServiceValidationError):
        await _call(hass, "list_memories", {}, None, response=True)  # whose?


async def test_export_and_clear_a_conversation(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    hass_read_only_user: MockUser,
) -> None:
    """Administrators export and clear what an agent keeps of a conversation: their own,
    as their turns find it."""
    agent = agent_entity_id(hass, setup_integration)
    openai_server.add_text("Hello Ada.")
    result = await conversation.async_converse(
        hass, "I am Ada", None, Context(user_id=hass_admin_user.id), agent_id=agent
    )
    data = {"agent": agent, "conversation_id": result.conversation_id}

    with pytest.raises(Unauthorized):
        await _call(hass, "export_thread", data, hass_read_only_user, response=True)
    exported = await _call(hass, "export_thread", data, hass_admin_user, response=True)
    assert exported["messages"] == [
        {"role": "human", "content": "I am Ada"},
        {"role": "ai", "content": "Hello Ada."},
    ]
    # Another caller (an automation, without a user) addresses its own thread of that id.
    assert (await _call(hass, "export_thread", data, None, response=True))["messages"] == []
    # ...or the one of the user it names.
    named = {**data, "user_id": hass_admin_user.id}
    assert (await _call(hass, "export_thread", named, None, response=True))["messages"]
    await _call(hass, "clear_thread", data, hass_admin_user)
    assert (await _call(hass, "export_thread", named, None, response=True))["messages"] == []
    with pytest.raises(ServiceValidationError):
        await _call(
            hass, "export_thread", {**data, "agent": "conversation.nobody"}, None, response=True
        )


# Stored options a hand edit broke (no number of checkpoints): the entry loads, and its
# stack's build fails for real when the shared storage takes its settings.
BROKEN_OPTIONS = {CONF_CHECKPOINTS_KEPT: "lots"}


def _build_failures(caplog: pytest.LogCaptureFixture) -> int:
    return sum(r.getMessage() == "Building the agent for Broken box failed" for r in caplog.records)


async def _add_broken_entry(
    hass: HomeAssistant, server: FakeOpenAIServer, agent_options: dict[str, Any]
) -> MockConfigEntry:
    entry = add_test_entry(hass, server.api_base, agent_options, options=BROKEN_OPTIONS)
    hass.config_entries.async_update_entry(entry, title="Broken box")
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    assert not entry.runtime_data.built
    return entry


@pytest.mark.parametrize("agent_overrides", [{CONF_AGENT_KIND: "rag"}])
async def test_an_entry_whose_build_failed_fails_only_the_actions_on_it(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    agent_options: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two entries (agents with documents), one whose build failed: every action works for
    the other entry and the shared storage; an action on the broken entry's agent fails
    with a sentence naming that entry, and tries its build again."""
    healthy = agent_entity_id(hass, setup_integration)
    broken_entry = await _add_broken_entry(hass, openai_server, agent_options)
    broken = agent_entity_id(hass, broken_entry)
    assert setup_integration.runtime_data.built
    assert _build_failures(caplog) == 1

    # The shared storage's actions, which span every entry, leave the broken one out.
    household = {"household": True}
    added = await _call(hass, "add_memory", {"text": "Tea at five", **household}, None, True)
    listed = await _call(hass, "list_memories", household, None, response=True)
    assert [m["text"] for m in listed["memories"]] == ["Tea at five"]
    await _call(hass, "delete_memory", {"memory_id": added["id"], **household}, None)
    assert await _call(hass, "clear_memories", household, None, response=True) == {"deleted": 0}
    with pytest.raises(ServiceValidationError) as caught:
        await _call(hass, "migrate_storage", {"direction": "to_sqlite"}, None, response=True)
    assert caught.value.translation_key == "postgres_not_chosen"
    # Every agent's documents: the healthy agent's are read, the broken one is named.
    everyone = await _call(hass, "reindex_knowledge", {}, None, response=True)
    assert everyone == {
        "agents": {healthy: {"files": 0, "chunks": 0, "skipped": []}},
        "not_started": [broken],
    }
    failures = _build_failures(caplog)
    assert failures > 1  # each of those tried the broken entry's build again

    # The actions on one agent: the healthy one's work...
    thread = {"conversation_id": "kitchen"}
    assert await _call(
        hass, "export_thread", {"agent": healthy, **thread}, None, response=True
    ) == {"messages": []}
    await _call(hass, "clear_thread", {"agent": healthy, **thread}, None)
    with pytest.raises(ServiceValidationError) as caught:
        await _call(hass, "rate_answer", {"agent": healthy, "rating": "up", **thread}, None)
    assert caught.value.translation_key == "answer_not_found"
    assert list(
        (await _call(hass, "reindex_knowledge", {"agent": healthy}, None, response=True))["agents"]
    ) == [healthy]
    # ...and the broken one's name its entry, building it again each time.
    on_broken = [
        ("export_thread", {"agent": broken, **thread}, True),
        ("clear_thread", {"agent": broken, **thread}, False),
        ("rate_answer", {"agent": broken, "rating": "down", **thread}, False),
        ("reindex_knowledge", {"agent": broken}, True),
    ]
    for service, data, response in on_broken:
        with pytest.raises(HomeAssistantError) as caught:
            await _call(hass, service, data, None, response=response)
        assert str(caught.value) == (
            "The LangGraph Conversation entry Broken box could not start. See the log for"
            " the cause, or reload the entry"
        ), service
        assert _build_failures(caplog) == failures + 1
        failures += 1
    assert openai_server.request_count == 0


async def test_memories_say_so_when_no_entry_could_start(
    hass: HomeAssistant, openai_server: FakeOpenAIServer, agent_options: dict[str, Any]
) -> None:
    """The only entry's build failed: nothing opened the storage, and a memory action says
    that the agent could not start (not that memory is unavailable)."""
    assert await async_setup_component(hass, "homeassistant", {})
    await _add_broken_entry(hass, openai_server, agent_options)
    with pytest.raises(HomeAssistantError) as caught:
        await _call(hass, "list_memories", {"household": True}, None, response=True)
    assert caught.value.translation_key == "stack_failed"
    assert str(caught.value) == (
        "LangGraph Conversation could not start. See the log for the cause, or reload the"
        " integration"
    )
