"""Assist's media intents reach the model as one tool with an action; a call runs the
intent the action names, through Home Assistant."""

from __future__ import annotations

import json

from langchain_core.tools import StructuredTool
import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service

from custom_components.langgraph_conversation.tools.media import PLAY_TOOL
from custom_components.langgraph_conversation.tools.media_intents import (
    INTENT_KEY,
    MEDIA_ACTIONS,
    MEDIA_TOOL,
    grouped_media_intents,
)
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.components.media_player import MediaPlayerEntityFeature
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import floor_registry as fr
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
    # 2026.2 registers the media intents from a platform loaded in the background.
    await hass.async_block_till_done()


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


async def _offered(
    hass: HomeAssistant, entry: MockConfigEntry, server: FakeOpenAIServer
) -> dict[str, dict]:
    """The tools of one turn's first request, by name."""
    server.add_text("Fine.")
    await conversation.async_converse(
        hass, "Hi", None, Context(), agent_id=agent_entity_id(hass, entry)
    )
    return {t["function"]["name"]: t["function"] for t in server.requests[-1]["tools"]}


async def test_the_description_names_each_actions_parameter_and_the_play_tool(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Home Assistant's set-volume intents require their level or step: the one tool says
    which action needs which, that resume continues what was paused, and which tool plays
    something new (ours, offered next to it)."""
    await _speaker(hass)
    tools = await _offered(hass, setup_integration, openai_server)
    description = tools[MEDIA_TOOL]["description"]
    assert "set_volume needs volume_level" in description
    assert "change_volume needs volume_step" in description
    assert "resume continues what was paused" in description
    assert f"play something new use {PLAY_TOOL}" in description
    assert PLAY_TOOL in tools
    assert "continuing what was paused" in tools[PLAY_TOOL]["description"]


def _intent_tool(name: str, required: tuple[str, ...] = ()) -> StructuredTool:
    async def run(**arguments: object) -> dict:
        return {"ran": name, **arguments}

    properties = {"name": {"type": "string"}, **{p: {"type": "integer"} for p in required}}
    return StructuredTool(
        name=f"media_player__{name}",
        metadata={INTENT_KEY: name},
        description=name,
        args_schema={"type": "object", "properties": properties, "required": list(required)},
        coroutine=run,
    )


@pytest.mark.parametrize(
    ("offered", "play_tool", "expected"),
    [
        ((), PLAY_TOOL, f"use {PLAY_TOOL}."),
        (("search_media",), None, "use media_player__search_media."),
        (("HassMediaSearchAndPlay",), PLAY_TOOL, f"use {PLAY_TOOL}."),
        ((), None, "('play the music')."),
    ],
)
def test_play_something_new_goes_to_the_offered_tool(
    offered: tuple[str, ...], play_tool: str | None, expected: str
) -> None:
    """Ours when offered, else Home Assistant's own search (2026.2's search-and-play
    intent, 2026.10's media search), else none named."""
    tools = [_intent_tool("HassMediaPause"), _intent_tool("HassMediaUnpause")]
    tools += [_intent_tool(name) for name in offered]
    (merged,) = [t for t in grouped_media_intents(tools, play_tool) if t.name == MEDIA_TOOL]
    assert merged.description.endswith(expected)


# A call without the parameter its action requires (left out, null or blank).
_MISSING = [
    ({"action": "set_volume", "name": "Kitchen Speaker"}, "volume_level"),
    ({"action": "set_volume", "name": "Kitchen Speaker", "volume_level": None}, "volume_level"),
    ({"action": "set_volume", "volume_level": "  "}, "volume_level"),
    ({"action": "change_volume", "name": "Kitchen Speaker"}, "volume_step"),
    ({"action": "change_volume", "volume_step": ""}, "volume_step"),
]


@pytest.mark.parametrize(("arguments", "missing"), _MISSING, ids=repr)
async def test_a_missing_required_parameter_is_named_and_nothing_runs(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    arguments: dict,
    missing: str,
) -> None:
    """No intent runs and no service is called; the model reads what is missing."""
    await _speaker(hass)
    called = [
        async_mock_service(hass, "media_player", service)
        for service in ("volume_set", "volume_up", "volume_down", "media_play", "media_pause")
    ]
    openai_server.add_tool_calls([ToolCall(MEDIA_TOOL, arguments)])
    openai_server.add_text("How loud?")
    await conversation.async_converse(
        hass,
        "Change the volume",
        None,
        Context(),
        agent_id=agent_entity_id(hass, setup_integration),
    )
    assert called == [[]] * len(called)
    answer = json.dumps(text_of(messages_of(openai_server.requests[-1], "tool")[-1]))
    assert f"{arguments['action']} needs {missing}" in answer


async def test_our_play_tool_offers_a_floor_only_in_a_home_with_floors(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A floor could match nothing in a home without floors: left out there, as from
    Home Assistant's own tools; offered once the home has a floor."""
    await _speaker(hass)
    before = await _offered(hass, setup_integration, openai_server)
    assert "floor" not in before[PLAY_TOOL]["parameters"]["properties"]
    assert {"query", "name", "area"} <= set(before[PLAY_TOOL]["parameters"]["properties"])
    fr.async_get(hass).async_create("Ground Floor")
    after = await _offered(hass, setup_integration, openai_server)
    assert "floor" in after[PLAY_TOOL]["parameters"]["properties"]
