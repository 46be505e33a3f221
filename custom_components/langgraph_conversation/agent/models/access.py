"""How to reach a model and what to ask it: access (model string, key, base URL),
generation settings, Ollama's own options, and which provider a model string names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..guard import PLACEHOLDER, SECRET_FILTER

# Sent as the key to an OpenAI-compatible server of the user's own when none is configured
# (see ModelAccess.request_key); says what it is to whoever reads the server's log.
NO_KEY_PLACEHOLDER = "no-key-configured"
# LiteLLM providers that go through the OpenAI SDK's client (which insists on a key) and
# may point at any server with a base URL.
_KEYLESS_OPENAI_PROVIDERS = frozenset({"openai", "text-completion-openai", "custom_openai"})


@dataclass(frozen=True, slots=True)
class ModelAccess:
    """How to reach one model: a LiteLLM model string plus optional key and base URL."""

    model: str
    api_key: str | None = None
    api_base: str | None = None

    def __post_init__(self) -> None:
        # LiteLLM logs each call's arguments at DEBUG; its log lines must not carry the
        # key, nor the password or token inside the base URL.
        SECRET_FILTER.add(self.api_key)
        SECRET_FILTER.add_url(self.api_base)

    @property
    def request_key(self) -> str | None:
        """The key sent with each request: the configured one, or for an OpenAI-compatible
        server of the user's own without a key, a placeholder.

        LiteLLM's `openai/` provider hands the call to the OpenAI SDK, whose client refuses
        to be built without a key, before anything is sent; a local server (llama.cpp,
        vLLM, LM Studio, ...) usually wants none and ignores the Authorization header. A
        placeholder gets such a server its request; one that does check keys refuses it
        like any wrong key. Never for OpenAI's own API (no base URL): there, a missing key
        is the user's mistake and must be reported as such.
        """
        if self.api_key:
            return self.api_key
        if self.api_base and provider_of(self.model) in _KEYLESS_OPENAI_PROVIDERS:
            return NO_KEY_PLACEHOLDER
        return None

    def litellm_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for LiteLLM calls (only the ones that are set)."""
        kwargs: dict[str, Any] = {"model": self.model}
        if key := self.request_key:
            kwargs["api_key"] = key
        if self.api_base:
            kwargs["api_base"] = self.api_base
        return kwargs

    def redact(self, text: str) -> str:
        """Remove the API key and URL credentials from text that may reach a log or a user."""
        if self.api_key:
            # Also a key too short for the process-wide filter.
            text = text.replace(self.api_key, PLACEHOLDER)
        return SECRET_FILTER.redact(text)


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Generation settings of one agent."""

    temperature: float | None = None
    max_tokens: int | None = None
    request_timeout: float = 60
    # Ollama's native API only (`ollama_chat/`, ollama_chat.py); other providers never
    # receive them.
    # The context window in tokens (Ollama's `num_ctx`; None: Ollama's own default).
    context_window: int | None = None
    # Seconds Ollama keeps the model loaded after a request (-1: until it is stopped;
    # None: Ollama's own default of 5 minutes).
    keep_alive: int | None = None
    # Whether a reasoning model thinks first (Ollama's `think`; None: the model decides).
    think: bool | None = None


def provider_of(model: str) -> str:
    """The LiteLLM provider prefix of a model string ("ollama_chat/llama3.2" → "ollama_chat")."""
    return model.partition("/")[0]


# LiteLLM names Ollama's chat and generate APIs as two providers; one server serves both.
_SAME_SERVER_PROVIDERS = {"ollama_chat": "ollama"}


def _provider_family(model: str) -> str | None:
    """The provider prefix of a model string, Ollama's two APIs as one; None without a
    prefix (LiteLLM would guess the provider from the name, and a guess must not decide
    where a key goes)."""
    provider, separator, _ = model.partition("/")
    return _SAME_SERVER_PROVIDERS.get(provider, provider) if separator else None


def same_place(model: str, api_base: str | None, main: ModelAccess) -> bool:
    """Whether a second model (a role's, the embedding model) is reached where `main` is:
    the same provider, and no base URL of its own or the same one (a trailing slash does
    not make another server). Only then may it borrow the main model's key: a key must
    never reach a provider or server it was not given for."""
    provider = _provider_family(model)
    if provider is None or provider != _provider_family(main.model):
        return False
    return not api_base or (api_base.rstrip("/") == (main.api_base or "").rstrip("/"))
