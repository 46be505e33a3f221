"""Assist's media intents reach the model as one tool with an action; a call runs the
intent the action names, through Home Assistant."""

from __future__ import annotations

import json

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service

from custom_components.langgraph_conversation.tools.media_intents import MEDIA_ACTIONS, MEDIA_TOOL
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.components.media_player import MediaPlayerEntityFeature
from homeassistant.core import Context, HomeAssistant
from homeassistant.setup import async_setup_component

from ..conftest import agent_entity_id
from ..helpers import messages_of, text_of

_FEATURES = (
    MediaPlayerEntityFeature.PAUSE
    | MediaPlayerEntityFeature.PLAY
    | MediaPlayerEntityFeature.VOLUME_SET
    | MediaPlayerEntityFeature.VOLUME_STEP
    | MediaPlayerEntityFeature.VOLUME_MUTE
    | MediaPlayerEntityFeature.NEXT_TRACK
    | MediaPlayerEntityFeature.PREVIOUS_TRACK
)


async def _speaker(hass: HomeAssistant) -> None:
    for component in ("homeassistant", "conversation", "intent", "media_player"):
        assert await async_setup_component(hass, component, {})
    hass.states.async_set(
        "media_player.kitchen_speaker",
        "playing",
        {"friendly_name": "Kitchen Speaker", "supported_features": _FEATURES, "volume_level": 0.5},
    )
    async_expose_entity(hass, conversation.DOMAIN, "media_player.kitchen_speaker", True)


async def test_media_intents_are_one_tool_whose_actions_run_the_intents(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """No media intent is offered on its own; pause and set_volume run Home Assistant's
    pause and volume services on the named player."""
    await _speaker(hass)
    paused = async_mock_service(hass, "media_player", "media_pause")
    volume = async_mock_service(hass, "media_player", "volume_set")
    openai_server.add_tool_calls(
        [
            ToolCall(MEDIA_TOOL, {"action": "pause", "name": "Kitchen Speaker"}),
            ToolCall(
                MEDIA_TOOL,
                {"action": "set_volume", "name": "Kitchen Speaker", "volume_level": 30},
            ),
        ]
    )
    openai_server.add_text("Paused, at 30 percent.")
    result = await conversation.async_converse(
        hass,
        "Pause the kitchen speaker and set it to 30",
        None,
        Context(),
        agent_id=agent_entity_id(hass, setup_integration),
    )
    assert result.response.speech["plain"]["speech"] == "Paused, at 30 percent."
    tools = {t["function"]["name"]: t["function"] for t in openai_server.requests[0]["tools"]}
    assert not {name.rsplit("__", 1)[-1] for name in tools} & set(MEDIA_ACTIONS)
    actions = tools[MEDIA_TOOL]["parameters"]["properties"]["action"]["enum"]
    assert {"pause", "resume", "set_volume", "change_volume", "mute", "unmute"} <= set(actions)
    assert [c.data["entity_id"] for c in paused] == ["media_player.kitchen_speaker"]
    assert [c.data["volume_level"] for c in volume] == [0.3]


# The model is untrusted: a made-up action, one of another type, or none at all.
_ODD_ARGUMENTS = [
    {"action": "rewind"},
    {"action": ["pause"]},
    {"action": {"pause": True}},
    {"action": 3},
    {"action": None},
    {"name": "Kitchen Speaker"},
]


@pytest.mark.parametrize("arguments", _ODD_ARGUMENTS, ids=repr)
async def test_an_unknown_action_is_told_to_the_model(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    arguments: dict,
) -> None:
    """An action that names no intent runs nothing; the model reads which there are."""
    await _speaker(hass)
    paused = async_mock_service(hass, "media_player", "media_pause")
    openai_server.add_tool_calls([ToolCall(MEDIA_TOOL, arguments)])
    openai_server.add_text("I cannot rewind.")
    await conversation.async_converse(
        hass, "Rewind", None, Context(), agent_id=agent_entity_id(hass, setup_integration)
    )
    assert paused == []
    answer = text_of(messages_of(openai_server.requests[-1], "tool")[-1])
    assert "pause" in json.dumps(answer)
