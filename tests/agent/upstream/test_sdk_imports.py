"""Contract of agent/upstream/sdk_imports.py: the private modules the first embedding (and chat)
request imports still exist under those names and are what the SDKs use, on the releases
Home Assistant pins.

That the warm-up leaves the first embedding nothing to import is checked through LiteLLM's
real client in tests/agent/models/test_embeddings.py and tests/test_blocking.py.
"""

from __future__ import annotations

import importlib

import pytest

from custom_components.langgraph_conversation.agent.upstream import sdk_imports, versions

OPENAI = versions.installed("openai")


def test_the_installed_sdks_are_checked_ones() -> None:
    """A Home Assistant release pinning another OpenAI SDK or anyio lands here first."""
    assert OPENAI in sdk_imports.CHECKED_OPENAI
    assert versions.installed("anyio") in sdk_imports.CHECKED_ANYIO
    assert versions.installed("litellm") in sdk_imports.CHECKED_LITELLM
    assert (
        *sdk_imports.PUBLIC_MODULES,
        *sdk_imports.OPENAI_PRIVATE[OPENAI],
        *sdk_imports.ANYIO_PRIVATE,
        *sdk_imports.LITELLM_PRIVATE,
    ) == sdk_imports.FIRST_EMBEDDING_MODULES


@pytest.mark.parametrize("name", sdk_imports.FIRST_EMBEDDING_MODULES)
def test_each_module_still_exists_under_its_name(name: str) -> None:
    assert importlib.import_module(name).__name__ == name


def test_the_sdk_embedding_resource_uses_its_private_modules() -> None:
    resource = importlib.import_module("openai.resources.embeddings")
    used = {getattr(value, "__module__", None) for value in vars(resource).values()}
    for name in sdk_imports.OPENAI_PRIVATE[OPENAI]:
        assert name in used


def test_anyio_and_litellm_modules_hold_what_their_callers_take() -> None:
    # anyio's backend loader reads `backend_class` from the backend module;
    # LiteLLM's first embedding call builds a ServiceLogging.
    backend = importlib.import_module("anyio._backends._asyncio")
    assert backend.backend_class.__name__ == "AsyncIOBackend"
    assert hasattr(importlib.import_module("litellm._service_logger"), "ServiceLogging")


def test_the_first_chat_modules_are_the_public_ones_then_the_checked_private_ones() -> None:
    assert (*sdk_imports.CHAT_PUBLIC_MODULES, *sdk_imports.ANYIO_PRIVATE) == (
        sdk_imports.FIRST_CHAT_MODULES
    )
    assert (
        *sdk_imports.LITELLM_CHAT_PUBLIC_MODULES,
        *sdk_imports.ANYIO_PRIVATE,
        *sdk_imports.LITELLM_CHAT_PRIVATE,
    ) == sdk_imports.FIRST_LITELLM_CHAT_MODULES
    # Every chat call's list names no LiteLLM module: an Ollama setup never loads it.
    assert not [name for name in sdk_imports.FIRST_CHAT_MODULES if name.startswith("litellm")]


@pytest.mark.parametrize(
    "name", sdk_imports.FIRST_CHAT_MODULES + sdk_imports.FIRST_LITELLM_CHAT_MODULES
)
def test_each_first_chat_module_exists_under_its_name(name: str) -> None:
    """On these releases each is there: the warm-up's import of it is not skipped (that a
    first call then imports nothing is tests/agent/models/test_warm_up_imports.py's)."""
    assert importlib.import_module(name).__name__ == name
