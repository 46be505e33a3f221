"""Conversations through Home Assistant's real entry points, against the fake model."""

from __future__ import annotations

import json

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service

from custom_components.langgraph_conversation.const import CONF_PROMPT
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import intent

from .conftest import agent_entity_id
from .helpers import add_light, assist_tool_name, messages_of, open_chat_session, text_of


async def test_text_turn(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A question gets the model's streamed answer as speech."""
    openai_server.add_text("The answer is forty-two.")
    result = await conversation.async_converse(
        hass,
        "What is the answer?",
        None,
        Context(),
        agent_id=agent_entity_id(hass, setup_integration),
    )
    assert result.response.response_type == intent.IntentResponseType.ACTION_DONE
    assert result.response.speech["plain"]["speech"] == "The answer is forty-two."
    assert result.continue_conversation is False
    request = openai_server.requests[0]
    assert request["stream"] is True
    assert text_of(messages_of(request, "user")[-1]) == "What is the answer?"
    # Home Assistant's prompt (instructions + exposed entities) is the system message.
    assert "Home Assistant" in text_of(messages_of(request, "system")[0])


async def test_question_continues_conversation(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """An answer that asks something keeps a satellite listening."""
    openai_server.add_text("Which room do you mean?")
    result = await conversation.async_converse(
        hass,
        "Turn on the light",
        None,
        Context(),
        agent_id=agent_entity_id(hass, setup_integration),
    )
    assert result.continue_conversation is True


async def test_multi_turn_context(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Within one conversation id the model sees the earlier turns."""
    agent_id = agent_entity_id(hass, setup_integration)
    openai_server.add_text("Nice to meet you, Ada.")
    first = await conversation.async_converse(
        hass, "My name is Ada.", None, Context(), agent_id=agent_id
    )
    openai_server.add_text("Your name is Ada.")
    second = await conversation.async_converse(
        hass, "What is my name?", first.conversation_id, Context(), agent_id=agent_id
    )
    assert second.conversation_id == first.conversation_id
    seen = [
        (m["role"], text_of(m))
        for m in openai_server.requests[1]["messages"]
        if m["role"] != "system"
    ]
    assert seen == [
        ("user", "My name is Ada."),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "What is my name?"),
    ]
    # A different conversation starts empty.
    openai_server.add_text("I don't know yet.")
    await conversation.async_converse(hass, "What is my name?", None, Context(), agent_id=agent_id)
    users = messages_of(openai_server.requests[2], "user")
    assert [text_of(m) for m in users] == ["What is my name?"]


async def test_tool_turn_turns_on_exposed_light(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The model's tool call reaches Home Assistant and the answer reports it."""
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    turn_on = async_mock_service(hass, "light", "turn_on")
    tool = await assist_tool_name(hass, "HassTurnOn")
    openai_server.add_tool_calls([ToolCall(tool, {"name": "Kitchen Light"})])
    openai_server.add_text("The kitchen light is on.")

    result = await conversation.async_converse(
        hass,
        "Turn on the kitchen light",
        None,
        Context(),
        agent_id=agent_entity_id(hass, setup_integration),
    )

    assert [call.data["entity_id"] for call in turn_on] == [["light.kitchen"]]
    assert result.response.speech["plain"]["speech"] == "The kitchen light is on."
    assert result.response.response_type == intent.IntentResponseType.ACTION_DONE
    # The first request offered the tool; the second carried its result back.
    offered = [t["function"]["name"] for t in openai_server.requests[0]["tools"]]
    assert tool in offered
    tool_messages = messages_of(openai_server.requests[1], "tool")
    assert len(tool_messages) == 1
    assert "light.kitchen" in text_of(tool_messages[0]) or "Kitchen" in text_of(tool_messages[0])


async def test_unexposed_light_is_not_touched(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Asking for an entity that is not exposed to Assist changes nothing."""
    add_light(hass, "garage", "Garage Light", exposed=False)
    turn_on = async_mock_service(hass, "light", "turn_on")
    tool = await assist_tool_name(hass, "HassTurnOn")
    openai_server.add_tool_calls([ToolCall(tool, {"name": "Garage Light"})])
    openai_server.add_text("I can't control that light.")

    result = await conversation.async_converse(
        hass,
        "Turn on the garage light",
        None,
        Context(),
        agent_id=agent_entity_id(hass, setup_integration),
    )

    assert turn_on == []
    assert hass.states.get("light.garage").state == "off"
    # The entity is not even in the prompt, and the tool call came back as an error.
    system = text_of(messages_of(openai_server.requests[0], "system")[0])
    assert "Garage Light" not in system
    tool_result = json.loads(text_of(messages_of(openai_server.requests[1], "tool")[0]))
    assert "error" in tool_result
    assert result.response.speech["plain"]["speech"] == "I can't control that light."


async def test_parallel_tool_calls_are_recorded_in_chat_log(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Both calls of one message run; the ChatLog shows them as external calls with results."""
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    add_light(hass, "porch", "Porch Light", exposed=True)
    turn_on = async_mock_service(hass, "light", "turn_on")
    tool = await assist_tool_name(hass, "HassTurnOn")
    openai_server.add_tool_calls(
        [ToolCall(tool, {"name": "Kitchen Light"}), ToolCall(tool, {"name": "Porch Light"})],
        text="Turning them on. ",
    )
    openai_server.add_text("Both lights are on.")
    result = await conversation.async_converse(
        hass,
        "Kitchen and porch on",
        None,
        Context(),
        agent_id=agent_entity_id(hass, setup_integration),
    )
    assert sorted(call.data["entity_id"][0] for call in turn_on) == ["light.kitchen", "light.porch"]
    assert result.response.speech["plain"]["speech"] == "Both lights are on."

    with (
        open_chat_session(hass, result.conversation_id) as session,
        conversation.async_get_chat_log(hass, session) as chat_log,
    ):
        content = chat_log.content
    assert [c.role for c in content] == [
        "system",
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "assistant",
    ]
    first = content[2]
    assert first.content == "Turning them on. "
    assert [(c.tool_name, c.tool_args, c.external) for c in first.tool_calls] == [
        (tool, {"name": "Kitchen Light"}, True),
        (tool, {"name": "Porch Light"}, True),
    ]
    assert {c.tool_call_id for c in content[3:5]} == {c.id for c in first.tool_calls}
    for tool_result in content[3:5]:
        data = (
            tool_result.result.data if hasattr(tool_result, "result") else tool_result.tool_result
        )
        assert data["response_type"] == "action_done"
    assert content[5].content == "Both lights are on."
    # Both tool results went back to the model in one follow-up request.
    assert len(messages_of(openai_server.requests[1], "tool")) == 2


async def test_other_agents_turns_are_folded_into_the_thread(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A command Home Assistant handled locally in the same conversation reaches the model."""
    agent_id = agent_entity_id(hass, setup_integration)
    openai_server.add_text("Hi!")
    first = await conversation.async_converse(hass, "Hello", None, Context(), agent_id=agent_id)
    # Home Assistant's own agent answers a command in the same conversation.
    with (
        open_chat_session(hass, first.conversation_id) as session,
        conversation.async_get_chat_log(hass, session) as chat_log,
    ):
        chat_log.async_add_user_content(conversation.UserContent("Turn on the porch light"))
        chat_log.async_add_assistant_content_without_tools(
            conversation.AssistantContent(
                agent_id="conversation.home_assistant", content="Turned on the porch light"
            )
        )
    openai_server.add_text("It is on, as you asked.")
    await conversation.async_converse(
        hass, "Is the porch light on?", first.conversation_id, Context(), agent_id=agent_id
    )
    seen = [
        (m["role"], text_of(m))
        for m in openai_server.requests[-1]["messages"]
        if m["role"] != "system"
    ]
    assert seen == [
        ("user", "Hello"),
        ("assistant", "Hi!"),
        ("user", "Turn on the porch light"),
        ("assistant", "Turned on the porch light"),
        ("user", "Is the porch light on?"),
    ]


@pytest.mark.parametrize("agent_overrides", [{CONF_PROMPT: "Hello {{ states( "}])
async def test_instructions_that_fail_to_render_fail_the_turn_cleanly(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Home Assistant refuses the turn before the agent runs it: the user gets Home
    Assistant's error, the model is not asked, and once the instructions are fixed the
    same conversation goes on from its first turn."""
    agent_id = agent_entity_id(hass, setup_integration)
    result = await conversation.async_converse(
        hass, "What is the answer?", "kept-conversation", Context(), agent_id=agent_id
    )
    assert result.response.response_type == intent.IntentResponseType.ERROR
    assert openai_server.requests == []

    subentry = next(iter(setup_integration.subentries.values()))
    hass.config_entries.async_update_subentry(
        setup_integration, subentry, data={**subentry.data, CONF_PROMPT: "Be brief."}
    )
    await hass.async_block_till_done()
    openai_server.add_text("Forty-two.")
    result = await conversation.async_converse(
        hass, "What is the answer?", "kept-conversation", Context(), agent_id=agent_id
    )
    assert result.response.speech["plain"]["speech"] == "Forty-two."
    assert [text_of(m) for m in messages_of(openai_server.requests[0], "user")] == [
        "What is the answer?"
    ]
