"""LiteLLM's `ollama_chat` provider loses a tool round's history on the wire.

Upstream behaviour (checked on LiteLLM 1.83.0): `OllamaChatConfig.transform_request`
rebuilds every message for Ollama's /api/chat from its role, content, thinking and
images only. An assistant message that called tools goes out as
`{"role": "assistant", "content": ""}` without its `tool_calls`, and a tool message
without its `tool_call_id` and tool name (BerriAI/litellm#26094, fixed upstream by
PR #26122, in no release that installs under Home Assistant's pins). Within one turn
the model then reads a tool result with no record of having asked for it, and small
models call the same tool again until the round cap.

The workaround wraps that one method: the original builds the request as always, then
the assistant messages get their calls back (name, arguments as an object, id) and the
tool messages their `tool_call_id` and `tool_name` (Ollama's field; the name comes from
the message or from the call it answers). The original's output is one message per input
message, in order, which the wrapper relies on and
tests/agent/upstream/test_litellm_ollama.py checks.

It is applied only on the exact version above; any other version logs one line and
leaves LiteLLM untouched (a release with the upstream fix needs nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import functools
from importlib import metadata
import json
import logging
from typing import Any

from litellm.llms.ollama.chat.transformation import OllamaChatConfig

_LOGGER = logging.getLogger(__name__)

CHECKED_VERSION = "1.83.0"

# LiteLLM's own method, kept for the contract test and for a clean removal.
ORIGINAL_TRANSFORM_REQUEST: Callable[..., dict[str, Any]] = OllamaChatConfig.transform_request


def installed_version() -> str:
    """The installed LiteLLM's version, from its package metadata."""
    try:
        return metadata.version("litellm")
    except metadata.PackageNotFoundError:
        return "unknown"


def applies_to(version: str) -> bool:
    """Whether the workaround was written for `version`; logs why not when it was not."""
    if version == CHECKED_VERSION:
        return True
    _LOGGER.warning(
        "LiteLLM %s is installed; the Ollama tool-call history workaround was written for "
        "%s and stays off (LiteLLM's own request is sent as it builds it)",
        version,
        CHECKED_VERSION,
    )
    return False


def _plain(message: Any) -> Mapping[str, Any]:
    """A message as a mapping (LiteLLM accepts pydantic messages too)."""
    dump = getattr(message, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    return message if isinstance(message, Mapping) else {}


def _arguments(raw: Any) -> Any:
    """Ollama takes arguments as an object; OpenAI-style messages carry encoded JSON."""
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw
    return raw if raw is not None else {}


def _wire_calls(calls: Sequence[Any]) -> list[dict[str, Any]]:
    """An assistant message's tool calls as Ollama's /api/chat carries them."""
    wire: list[dict[str, Any]] = []
    for call in calls:
        call = _plain(call)
        function = _plain(call.get("function"))
        if not function.get("name"):
            continue
        entry: dict[str, Any] = {
            "function": {
                "name": function["name"],
                "arguments": _arguments(function.get("arguments")),
            }
        }
        if call.get("id"):
            entry["id"] = call["id"]
        wire.append(entry)
    return wire


def tool_history_fields(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Per message, the fields LiteLLM 1.83.0 leaves out of Ollama's request."""
    names: dict[str, str] = {}  # tool call id → tool name, from the calls seen so far
    fields: list[dict[str, Any]] = []
    for message in messages:
        plain = _plain(message)
        extra: dict[str, Any] = {}
        calls = plain.get("tool_calls")
        if plain.get("role") == "assistant" and isinstance(calls, Sequence) and calls:
            if wire := _wire_calls(calls):
                extra["tool_calls"] = wire
                names.update({c["id"]: c["function"]["name"] for c in wire if "id" in c})
        elif plain.get("role") == "tool":
            call_id = plain.get("tool_call_id")
            if call_id:
                extra["tool_call_id"] = call_id
            if name := plain.get("name") or names.get(call_id or ""):
                extra["tool_name"] = name
        fields.append(extra)
    return fields


@functools.wraps(ORIGINAL_TRANSFORM_REQUEST)
def _transform_request(
    self: OllamaChatConfig,
    model: str,
    messages: list[Any],
    optional_params: dict[str, Any],
    litellm_params: dict[str, Any],
    headers: dict[str, Any],
) -> dict[str, Any]:
    # Read before the original runs: it rewrites the callers' tool calls in place,
    # dropping their ids.
    fields = tool_history_fields(messages)
    data = ORIGINAL_TRANSFORM_REQUEST(
        self, model, messages, optional_params, litellm_params, headers
    )
    sent = data.get("messages")
    if isinstance(sent, list) and len(sent) == len(fields):
        for wire, extra in zip(sent, fields, strict=True):
            if extra and isinstance(wire, dict):
                wire.update(extra)
    elif any(fields):
        _LOGGER.warning(
            "LiteLLM built %s Ollama messages from %d: tool-call history sent as LiteLLM built it",
            len(sent) if isinstance(sent, list) else "no",
            len(fields),
        )
    return data


def install() -> bool:
    """Wrap LiteLLM's Ollama request transform on the checked version; True if active."""
    if OllamaChatConfig.transform_request is _transform_request:
        return True
    if not applies_to(installed_version()):
        return False
    OllamaChatConfig.transform_request = _transform_request  # type: ignore[method-assign]
    return True


ACTIVE = install()
