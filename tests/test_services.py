"""Memory and conversation actions, with their permission rules."""

from __future__ import annotations

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, MockUser

from custom_components.langgraph_conversation.const import DOMAIN
from fakes import FakeOpenAIServer
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.exceptions import ServiceValidationError, Unauthorized

from .conftest import agent_entity_id


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
