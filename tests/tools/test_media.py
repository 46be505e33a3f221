"""Media tools against real media players on a real Home Assistant.

The demo integration brings players with different features (Kitchen and Walkman play music
with track skipping and volume steps, Lounge room is a TV with sources and no volume control,
Search can search but not play). No demo player can both search and play, so this module adds
two players of its own: Jukebox (search, browse and play) and Radio (browse and play only).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
import json
from typing import Any
from unittest.mock import patch

from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
import pytest
from pytest_homeassistant_custom_component.common import (
    MockPlatform,
    async_capture_events,
    mock_platform,
)

from custom_components.langgraph_conversation.agent.errors import ToolFailure
from custom_components.langgraph_conversation.agent.events import TextDelta
from custom_components.langgraph_conversation.agent.models import ModelAccess, ModelSettings
from custom_components.langgraph_conversation.agent.runtime import AgentRuntime, AgentSettings, Turn
from custom_components.langgraph_conversation.tools.media import SPECS
from custom_components.langgraph_conversation.tools.registry import ToolContext, as_langchain_tools
from custom_components.langgraph_conversation.tools.schema import sanitize_schema
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.components.media_player import (
    BrowseMedia,
    MediaClass,
    MediaPlayerEntity,
    MediaPlayerEntityFeature,
    MediaPlayerState,
    MediaType,
    SearchMedia,
    SearchMediaQuery,
)
from homeassistant.const import EVENT_CALL_SERVICE, Platform
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import area_registry as ar, entity_registry as er
from homeassistant.helpers.entity_platform import AddEntitiesCallback
from homeassistant.setup import async_setup_component

KITCHEN = "media_player.kitchen"
WALKMAN = "media_player.walkman"
LOUNGE = "media_player.lounge_room"
SEARCH = "media_player.search"
JUKEBOX = "media_player.jukebox"
RADIO = "media_player.radio"
PLAYERS = (KITCHEN, WALKMAN, LOUNGE, SEARCH, JUKEBOX, RADIO)

# Jukebox's library: (title, media class, content id, playable?).
LIBRARY = [
    ("Bohemian Rhapsody", MediaClass.TRACK, "track:bohemian", True),
    ("Queen", MediaClass.ARTIST, "artist:queen", False),
    ("Bohemian Rhapsody (Live Aid)", MediaClass.TRACK, "track:bohemian-live", True),
    ("Queen Greatest Hits", MediaClass.ALBUM, "album:queen-hits", True),
]


class LibraryPlayer(MediaPlayerEntity):
    """A player that plays what it is given; Jukebox can also search its library."""

    _attr_should_poll = False
    _attr_state = MediaPlayerState.IDLE

    def __init__(self, name: str, features: MediaPlayerEntityFeature) -> None:
        self._attr_name = name
        self._attr_unique_id = name.lower()
        self._attr_supported_features = features

    async def async_search_media(self, query: SearchMediaQuery) -> SearchMedia:
        words = query.search_query.casefold()
        classes = query.media_filter_classes or set(MediaClass)
        return SearchMedia(
            result=[
                BrowseMedia(
                    title=title,
                    media_class=media_class,
                    media_content_type=MediaType.MUSIC,
                    media_content_id=content_id,
                    can_play=playable,
                    can_expand=not playable,
                )
                for title, media_class, content_id, playable in LIBRARY
                if words in title.casefold() and media_class in classes
            ]
        )

    async def async_play_media(self, media_type: str, media_id: str, **kwargs: Any) -> None:
        self._attr_media_content_id = media_id
        self._attr_media_content_type = media_type
        self._attr_media_title = next(t for t, _, cid, _ in LIBRARY if cid == media_id)
        self._attr_state = MediaPlayerState.PLAYING
        self.async_write_ha_state()

    async def async_media_pause(self) -> None:
        self._attr_state = MediaPlayerState.PAUSED
        self.async_write_ha_state()


BASICS = MediaPlayerEntityFeature.PLAY_MEDIA | MediaPlayerEntityFeature.PAUSE


async def _setup_library_players(
    hass: HomeAssistant,
    config: dict[str, Any],
    async_add_entities: AddEntitiesCallback,
    discovery_info: Any = None,
) -> None:
    async_add_entities(
        [
            LibraryPlayer(
                "Jukebox",
                BASICS
                | MediaPlayerEntityFeature.SEARCH_MEDIA
                | MediaPlayerEntityFeature.BROWSE_MEDIA,
            ),
            LibraryPlayer(
                "Radio", MediaPlayerEntityFeature.PLAY_MEDIA | MediaPlayerEntityFeature.BROWSE_MEDIA
            ),
        ]
    )


@pytest.fixture
async def players(hass: HomeAssistant) -> AsyncIterator[None]:
    """Demo's media players plus Jukebox and Radio, the ones under test exposed."""
    mock_platform(
        hass, "test.media_player", MockPlatform(async_setup_platform=_setup_library_players)
    )
    with patch(
        "homeassistant.components.demo.COMPONENTS_WITH_CONFIG_ENTRY_DEMO_PLATFORM",
        [Platform.MEDIA_PLAYER],
    ):
        assert await async_setup_component(hass, "homeassistant", {})
        assert await async_setup_component(
            hass, "media_player", {"media_player": [{"platform": "test"}]}
        )
        assert await async_setup_component(hass, "demo", {})
        await hass.async_block_till_done()
        for entity_id in hass.states.async_entity_ids("media_player"):
            async_expose_entity(hass, conversation.DOMAIN, entity_id, entity_id in PLAYERS)
        yield


def _tools(hass: HomeAssistant, context: Context | None = None) -> dict[str, BaseTool]:
    tool_context = ToolContext(hass=hass, context=context or Context(), language="en")
    return {tool.name: tool for tool in as_langchain_tools(SPECS, tool_context)}


async def _call(
    hass: HomeAssistant, name: str, args: dict[str, Any], context: Context | None = None
) -> dict[str, Any]:
    result = await _tools(hass, context)[name].ainvoke(args)
    await hass.async_block_till_done()  # demo players write their state from the executor
    return result


async def _failure(hass: HomeAssistant, name: str, args: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(ToolFailure) as caught:
        await _call(hass, name, args)
    return caught.value.data


async def _control(hass: HomeAssistant, **args: Any) -> dict[str, Any]:
    return await _call(hass, "home_media_control", args)


def _attr(hass: HomeAssistant, entity_id: str, attribute: str) -> Any:
    return hass.states.get(entity_id).attributes.get(attribute)


def _attributes(hass: HomeAssistant, entity_id: str) -> dict[str, Any]:
    return dict(hass.states.get(entity_id).attributes)


def _state(hass: HomeAssistant, entity_id: str) -> str:
    return hass.states.get(entity_id).state


def test_specs_are_provider_safe() -> None:
    """Schemas pass the sanitizer unchanged; names and category as agreed."""
    for spec in SPECS:
        assert sanitize_schema(spec.parameters) == spec.parameters
        assert spec.name.startswith("home_")
        assert spec.category == "media"


@pytest.mark.usefixtures("players")
async def test_pause_play_and_stop(hass: HomeAssistant) -> None:
    """Pause and stop change the named player; play without a target resumes the paused one."""
    calls = async_capture_events(hass, EVENT_CALL_SERVICE)
    context = Context()
    result = await _call(
        hass, "home_media_control", {"action": "pause", "name": "Kitchen"}, context
    )
    assert result == {"action": "pause", "done": ["Kitchen"]}
    assert _state(hass, KITCHEN) == MediaPlayerState.PAUSED
    # One call, made in the turn's context so the logbook shows who asked.
    assert [(call.data["service"], call.context.id) for call in calls] == [
        ("media_pause", context.id)
    ]
    assert _state(hass, WALKMAN) == MediaPlayerState.PLAYING

    # Only Kitchen is paused, so a bare "play" means Kitchen.
    assert (await _control(hass, action="play"))["done"] == ["Kitchen"]
    assert _state(hass, KITCHEN) == MediaPlayerState.PLAYING

    await _control(hass, action="stop", name="Walkman")
    assert _state(hass, WALKMAN) == MediaPlayerState.OFF


@pytest.mark.usefixtures("players")
async def test_next_and_previous_track(hass: HomeAssistant) -> None:
    """Track skipping changes what the player plays."""
    assert _attr(hass, WALKMAN, "media_title").startswith("I Wanna Be A Hippy")
    await _control(hass, action="next", name="Walkman")
    assert _attr(hass, WALKMAN, "media_title") == "Luv U More"
    await _control(hass, action="previous", name="Walkman")
    assert _attr(hass, WALKMAN, "media_title").startswith("I Wanna Be A Hippy")


@pytest.mark.usefixtures("players")
async def test_volume_set_step_and_mute(hass: HomeAssistant) -> None:
    """Volume in percent, steps of a given size or the player's own, mute and unmute."""
    result = await _control(hass, action="volume_set", name="Kitchen", volume=30)
    assert result["volume"] == {"Kitchen": 30}
    assert _attr(hass, KITCHEN, "volume_level") == pytest.approx(0.3)

    result = await _control(hass, action="volume_up", name="Kitchen", volume_step=20)
    assert result["volume"] == {"Kitchen": 50}
    assert _attr(hass, KITCHEN, "volume_level") == pytest.approx(0.5)

    await _control(hass, action="volume_down", name="Kitchen")  # the player's step: 10 %
    assert _attr(hass, KITCHEN, "volume_level") == pytest.approx(0.4)

    await _control(hass, action="mute", name="Kitchen")
    assert _attr(hass, KITCHEN, "is_volume_muted") is True
    await _control(hass, action="unmute", name="Kitchen")
    assert _attr(hass, KITCHEN, "is_volume_muted") is False


@pytest.mark.usefixtures("players")
async def test_select_source_from_the_players_list(hass: HomeAssistant) -> None:
    """A source is matched in the player's own spelling; an unknown one lists the real ones."""
    result = await _control(hass, action="select_source", name="Lounge room", source="YouTube")
    assert result == {"action": "select_source", "done": ["Lounge room"], "source": "youtube"}
    assert _attr(hass, LOUNGE, "source") == "youtube"

    error = await _failure(
        hass,
        "home_media_control",
        {"action": "select_source", "name": "Lounge room", "source": "HDMI 2"},
    )
    assert error == {
        "error": "unknown_source",
        "error_text": "Lounge room has no source 'HDMI 2'. Its sources: dvd, youtube.",
    }
    assert _attr(hass, LOUNGE, "source") == "youtube"


@pytest.mark.usefixtures("players")
async def test_unsupported_actions_are_refused_without_a_call(hass: HomeAssistant) -> None:
    """Actions a player lacks are refused in words and no service is called."""
    calls = async_capture_events(hass, EVENT_CALL_SERVICE)
    cases = [
        (
            {"action": "volume_set", "name": "Lounge room", "volume": 10},
            "Lounge room cannot set the volume.",
        ),
        (
            {"action": "select_source", "name": "Kitchen", "source": "dvd"},
            "Kitchen cannot select a source.",
        ),
        ({"action": "next", "name": "Jukebox"}, "Jukebox cannot skip to the next track."),
    ]
    for args, text in cases:
        assert await _failure(hass, "home_media_control", args) == {
            "error": "not_supported",
            "error_text": text,
        }
    assert calls == []
    assert _attr(hass, LOUNGE, "volume_level") == 1.0


@pytest.mark.usefixtures("players")
async def test_bad_arguments_change_nothing(hass: HomeAssistant) -> None:
    """A volume_set without volume, or a bare pause when nothing plays, calls no service."""
    calls = async_capture_events(hass, EVENT_CALL_SERVICE)
    error = await _failure(hass, "home_media_control", {"action": "volume_set", "name": "Kitchen"})
    assert error == {"error": "missing_argument", "error_text": "volume_set needs volume (0-100)."}

    for entity_id in (KITCHEN, WALKMAN, LOUNGE, SEARCH):
        hass.states.async_set(entity_id, MediaPlayerState.IDLE, _attributes(hass, entity_id))
    error = await _failure(hass, "home_media_control", {"action": "pause"})
    assert error["error"] == "ambiguous"
    assert error["error_text"].startswith("Nothing is playing; several media players")
    assert calls == []


@pytest.mark.usefixtures("players")
async def test_area_targets_every_player_there(hass: HomeAssistant) -> None:
    """An area means all its players; one that cannot do the action is reported, not called."""
    den = ar.async_get(hass).async_create("Den")
    for entity_id in (JUKEBOX, RADIO):
        er.async_get(hass).async_update_entity(entity_id, area_id=den.id)

    result = await _control(hass, action="pause", area="Den")
    assert result == {"action": "pause", "done": ["Jukebox"], "not_done": ["Radio cannot pause"]}
    assert _state(hass, JUKEBOX) == MediaPlayerState.PAUSED
    assert _state(hass, RADIO) == MediaPlayerState.IDLE


@pytest.mark.usefixtures("players")
async def test_play_by_query_on_a_searching_player(hass: HomeAssistant) -> None:
    """The best playable result plays; a few others are offered."""
    result = await _call(hass, "home_media_play", {"query": "bohemian rhapsody", "name": "Jukebox"})
    assert result == {
        "player": "Jukebox",
        "playing": "Bohemian Rhapsody",
        "media_type": "track",
        "other_results": ["Bohemian Rhapsody (Live Aid)"],
    }
    assert _state(hass, JUKEBOX) == MediaPlayerState.PLAYING
    assert _attr(hass, JUKEBOX, "media_content_id") == "track:bohemian"

    # Limited to albums, and without a player name: Jukebox is the only one that can.
    result = await _call(hass, "home_media_play", {"query": "queen", "media_type": "album"})
    assert result["playing"] == "Queen Greatest Hits"
    assert _attr(hass, JUKEBOX, "media_content_id") == "album:queen-hits"


@pytest.mark.usefixtures("players")
async def test_play_by_query_nothing_playable_found(hass: HomeAssistant) -> None:
    """Results that cannot be played (an artist folder) are no match."""
    error = await _failure(
        hass, "home_media_play", {"query": "queen", "media_type": "artist", "name": "Jukebox"}
    )
    assert error == {
        "error": "not_found",
        "error_text": "Jukebox found nothing playable for 'queen'.",
    }
    assert _state(hass, JUKEBOX) == MediaPlayerState.IDLE


@pytest.mark.usefixtures("players")
async def test_play_by_query_refused_where_unsupported(hass: HomeAssistant) -> None:
    """Players that cannot search and play refuse clearly, name the one that can, call nothing."""
    calls = async_capture_events(hass, EVENT_CALL_SERVICE)
    cases = {
        "Walkman": "Walkman cannot search for media",
        "Radio": "Radio cannot search for media (its media can only be browsed in Home Assistant)",
        "Search": "Search can search but cannot play media",
    }
    for name, reason in cases.items():
        error = await _failure(hass, "home_media_play", {"query": "queen", "name": name})
        assert error == {
            "error": "not_supported",
            "error_text": f"{reason}. Playing by query needs a player that can search and play."
            " Players that can: Jukebox.",
        }
    assert calls == []
    assert _state(hass, RADIO) == MediaPlayerState.IDLE


@pytest.mark.usefixtures("players")
async def test_whats_playing(hass: HomeAssistant) -> None:
    """One player in detail; without a target every exposed player, off ones briefly."""
    result = await _call(hass, "home_media_status", {"name": "Kitchen"})
    assert result == {
        "players": [
            {
                "name": "Kitchen",
                "state": "playing",
                "title": "I Wanna Be A Hippy (Flamman & Abraxas Radio Mix)",
                "artist": "Technohead",
                "album": "Bounzz",
                "volume": 100,
            }
        ]
    }
    await _control(hass, action="stop", name="Walkman")
    await _control(hass, action="select_source", name="Lounge room", source="dvd")
    players = {p["name"]: p for p in (await _call(hass, "home_media_status", {}))["players"]}
    assert set(players) == {"Kitchen", "Walkman", "Lounge room", "Search", "Jukebox", "Radio"}
    assert players["Walkman"] == {"name": "Walkman", "state": "off"}
    assert players["Lounge room"]["series"] == "House of Cards"
    assert players["Lounge room"]["source"] == "dvd"
    assert players["Jukebox"] == {"name": "Jukebox", "state": "idle"}


@pytest.mark.usefixtures("players")
async def test_unexposed_player_is_refused_and_untouched(hass: HomeAssistant) -> None:
    """An unexposed player can be neither controlled, nor played on, nor reported."""
    calls = async_capture_events(hass, EVENT_CALL_SERVICE)
    async_expose_entity(hass, conversation.DOMAIN, KITCHEN, False)
    async_expose_entity(hass, conversation.DOMAIN, JUKEBOX, False)

    error = await _failure(hass, "home_media_control", {"action": "pause", "name": "Kitchen"})
    assert error["error"] == "not_exposed"
    error = await _failure(hass, "home_media_play", {"query": "queen", "name": "Jukebox"})
    assert error["error"] == "not_exposed"
    assert calls == []
    assert _state(hass, KITCHEN) == MediaPlayerState.PLAYING
    assert _state(hass, JUKEBOX) == MediaPlayerState.IDLE

    names = [p["name"] for p in (await _call(hass, "home_media_status", {}))["players"]]
    assert "Kitchen" not in names
    assert "Jukebox" not in names


@pytest.mark.usefixtures("players")
async def test_pause_through_the_agent(hass: HomeAssistant, socket_enabled: None) -> None:
    """The model pauses a player through the tool and reads the result."""
    async with FakeOpenAIServer() as server:
        server.add_tool_calls(
            [ToolCall("home_media_control", {"action": "pause", "name": "Kitchen"})]
        )
        server.add_text("Paused the kitchen.")
        runtime = AgentRuntime(
            ModelAccess("openai/gpt-test", "key", server.api_base), InMemorySaver()
        )
        tool_context = ToolContext(hass=hass, context=Context(), language="en")
        turn = Turn(
            thread_id="media",
            text="Pause the kitchen",
            system_prompt="You are a test.",
            tools=as_langchain_tools(SPECS, tool_context),
        )
        agent = AgentSettings(settings=ModelSettings(), max_tool_rounds=2)
        events = [event async for event in runtime.run_turn(agent, turn)]
    await hass.async_block_till_done()

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Paused the kitchen."
    assert _state(hass, KITCHEN) == MediaPlayerState.PAUSED
    offered = {tool["function"]["name"] for tool in server.requests[0]["tools"]}
    assert offered == {"home_media_control", "home_media_play", "home_media_status"}
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert json.loads(tool_message["content"]) == {"action": "pause", "done": ["Kitchen"]}
