"""Media tools: control players, play something by query, and say what is playing.

Every action first checks the player's supported features and refuses in words when the player
cannot do it: Home Assistant would reject the call anyway (or, for a player that is switched
off or unavailable, silently do nothing), and a model that reads "Kitchen cannot select a
source" can tell the user instead of retrying.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from homeassistant.components.media_player import (
    ATTR_INPUT_SOURCE,
    ATTR_INPUT_SOURCE_LIST,
    ATTR_MEDIA_VOLUME_LEVEL,
    ATTR_MEDIA_VOLUME_MUTED,
    DOMAIN as MEDIA_PLAYER_DOMAIN,
    MediaPlayerEntityFeature,
    MediaPlayerState,
)
from homeassistant.const import ATTR_ENTITY_ID, ATTR_SUPPORTED_FEATURES, STATE_UNAVAILABLE
from homeassistant.core import State

from ..agent.errors import ToolFailure
from .registry import ToolContext, ToolSpec
from .targets import entity_area, resolve_targets

CATEGORY = "media"
# Our tool that finds something by query and plays it (Assist's grouped media tool points
# "play something new" here when the turn offers it).
PLAY_TOOL = "home_media_play"
ACTIVE_STATES = frozenset({MediaPlayerState.PLAYING, MediaPlayerState.BUFFERING})
# A query search plays one result and names a few more, so the user can pick another.
MAX_ALTERNATIVES = 4


@dataclass(frozen=True, slots=True)
class Action:
    """One control action: the features it needs (any one of them) and how it is said."""

    features: MediaPlayerEntityFeature
    service: str
    verb: str


ACTIONS = {
    "play": Action(MediaPlayerEntityFeature.PLAY, "media_play", "play"),
    "pause": Action(MediaPlayerEntityFeature.PAUSE, "media_pause", "pause"),
    "stop": Action(MediaPlayerEntityFeature.STOP, "media_stop", "stop"),
    "next": Action(
        MediaPlayerEntityFeature.NEXT_TRACK, "media_next_track", "skip to the next track"
    ),
    "previous": Action(
        MediaPlayerEntityFeature.PREVIOUS_TRACK, "media_previous_track", "go back a track"
    ),
    "volume_set": Action(MediaPlayerEntityFeature.VOLUME_SET, "volume_set", "set the volume"),
    # HA steps the volume natively (VOLUME_STEP) or by setting it (VOLUME_SET).
    "volume_up": Action(
        MediaPlayerEntityFeature.VOLUME_STEP | MediaPlayerEntityFeature.VOLUME_SET,
        "volume_up",
        "turn the volume up",
    ),
    "volume_down": Action(
        MediaPlayerEntityFeature.VOLUME_STEP | MediaPlayerEntityFeature.VOLUME_SET,
        "volume_down",
        "turn the volume down",
    ),
    "mute": Action(MediaPlayerEntityFeature.VOLUME_MUTE, "volume_mute", "mute"),
    "unmute": Action(MediaPlayerEntityFeature.VOLUME_MUTE, "volume_mute", "unmute"),
    "select_source": Action(
        MediaPlayerEntityFeature.SELECT_SOURCE, "select_source", "select a source"
    ),
}
SEARCH_AND_PLAY = MediaPlayerEntityFeature.SEARCH_MEDIA | MediaPlayerEntityFeature.PLAY_MEDIA
# Media kinds a query may be limited to (HA's MediaClass values people ask for).
MEDIA_KINDS = [
    "track",
    "album",
    "artist",
    "playlist",
    "genre",
    "podcast",
    "episode",
    "movie",
    "tv_show",
    "channel",
]

TARGET_PROPERTIES: dict[str, Any] = {
    "name": {"type": "string", "description": "Player name or alias"},
    "area": {"type": "string"},
    "floor": {"type": "string"},
}


def _features(state: State) -> MediaPlayerEntityFeature:
    return MediaPlayerEntityFeature(state.attributes.get(ATTR_SUPPORTED_FEATURES, 0))


def _names(states: list[State]) -> list[str]:
    return [state.name for state in states]


def _refuse(kind: str, text: str) -> ToolFailure:
    return ToolFailure({"error": kind, "error_text": text})


async def _players(
    tool_context: ToolContext, arguments: dict[str, Any], *, single: bool = False
) -> list[State]:
    """The exposed players the arguments name; a player name always means one player."""
    name = arguments.get("name")
    return await resolve_targets(
        tool_context,
        name=name,
        area=arguments.get("area"),
        floor=arguments.get("floor"),
        domains={MEDIA_PLAYER_DOMAIN},
        single=single or bool(name),
    )


def _has_target(arguments: dict[str, Any]) -> bool:
    return any(arguments.get(key) for key in TARGET_PROPERTIES)


def _implicit_players(action: str, players: list[State]) -> list[State]:
    """Without a target, "pause" means what is playing and "play" what is paused."""
    wanted = {MediaPlayerState.PAUSED} if action == "play" else ACTIVE_STATES
    active = [player for player in players if player.state in wanted]
    if active or len(players) == 1:
        return active or players
    raise _refuse(
        "ambiguous",
        f"Nothing is {'paused' if action == 'play' else 'playing'}; several media players "
        f"could be meant: {', '.join(_names(players))}. Ask which one.",
    )


def _single(players: list[State]) -> State:
    if len(players) > 1:
        raise _refuse(
            "ambiguous",
            f"Several media players match: {', '.join(_names(players))}. Ask which one.",
        )
    return players[0]


def _volume_level(arguments: dict[str, Any]) -> float:
    volume = arguments.get("volume")
    if volume in (None, ""):
        raise _refuse("missing_argument", "volume_set needs volume (0-100).")
    return min(max(float(volume), 0.0), 100.0) / 100


def _source(player: State, arguments: dict[str, Any]) -> str:
    """The player's own spelling of the requested source, which must be in its list."""
    sources = [str(source) for source in player.attributes.get(ATTR_INPUT_SOURCE_LIST) or []]
    wanted = str(arguments.get("source") or "").strip()
    for source in sources:
        if source.casefold() == wanted.casefold():
            return source
    raise _refuse(
        "unknown_source",
        f"{player.name} has no source '{wanted}'. "
        f"Its sources: {', '.join(sources) or 'none listed'}.",
    )


def _stepped_level(action: str, player: State, step: Any) -> float | None:
    """The new level for a volume step given in percent, when the player can be set to it.

    Without a step, or on a player that only steps natively, HA's volume_up/volume_down
    apply the player's own step instead.
    """
    level = player.attributes.get(ATTR_MEDIA_VOLUME_LEVEL)
    if not step or level is None or MediaPlayerEntityFeature.VOLUME_SET not in _features(player):
        return None
    delta = float(step) / 100 * (1 if action == "volume_up" else -1)
    return round(min(max(level + delta, 0.0), 1.0), 2)


def _service_call(
    action: str, player: State, arguments: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The service and data that perform `action` on one player."""
    data: dict[str, Any] = {ATTR_ENTITY_ID: player.entity_id}
    service = ACTIONS[action].service
    if action == "volume_set":
        data[ATTR_MEDIA_VOLUME_LEVEL] = _volume_level(arguments)
    elif action in ("volume_up", "volume_down"):
        level = _stepped_level(action, player, arguments.get("volume_step"))
        if level is not None:
            service, data[ATTR_MEDIA_VOLUME_LEVEL] = "volume_set", level
    elif action in ("mute", "unmute"):
        data[ATTR_MEDIA_VOLUME_MUTED] = action == "mute"
    elif action == "select_source":
        data[ATTR_INPUT_SOURCE] = _source(player, arguments)
    return service, data


def _why_not(action: str, player: State) -> str | None:
    """Why `player` cannot do `action` now, or None when it can."""
    if player.state == STATE_UNAVAILABLE:
        return f"{player.name} is unavailable"
    if not _features(player) & ACTIONS[action].features:
        return f"{player.name} cannot {ACTIONS[action].verb}"
    return None


async def _control(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    action = arguments.get("action")
    if action not in ACTIONS:
        raise _refuse("invalid_action", f"Unknown action '{action}'. Use one of: {list(ACTIONS)}.")
    players = await _players(tool_context, arguments, single=action == "select_source")
    if not _has_target(arguments):
        players = _implicit_players(action, players)
    refusals = {player.entity_id: _why_not(action, player) for player in players}
    not_done = [reason for reason in refusals.values() if reason]
    able = [player for player in players if refusals[player.entity_id] is None]
    if not able:
        raise _refuse("not_supported", "; ".join(not_done) + ".")
    # Every call is built first, so a bad volume or source changes no player at all.
    calls = [(player, *_service_call(action, player, arguments)) for player in able]
    result: dict[str, Any] = {"action": action, "done": _names(able)}
    for player, service, data in calls:
        await tool_context.hass.services.async_call(
            MEDIA_PLAYER_DOMAIN, service, data, blocking=True, context=tool_context.context
        )
        if ATTR_MEDIA_VOLUME_LEVEL in data:
            volume = round(data[ATTR_MEDIA_VOLUME_LEVEL] * 100)
            result.setdefault("volume", {})[player.name] = volume
        if ATTR_INPUT_SOURCE in data:
            result["source"] = data[ATTR_INPUT_SOURCE]
    if not_done:
        result["not_done"] = not_done
    return result


async def _capable_players(tool_context: ToolContext) -> list[State]:
    """Every exposed player that can search and play, wherever the request came from."""
    try:
        players = await resolve_targets(
            replace(tool_context, device_id=None), domains={MEDIA_PLAYER_DOMAIN}
        )
    except ToolFailure:
        return []
    return [player for player in players if SEARCH_AND_PLAY in _features(player)]


async def _cannot_search(tool_context: ToolContext, players: list[State]) -> ToolFailure:
    """Why these players cannot play by query, and which players could."""
    reasons = []
    for player in players:
        features = _features(player)
        if MediaPlayerEntityFeature.SEARCH_MEDIA not in features:
            reason = f"{player.name} cannot search for media"
            if MediaPlayerEntityFeature.BROWSE_MEDIA in features:
                reason += " (its media can only be browsed in Home Assistant)"
        else:
            reason = f"{player.name} can search but cannot play media"
        reasons.append(reason)
    text = "; ".join(reasons) + ". Playing by query needs a player that can search and play."
    if capable := _names(await _capable_players(tool_context)):
        text += f" Players that can: {', '.join(capable)}."
    return _refuse("not_supported", text)


async def _search_player(tool_context: ToolContext, arguments: dict[str, Any]) -> State:
    players = await _players(tool_context, arguments)
    capable = [player for player in players if SEARCH_AND_PLAY in _features(player)]
    if not capable:
        raise await _cannot_search(tool_context, players)
    return _single(capable)


async def _search(
    tool_context: ToolContext, player: State, query: str, kind: str | None
) -> list[Any]:
    """The player's search results (BrowseMedia items)."""
    data: dict[str, Any] = {ATTR_ENTITY_ID: player.entity_id, "search_query": query}
    if kind:
        data["media_filter_classes"] = [kind]
    response = await tool_context.hass.services.async_call(
        MEDIA_PLAYER_DOMAIN,
        "search_media",
        data,
        blocking=True,
        context=tool_context.context,
        return_response=True,
    )
    # Entity services hand back the entity's own SearchMedia object, keyed by entity id.
    return list(response[player.entity_id].result)


async def _play_query(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    query = str(arguments.get("query") or "").strip()
    if not query:
        raise _refuse("missing_argument", "Say what to play in query.")
    kind = arguments.get("media_type") or None
    if kind is not None and kind not in MEDIA_KINDS:
        raise _refuse("invalid_argument", f"media_type must be one of: {', '.join(MEDIA_KINDS)}.")
    player = await _search_player(tool_context, arguments)
    playable = [item for item in await _search(tool_context, player, query, kind) if item.can_play]
    if not playable:
        raise _refuse("not_found", f"{player.name} found nothing playable for '{query}'.")
    chosen = playable[0]
    await tool_context.hass.services.async_call(
        MEDIA_PLAYER_DOMAIN,
        "play_media",
        {
            ATTR_ENTITY_ID: player.entity_id,
            "media_content_id": chosen.media_content_id,
            "media_content_type": chosen.media_content_type,
        },
        blocking=True,
        context=tool_context.context,
    )
    result: dict[str, Any] = {
        "player": player.name,
        "playing": chosen.title,
        "media_type": str(chosen.media_class),
    }
    if alternatives := [item.title for item in playable[1 : MAX_ALTERNATIVES + 1]]:
        result["other_results"] = alternatives
    return result


# What "what's playing" reports: attribute → key in the answer.
NOW_PLAYING = {
    "media_title": "title",
    "media_artist": "artist",
    "media_album_name": "album",
    "media_series_title": "series",
    "media_season": "season",
    "media_episode": "episode",
    "media_channel": "channel",
    "app_name": "app",
    ATTR_INPUT_SOURCE: "source",
}


def _status(tool_context: ToolContext, player: State) -> dict[str, Any]:
    status: dict[str, Any] = {"name": player.name, "state": player.state}
    if area := entity_area(tool_context.hass, player.entity_id):
        status["area"] = area.name
    if player.state in (MediaPlayerState.OFF, STATE_UNAVAILABLE):
        return status
    attributes = player.attributes
    status.update(
        {key: attributes[attr] for attr, key in NOW_PLAYING.items() if attributes.get(attr)}
    )
    if (level := attributes.get(ATTR_MEDIA_VOLUME_LEVEL)) is not None:
        status["volume"] = round(level * 100)
    if attributes.get(ATTR_MEDIA_VOLUME_MUTED):
        status["muted"] = True
    return status


async def _now_playing(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    if _has_target(arguments):
        players = await _players(tool_context, arguments)
    else:
        # "What's playing?" means the whole home, not only the satellite's room.
        players = await resolve_targets(
            replace(tool_context, device_id=None), domains={MEDIA_PLAYER_DOMAIN}
        )
    return {"players": [_status(tool_context, player) for player in players]}


SPECS: list[ToolSpec] = [
    ToolSpec(
        name="home_media_control",
        description=(
            "Control media players: play/resume, pause, stop, next or previous track, set the "
            "volume in percent, turn it up or down, mute, unmute, or select an input source "
            "from the player's source list. Target a player by name, or all players in an "
            "area or on a floor; without a target it acts on what is playing (for play: what "
            "is paused). Refuses actions a player does not support."
        ),
        parameters={
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(ACTIONS)},
                **TARGET_PROPERTIES,
                "volume": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 100,
                    "description": "For volume_set: the volume in percent.",
                },
                "volume_step": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 100,
                    "description": (
                        "For volume_up/volume_down: percentage points to change; leave out "
                        "for the player's own step."
                    ),
                },
                "source": {
                    "type": "string",
                    "description": "For select_source: the source, e.g. 'HDMI 1' or 'Spotify'.",
                },
            },
            "required": ["action"],
        },
        category=CATEGORY,
        handler=_control,
        domains=frozenset({MEDIA_PLAYER_DOMAIN}),
        covered_by=frozenset(
            {"HassMediaPause", "HassMediaUnpause", "HassMediaNext", "HassMediaPrevious"}
            | {"HassSetVolume"}
        ),
    ),
    ToolSpec(
        name=PLAY_TOOL,
        description=(
            "Find a song, artist, album, playlist, podcast, movie or show in a player's "
            "library or services and play the best match; returns other matches to offer. "
            "Not for continuing what was paused."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "e.g. Bohemian Rhapsody, or jazz for dinner",
                },
                "media_type": {
                    "type": "string",
                    "enum": MEDIA_KINDS,
                    "description": "Only if the user said",
                },
                **TARGET_PROPERTIES,
            },
            "required": ["query"],
        },
        category=CATEGORY,
        handler=_play_query,
        domains=frozenset({MEDIA_PLAYER_DOMAIN}),
    ),
    ToolSpec(
        name="home_media_status",
        description=(
            "What is playing: state, title, artist, album (or series/episode), app, source "
            "and volume in percent of one media player, the players of an area/floor, or "
            "without a target of every media player."
        ),
        parameters={
            "type": "object",
            "properties": TARGET_PROPERTIES,
            "required": [],
        },
        category=CATEGORY,
        handler=_now_playing,
        domains=frozenset({MEDIA_PLAYER_DOMAIN}),
        covered_by=frozenset({"GetLiveContext"}),
    ),
]
