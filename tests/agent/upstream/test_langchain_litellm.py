"""Contract of agent/upstream/langchain_litellm.py: langchain-litellm builds each call's
parameters in `_client_params`, which still writes the credentials module-wide."""

from __future__ import annotations

import inspect

from langchain_core.messages import HumanMessage
from langchain_litellm import ChatLiteLLM
import litellm
import pytest

from custom_components.langgraph_conversation.agent.upstream import langchain_litellm, versions
from custom_components.langgraph_conversation.agent.upstream.langchain_litellm import (
    PerCallCredentials,
)

KEY = "sk-contract-0123456789"
BASE = "http://127.0.0.1:9/v1"
MESSAGES = [HumanMessage("Hi")]


@pytest.fixture(autouse=True)
def module_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a test writes into LiteLLM's module-wide settings is undone after it."""
    monkeypatch.setattr(litellm, "api_key", None)
    monkeypatch.setattr(litellm, "api_base", None)


def test_the_installed_langchain_litellm_is_the_checked_one() -> None:
    """An upgrade lands here first: review agent/upstream/langchain_litellm.py for it."""
    assert versions.installed("langchain-litellm") in langchain_litellm.CHECKED_VERSIONS
    assert langchain_litellm.CHECKED


def test_the_upstream_defect_still_exists() -> None:
    """langchain-litellm's own parameters: key and base URL module-wide, no key in the call.

    If this fails, langchain-litellm keeps credentials per call now: the override can go.
    """
    _, params = ChatLiteLLM(model="openai/x", api_key=KEY, api_base=BASE)._create_message_dicts(
        MESSAGES, None
    )
    assert "api_key" not in params
    assert (litellm.api_key, litellm.api_base) == (KEY, BASE)


def test_the_members_overridden_and_called_keep_their_shape() -> None:
    assert isinstance(inspect.getattr_static(ChatLiteLLM, "_client_params"), property)
    assert isinstance(inspect.getattr_static(ChatLiteLLM, "_default_params"), property)
    signature = inspect.signature(ChatLiteLLM._create_message_dicts)
    assert list(signature.parameters) == ["self", "messages", "stop"]
    # Both streaming paths build their request through it (and so through _client_params).
    for method in (ChatLiteLLM._astream, ChatLiteLLM._agenerate):
        assert "self._create_message_dicts(" in inspect.getsource(method)
    assert "self._client_params" in inspect.getsource(ChatLiteLLM._create_message_dicts)


def test_the_call_carries_its_own_credentials() -> None:
    model = PerCallCredentials(
        model="openai/x", api_key=KEY, api_base=BASE, request_timeout=7, model_kwargs={"n": 1}
    )
    dicts, params = model.request(MESSAGES, ["STOP"])
    assert dicts == [{"role": "user", "content": "Hi"}]
    assert params["api_key"] == KEY
    assert params["api_base"] == BASE
    assert params["timeout"] == 7
    assert params["model"] == "openai/x"
    assert params["stop"] == ["STOP"]
    assert params["stream"] is False  # langchain-litellm's defaults still come along
    assert (litellm.api_key, litellm.api_base) == (None, None)


def test_another_version_also_clears_module_wide_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(langchain_litellm, "CHECKED", False)
    litellm.api_key, litellm.api_base = "someone-else", "http://elsewhere"
    _, params = PerCallCredentials(model="openai/x", api_key=KEY).request(MESSAGES, None)
    assert params["api_key"] == KEY
    assert (litellm.api_key, litellm.api_base) == (None, None)
