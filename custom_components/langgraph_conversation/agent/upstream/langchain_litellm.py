"""Keeping each call's key and base URL with that call, in langchain-litellm's ChatLiteLLM.

Behaviour worked around (checked on langchain-litellm 0.5.1): ChatLiteLLM builds every
call's parameters in its `_client_params` property, which writes the call's api_key and
api_base into LiteLLM's module-wide settings (its `client` is the litellm module) and
leaves the key out of the parameters themselves; `_create_message_dicts(messages, stop)`
returns the converted messages and those parameters (on top of `_default_params`). With
two models configured, one entry's key would then travel with another's requests, and
`ollama_chat` prefers the module-wide base URL over its own, so Ollama calls would go to
whichever server was called last. PerCallCredentials overrides `_client_params`: both go
with the call, and the module is left alone.

There is no public path that keeps credentials per call, so the override stays on every
version; on one it was not checked on (one log line says so), each call also clears any
key or base URL found in LiteLLM's module-wide settings, which this integration never sets,
so a changed upstream that writes them again cannot carry them to another entry's call.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage
from langchain_litellm import ChatLiteLLM
import litellm

from .versions import matches

CHECKED_VERSIONS = frozenset({"0.5.1"})
CHECKED = matches(
    "langchain-litellm",
    CHECKED_VERSIONS,
    "the per-call credentials override",
    "the per-call credentials stay, and every call clears LiteLLM's module-wide key and base URL",
)


def _clear_module_credentials() -> None:
    litellm.api_key = None
    litellm.api_base = None


class PerCallCredentials(ChatLiteLLM):
    """ChatLiteLLM whose calls carry their own key and base URL."""

    @property
    def _client_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            **self._default_params,
            "model": self.model_name or self.model,
            "timeout": self.request_timeout,
            "api_base": self.api_base,
        }
        if self.api_key:
            params["api_key"] = self.api_key
        if self.extra_headers is not None:
            params["extra_headers"] = self.extra_headers
        return params

    def _create_message_dicts(
        self, messages: list[BaseMessage], stop: list[str] | None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        message_dicts, params = super()._create_message_dicts(messages, stop)
        if not CHECKED:
            _clear_module_credentials()
        return message_dicts, params

    def request(
        self, messages: list[BaseMessage], stop: list[str] | None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The message dicts and parameters langchain-litellm would send for `messages`."""
        return self._create_message_dicts(messages, stop)
