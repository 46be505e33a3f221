"""The models a server offers, for the model picker of the setup forms.

Two kinds of server can say: Ollama (`GET /api/tags`) and OpenAI-compatible servers
(`GET <base>/models`: llama.cpp, vLLM, LM Studio, LiteLLM's proxy...). LiteLLM has no
listing call for either, so this asks with the HTTP client the caller passes in (Home
Assistant's shared one), briefly. A list is a convenience: any failure means "no list"
and the form takes a typed model string instead.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from .access import ModelAccess, provider_of

_LOGGER = logging.getLogger(__name__)

# Seconds for one listing request: the form waits for it before it opens.
LIST_TIMEOUT = 3.0
# LiteLLM's own default address of Ollama when no base URL is given.
OLLAMA_DEFAULT_BASE = "http://localhost:11434"
_OLLAMA_PROVIDERS = frozenset({"ollama", "ollama_chat"})
# Providers that speak OpenAI's API to a server of the user's choosing (base URL given).
_OPENAI_COMPATIBLE_PROVIDERS = frozenset({"openai", "hosted_vllm", "lm_studio", "litellm_proxy"})


def can_list(access: ModelAccess) -> bool:
    """Whether the server behind `access` can be asked for its models."""
    provider = provider_of(access.model)
    return provider in _OLLAMA_PROVIDERS or (
        provider in _OPENAI_COMPATIBLE_PROVIDERS and bool(access.api_base)
    )


async def async_list_models(
    client: httpx.AsyncClient, access: ModelAccess, timeout: float = LIST_TIMEOUT
) -> list[str]:
    """The server's models as LiteLLM model strings with `access`'s provider prefix, sorted.

    Empty when the provider cannot list or the server does not answer with a list.
    """
    if not can_list(access):
        return []
    provider = provider_of(access.model)
    try:
        if provider in _OLLAMA_PROVIDERS:
            names = await _ollama_models(client, access, timeout)
        else:
            names = await _openai_models(client, access, timeout)
    except Exception as err:  # noqa: BLE001  any failure (refused, not JSON, odd shape): no list
        # Debug only: the user may well be typing a model for a server that cannot list.
        _LOGGER.debug("No model list from %s's server: %s", access.model, access.redact(repr(err)))
        return []
    return sorted({f"{provider}/{name}" for name in names if isinstance(name, str) and name})


def _headers(access: ModelAccess) -> dict[str, str]:
    return {"Authorization": f"Bearer {access.api_key}"} if access.api_key else {}


async def _get_json(
    client: httpx.AsyncClient, url: str, access: ModelAccess, timeout: float
) -> Any:
    response = await client.get(url, headers=_headers(access), timeout=timeout)
    response.raise_for_status()
    return response.json()


async def _ollama_models(
    client: httpx.AsyncClient, access: ModelAccess, timeout: float
) -> list[str]:
    base = (access.api_base or OLLAMA_DEFAULT_BASE).rstrip("/")
    body = await _get_json(client, f"{base}/api/tags", access, timeout)
    return [model["name"] for model in body["models"]]


async def _openai_models(
    client: httpx.AsyncClient, access: ModelAccess, timeout: float
) -> list[str]:
    base = (access.api_base or "").rstrip("/")
    body = await _get_json(client, f"{base}/models", access, timeout)
    return [model["id"] for model in body["data"]]
