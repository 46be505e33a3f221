"""What a model served by Ollama tells about itself: its own context length.

A window larger than the model was trained for makes Ollama allocate memory for nothing
and the model read past what it can attend to, so the agent's window is bounded by the
model's context length, which Ollama's `POST /api/show` reports in `model_info`
(`<architecture>.context_length`). LiteLLM can ask too, but only with a blocking client
and at a fixed address; this asks once per server and model, in a worker thread, and
keeps the answer for the life of the process. A failed lookup is tried again after a
while; until then the configured window is used as it is.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
import logging
import time

import httpx

from .access import ModelAccess, ModelSettings, provider_of

_LOGGER = logging.getLogger(__name__)

_DEFAULT_BASE = "http://localhost:11434"
# Seconds one lookup may take, and before a failed one is tried again.
_LOOKUP_TIMEOUT = 5.0
_RETRY_AFTER = 300.0

# (base URL, model name) → the model's context length (None: it reports none).
_KNOWN: dict[tuple[str, str], int | None] = {}
# (base URL, model name) → when the last lookup failed (monotonic seconds).
_FAILED: dict[tuple[str, str], float] = {}


def _key(access: ModelAccess) -> tuple[str, str]:
    base = (access.api_base or _DEFAULT_BASE).rstrip("/")
    return base, access.model.partition("/")[2]


def context_length_of(show: object) -> int | None:
    """The context length in an /api/show answer (`model_info`), if it has one."""
    info = show.get("model_info") if isinstance(show, dict) else None
    if not isinstance(info, dict):
        return None
    for name, value in info.items():
        if name.endswith(".context_length") and isinstance(value, int) and value > 0:
            return value
    return None


def _show(access: ModelAccess) -> int | None:
    """Ask the server (blocking: runs in a worker thread)."""
    base, model = _key(access)
    headers = {"Authorization": f"Bearer {access.api_key}"} if access.api_key else {}
    with httpx.Client(timeout=_LOOKUP_TIMEOUT) as client:
        response = client.post(f"{base}/api/show", json={"model": model}, headers=headers)
        response.raise_for_status()
        return context_length_of(response.json())


def forget_model_windows() -> None:
    """Ask the servers again from now on: a reload picks up a model that was replaced or
    given another context length under the same name, and a failed lookup is retried."""
    _KNOWN.clear()
    _FAILED.clear()


async def model_context_length(access: ModelAccess) -> int | None:
    """The model's own context length as its Ollama server reports it (cached)."""
    key = _key(access)
    if key in _KNOWN:
        return _KNOWN[key]
    if time.monotonic() - _FAILED.get(key, -_RETRY_AFTER) < _RETRY_AFTER:
        return None
    try:
        length = await asyncio.to_thread(_show, access)
    except (httpx.HTTPError, ValueError) as err:
        _FAILED[key] = time.monotonic()
        # The detail names the server only: the key travels in a header, never in text.
        _LOGGER.info("Could not read the context length of %s: %s", key[1], type(err).__name__)
        return None
    _KNOWN[key] = length
    _FAILED.pop(key, None)
    return length


async def bounded_settings(access: ModelAccess, settings: ModelSettings) -> ModelSettings:
    """The settings with the window bounded by the model's own context length.

    Only for Ollama's native API, and only when a window is configured.
    """
    if provider_of(access.model) != "ollama_chat" or settings.context_window is None:
        return settings
    length = await model_context_length(access)
    if length is None or settings.context_window <= length:
        return settings
    _LOGGER.debug(
        "%s holds %d tokens: the window of %d is bounded to that",
        access.model,
        length,
        settings.context_window,
    )
    return replace(settings, context_window=length)


def window_of(access: ModelAccess, settings: ModelSettings) -> int | None:
    """The window a request to this model is sent with; None when the provider takes none."""
    if provider_of(access.model) != "ollama_chat":
        return None
    return settings.context_window
