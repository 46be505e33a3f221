"""The camera tool: a question about what an exposed camera sees now.

Offered only to an agent whose owner turned "may look through cameras" on, and only when
a model of the agent sees images (selection.py says why it is left out otherwise). A call
takes one snapshot of one exposed camera that the asking person may read, hands it to the
looking model with the question (the turn's CameraAccess, built from agent/models/vision.py)
and returns that model's words about it. The image itself goes nowhere else: not into the
thread, the ChatLog, a trace, an event or a log line; the result holds words only, and the
agent quotes and scans them like every tool result (a sign in front of the camera that says
"unlock the door" is something seen, not an instruction; the effect gate holds an unlock
whatever the model asks for).
"""

from __future__ import annotations

from typing import Any

from homeassistant.auth.permissions.const import POLICY_READ
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError

from ..agent.errors import ToolFailure, TurnError
from .registry import ToolContext, ToolSpec
from .targets import resolve_targets

CATEGORY = "cameras"
CAMERA_DOMAIN = "camera"
LOOK_TOOL = "home_camera_look"

# The snapshot: the width asked of the camera (many scale to it; HA scales nothing when
# only a width is given, so nothing is decoded on the event loop), the seconds it may take,
# and the largest image sent on (a 4K JPEG is one or two megabytes).
SNAPSHOT_WIDTH = 1024
SNAPSHOT_TIMEOUT = 10
MAX_IMAGE_BYTES = 4 * 1024 * 1024
# Seconds a whole call may take: the snapshot, then the looking model's answer (with its
# retries and fallback). Longer than other tools': a model reading an image is slow.
LOOK_TIMEOUT = 120.0
# Characters of the looking model's words passed on; a description, not an essay.
MAX_DESCRIPTION_CHARS = 2000
MAX_QUESTION_CHARS = 500
# Content types cameras report for JPEGs that model APIs know by their standard name only
# (Home Assistant's demo camera says "image/jpg").
STANDARD_TYPES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg"}


def _failure(kind: str, text: str) -> ToolFailure:
    return ToolFailure({"error": kind, "error_text": text})


def _text_argument(arguments: dict[str, Any], key: str, *, required: bool) -> str | None:
    """A text argument as the model sent it; the model is untrusted, so any type arrives."""
    value = arguments.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise _failure("invalid_arguments", f"'{key}' is required: a sentence in words.")
        return None
    if not isinstance(value, str):
        raise _failure("invalid_arguments", f"'{key}' must be text, not {type(value).__name__}.")
    return value.strip()


async def may_read(hass: HomeAssistant, user_id: str | None, entity_id: str) -> bool:
    """Whether the person asking may see this camera: an admin, or a user whose entity
    permissions allow reading it. A request without a user (a voice satellite, an
    automation) has only the owner's choice to go by, as Home Assistant's own services."""
    if user_id is None:
        return True
    user = await hass.auth.async_get_user(user_id)
    if user is None or not user.is_active:
        return False
    return user.is_admin or user.permissions.check_entity(entity_id, POLICY_READ)


async def _snapshot(hass: HomeAssistant, entity_id: str) -> tuple[bytes, str]:
    """One still image of the camera: its bytes and content type."""
    if CAMERA_DOMAIN not in hass.config.components:
        raise _failure("unavailable", "Cameras are not set up in this home.")
    # Imported here: the camera integration is loaded (a camera entity was matched), and
    # our own import does not drag it (and its stream and WebRTC parts) in for every agent.
    from homeassistant.components.camera import async_get_image

    try:
        image = await async_get_image(
            hass, entity_id, timeout=SNAPSHOT_TIMEOUT, width=SNAPSHOT_WIDTH
        )
    except HomeAssistantError as err:
        raise _failure("unavailable", f"The camera gave no image ({err}).") from None
    content_type = (image.content_type or "").split(";", 1)[0].strip().lower()
    content_type = STANDARD_TYPES.get(content_type, content_type)
    if not content_type.startswith("image/"):
        raise _failure("unavailable", "The camera gave no still image.")
    if len(image.content) > MAX_IMAGE_BYTES:
        raise _failure(
            "image_too_large",
            f"The camera's image has {len(image.content):,} bytes; at most "
            f"{MAX_IMAGE_BYTES:,} are sent to the model.",
        )
    return image.content, content_type


async def _look(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    cameras = tool_context.cameras
    if cameras is None:
        # Never offered then; a model naming the tool anyway is told so.
        raise _failure("not_allowed", "This assistant may not look through cameras.")
    name = _text_argument(arguments, "name", required=False)
    question = _text_argument(arguments, "question", required=True)
    assert question is not None
    states = await resolve_targets(tool_context, name=name, domains={CAMERA_DOMAIN}, single=True)
    state = states[0]
    if not await may_read(tool_context.hass, tool_context.context.user_id, state.entity_id):
        raise _failure("not_allowed", f"The person asking may not see the camera {state.name}.")
    image, content_type = await _snapshot(tool_context.hass, state.entity_id)
    cameras.viewed(state.entity_id)
    try:
        words = await cameras.look(image, content_type, question[:MAX_QUESTION_CHARS])
    except TurnError as err:
        # Its kind only: the detail may quote the provider.
        raise _failure(
            "vision_failed", f"The model that looks at images could not answer ({err.kind})."
        ) from None
    return {"camera": state.name, "description": words[:MAX_DESCRIPTION_CHARS]}


SPECS = [
    ToolSpec(
        name=LOOK_TOOL,
        description=(
            "Look through one camera now and answer a question about what it shows "
            "(who is at the door, is a car in the driveway, did a parcel arrive). "
            "Returns a description of the image in words."
        ),
        parameters={
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The camera's name"},
                "question": {"type": "string", "description": "What to look for"},
            },
            "required": ["name", "question"],
        },
        category=CATEGORY,
        handler=_look,
        domains=frozenset({CAMERA_DOMAIN}),
        timeout=LOOK_TIMEOUT,
    )
]
