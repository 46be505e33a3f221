"""Assist's media player intents offered to the model as one tool with an action.

In a home with a media player Home Assistant offers up to eight media intents (pause,
resume, next, previous, set volume, volume up/down, mute, unmute), each repeating the
same target parameters: about 640 tokens in every request. One tool names the targets
once and the intent by its `action` (about 200 tokens). A call runs the intent the action
names through Home Assistant's own tool, with only the parameters that intent takes, so
matching, validation, exposure and the effect gate are exactly those of the intent.

Which tools are media intents is read from the tool's metadata (INTENT_KEY, set where
Home Assistant's tools are converted, from the tool itself), not from its name: with
several APIs merged, another API's tool may end in "__HassMediaPause" too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from ..agent.errors import ToolFailure

# Home Assistant's media intents (without an integration prefix) → the action naming it.
MEDIA_ACTIONS = {
    "HassMediaPause": "pause",
    "HassMediaUnpause": "resume",
    "HassMediaNext": "next",
    "HassMediaPrevious": "previous",
    "HassSetVolume": "set_volume",
    "HassSetVolumeRelative": "change_volume",
    "HassMediaPlayerMute": "mute",
    "HassMediaPlayerUnmute": "unmute",
}
MEDIA_TOOL = "media_player__control"
# A converted tool's metadata key for the intent it runs (ha_llm_api.intent_of).
INTENT_KEY = "intent"
# Set by the mute and unmute intents themselves (from which of the two is called).
_DECIDED_BY_ACTION = frozenset({"is_volume_muted"})
# Home Assistant's own tools that find and play something new (without a prefix): the
# search-and-play intent up to 2026.8, the media search tool from 2026.10.
_CORE_PLAY_TOOLS = ("HassMediaSearchAndPlay", "search_media")


def _intent(tool: BaseTool) -> str | None:
    return (tool.metadata or {}).get(INTENT_KEY)


def _is_core_play_tool(tool: BaseTool) -> bool:
    # 2026.10's media search is a tool of its own, not an intent: known by its name.
    return (_intent(tool) or tool.name.rsplit("__", 1)[-1]) in _CORE_PLAY_TOOLS


def _properties(tool: BaseTool) -> dict[str, Any]:
    schema = tool.args_schema if isinstance(tool.args_schema, dict) else {}
    return dict(schema.get("properties") or {})


def _required(tool: BaseTool) -> list[str]:
    schema = tool.args_schema if isinstance(tool.args_schema, dict) else {}
    return [name for name in schema.get("required") or () if name not in _DECIDED_BY_ACTION]


def _blank(value: Any) -> bool:
    """What Home Assistant's own tools read as a parameter left out (models send these)."""
    return value is None or (isinstance(value, str) and not value.strip())


def _description(actions: list[str], required: dict[str, list[str]], play_tool: str | None) -> str:
    """Which actions there are, what each one needs, and resume against play something."""
    text = f"Control media players: {', '.join(actions)}."
    if needs := [f"{a} needs {', '.join(names)}" for a, names in required.items() if names]:
        text += f" {'; '.join(needs)}."
    if "resume" in actions:
        text += " resume continues what was paused ('play the music')"
        text += f"; to play something new use {play_tool}." if play_tool else "."
    return text


def grouped_media_intents(
    tools: Sequence[BaseTool], play_tool: str | None = None
) -> list[BaseTool]:
    """`tools` with the media intents among them folded into one tool (in the place of
    the first); unchanged when fewer than two media intents are offered.

    `play_tool` names the tool that finds and plays something new (ours, when the turn
    offers it; else Home Assistant's own among `tools`, if any); the description sends
    such requests there instead of to resume.
    """
    media = {MEDIA_ACTIONS[i]: t for t in tools if (i := _intent(t)) in MEDIA_ACTIONS}
    if len(media) < 2:
        return list(tools)
    if play_tool is None:
        play_tool = next((t.name for t in tools if _is_core_play_tool(t)), None)
    properties: dict[str, Any] = {"action": {"type": "string", "enum": list(media)}}
    for tool in media.values():
        for name, sub in _properties(tool).items():
            if name not in _DECIDED_BY_ACTION:
                properties.setdefault(name, sub)
    # A parameter one intent requires (set_volume's level) is required only for its
    # action: the description names it, and a call without it is answered here.
    taken = {action: set(_properties(tool)) for action, tool in media.items()}
    required = {action: _required(tool) for action, tool in media.items()}

    async def call(action: Any = None, **arguments: Any) -> Any:
        # The model is untrusted: `action` may be missing or of any type.
        tool = media.get(action) if isinstance(action, str) else None
        if tool is None:
            raise ToolFailure(
                {"error": "unknown_action", "error_text": f"action must be one of {list(media)}"}
            )
        if missing := [name for name in required[action] if _blank(arguments.get(name))]:
            raise ToolFailure(
                {
                    "error": "missing_argument",
                    "error_text": f"{action} needs {', '.join(missing)}; nothing was done.",
                }
            )
        chosen = {k: v for k, v in arguments.items() if k in taken[action] and v is not None}
        return await tool.coroutine(**chosen)

    merged = StructuredTool(
        name=MEDIA_TOOL,
        description=_description(list(media), required, play_tool),
        args_schema={"type": "object", "properties": properties, "required": ["action"]},
        coroutine=call,
    )
    grouped = {id(tool) for tool in media.values()}
    first = next(i for i, t in enumerate(tools) if id(t) in grouped)
    rest = [t for t in tools if id(t) not in grouped]
    return [*rest[:first], merged, *rest[first:]]
