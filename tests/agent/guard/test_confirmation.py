"""Critical actions wait for the user's yes; anything else cancels them."""

from __future__ import annotations

import json

from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service

from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import Context, HomeAssistant

from ...conftest import agent_entity_id
from ...helpers import add_light, assist_tool_name, messages_of, text_of

QUESTION = "To be safe I need your yes first: do you want me to unlock Front Door?"


def _add_lock(hass: HomeAssistant) -> None:
    hass.states.async_set("lock.front_door", "locked", {"friendly_name": "Front Door"})
    async_expose_entity(hass, conversation.DOMAIN, "lock.front_door", True)


def _add_garage_door(hass: HomeAssistant, name: str) -> None:
    hass.states.async_set(
        "cover.garage", "closed", {"friendly_name": name, "device_class": "garage"}
    )
    async_expose_entity(hass, conversation.DOMAIN, "cover.garage", True)


async def _ask(hass: HomeAssistant, entry: MockConfigEntry, text: str, conversation_id: str | None):
    return await conversation.async_converse(
        hass, text, conversation_id, Context(), agent_id=agent_entity_id(hass, entry)
    )


async def test_unlock_waits_for_yes(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Unlocking is asked about first, and happens after "yes"."""
    _add_lock(hass)
    unlock = async_mock_service(hass, "lock", "unlock")
    tool = await assist_tool_name(hass, "HassTurnOff")
    openai_server.add_tool_calls([ToolCall(tool, {"name": "Front Door"})])

    asked = await _ask(hass, setup_integration, "Unlock the front door", None)
    assert asked.response.speech["plain"]["speech"] == QUESTION
    assert asked.continue_conversation is True
    assert unlock == []
    assert openai_server.request_count == 1

    openai_server.add_text("The front door is unlocked.")
    done = await _ask(hass, setup_integration, "Yes, please.", asked.conversation_id)
    assert done.response.speech["plain"]["speech"] == "The front door is unlocked."
    assert [call.data["entity_id"] for call in unlock] == [["lock.front_door"]]
    # The model saw its tool call answered with what was done after the yes.
    result = json.loads(text_of(messages_of(openai_server.requests[1], "tool")[0]))
    assert result["done"] == ["unlock Front Door"]


async def test_anything_else_cancels(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A reply other than yes cancels: nothing happens, the model is told why."""
    _add_lock(hass)
    unlock = async_mock_service(hass, "lock", "unlock")
    openai_server.add_tool_calls(
        [ToolCall(await assist_tool_name(hass, "HassTurnOff"), {"name": "Front Door"})]
    )
    asked = await _ask(hass, setup_integration, "Unlock the front door", None)
    openai_server.add_text("Okay, I left it locked.")
    done = await _ask(hass, setup_integration, "No, wait", asked.conversation_id)
    assert done.response.speech["plain"]["speech"] == "Okay, I left it locked."
    assert unlock == []
    assert hass.states.get("lock.front_door").state == "locked"
    result = json.loads(text_of(messages_of(openai_server.requests[1], "tool")[0]))
    assert result["error"] == "not_confirmed"
    # The reply is then handled as the request it is: the model reads it.
    assert text_of(messages_of(openai_server.requests[1], "user")[-1]) == "No, wait"
    # The conversation goes on normally afterwards.
    openai_server.add_text("Sure.")
    again = await _ask(hass, setup_integration, "Thanks", asked.conversation_id)
    assert again.response.speech["plain"]["speech"] == "Sure."


async def test_safe_actions_need_no_confirmation(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Locking and switching lights act at once, also next to a declined critical call."""
    _add_lock(hass)
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    lock = async_mock_service(hass, "lock", "lock")
    turn_on = async_mock_service(hass, "light", "turn_on")
    openai_server.add_tool_calls(
        [
            ToolCall(await assist_tool_name(hass, "HassTurnOn"), {"name": "Front Door"}),
            ToolCall(await assist_tool_name(hass, "HassTurnOn"), {"name": "Kitchen Light"}),
        ]
    )
    openai_server.add_text("Locked, and the light is on.")
    done = await _ask(hass, setup_integration, "Lock up and light the kitchen", None)
    assert done.response.speech["plain"]["speech"] == "Locked, and the light is on."
    assert len(lock) == 1
    assert len(turn_on) == 1


async def test_garage_door_opening_is_critical(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Opening a cover of device class garage asks first."""
    _add_garage_door(hass, "Garage Door")
    open_cover = async_mock_service(hass, "cover", "open_cover")
    openai_server.add_tool_calls(
        [ToolCall(await assist_tool_name(hass, "HassTurnOn"), {"name": "Garage Door"})]
    )
    asked = await _ask(hass, setup_integration, "Open the garage", None)
    assert "open Garage Door" in asked.response.speech["plain"]["speech"]
    assert open_cover == []


async def test_a_domain_outside_the_critical_ones_is_not_asked(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A light named like the garage door, asked for as a light, switches at once."""
    _add_garage_door(hass, "Garage")
    add_light(hass, "garage", "Garage", exposed=True)
    turn_on = async_mock_service(hass, "light", "turn_on")
    open_cover = async_mock_service(hass, "cover", "open_cover")
    tool = await assist_tool_name(hass, "HassTurnOn")
    openai_server.add_tool_calls([ToolCall(tool, {"name": "Garage", "domain": ["light"]})])
    openai_server.add_text("The garage light is on.")
    done = await _ask(hass, setup_integration, "Garage light on", None)
    assert done.response.speech["plain"]["speech"] == "The garage light is on."
    assert len(turn_on) == 1
    assert open_cover == []

    # Without the domain the name is ambiguous, and Home Assistant acts on neither: no
    # question about an action that would not run.
    openai_server.add_tool_calls([ToolCall(tool, {"name": "Garage"})])
    openai_server.add_text("Which one, the light or the door?")
    asked = await _ask(hass, setup_integration, "Garage on", None)
    assert asked.response.speech["plain"]["speech"] == "Which one, the light or the door?"
    assert open_cover == []
