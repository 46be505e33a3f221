"""Assist's media player intents offered to the model as one tool with an action.

In a home with a media player Home Assistant offers up to eight media intents (pause,
resume, next, previous, set volume, volume up/down, mute, unmute), each repeating the
same target parameters: about 640 tokens in every request. One tool names the targets
once and the intent by its `action` (about 200 tokens). A call runs the intent the action
names through Home Assistant's own tool, with only the parameters that intent takes, so
matching, validation, exposure and the effect gate are exactly those of the intent.
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
# Set by the mute and unmute intents themselves (from which of the two is called).
_DECIDED_BY_ACTION = frozenset({"is_volume_muted"})


def _intent(tool: BaseTool) -> str:
    return tool.name.rsplit("__", 1)[-1]


def _properties(tool: BaseTool) -> dict[str, Any]:
    schema = tool.args_schema if isinstance(tool.args_schema, dict) else {}
    return dict(schema.get("properties") or {})


def grouped_media_intents(tools: Sequence[BaseTool]) -> list[BaseTool]:
    """`tools` with the media intents among them folded into one tool (in the place of
    the first); unchanged when fewer than two media intents are offered."""
    media = {MEDIA_ACTIONS[_intent(t)]: t for t in tools if _intent(t) in MEDIA_ACTIONS}
    if len(media) < 2:
        return list(tools)
    properties: dict[str, Any] = {"action": {"type": "string", "enum": list(media)}}
    for tool in media.values():
        for name, sub in _properties(tool).items():
            if name not in _DECIDED_BY_ACTION:
                properties.setdefault(name, sub)
    # A parameter one intent requires (set_volume's level) is required only for it:
    # the intent itself says so when it is missing.
    taken = {action: set(_properties(tool)) for action, tool in media.items()}

    async def call(action: Any = None, **arguments: Any) -> Any:
        # The model is untrusted: `action` may be missing or of any type.
        tool = media.get(action) if isinstance(action, str) else None
        if tool is None:
            raise ToolFailure(
                {"error": "unknown_action", "error_text": f"action must be one of {list(media)}"}
            )
        chosen = {k: v for k, v in arguments.items() if k in taken[action] and v is not None}
        return await tool.coroutine(**chosen)

    merged = StructuredTool(
        name=MEDIA_TOOL,
        description=f"Control media players: {', '.join(media)}.",
        args_schema={"type": "object", "properties": properties, "required": ["action"]},
        coroutine=call,
    )
    grouped = {id(tool) for tool in media.values()}
    first = next(i for i, t in enumerate(tools) if id(t) in grouped)
    rest = [t for t in tools if id(t) not in grouped]
    return [*rest[:first], merged, *rest[first:]]
