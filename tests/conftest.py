"""Shared fixtures: a real Home Assistant core, fake model servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
import gc
from pathlib import Path
import sys
import threading
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

# Importing our package first makes the plugin find it instead of its own testing_config.
import custom_components.langgraph_conversation  # noqa: F401
from custom_components.langgraph_conversation.agent.models import (
    async_release_shared_clients,
    forget_model_windows,
)
from custom_components.langgraph_conversation.config_flow import DEFAULT_AGENT_OPTIONS
from custom_components.langgraph_conversation.const import (
    CONF_API_BASE,
    CONF_API_KEY,
    CONF_MODEL,
    DOMAIN,
    SUBENTRY_AI_TASK,
    SUBENTRY_CONVERSATION,
)
from fakes import FakeOllamaServer, FakeOpenAIServer
from homeassistant.config_entries import ConfigSubentryData
from homeassistant.core import HomeAssistant
from homeassistant.setup import async_setup_component

from .postgres import (  # noqa: F401
    postgres_database,
    postgres_server,
    postgres_url,
    storage_options,
)

TEST_MODEL = "gpt-test"
TEST_KEY = "sk-test-0123456789abcdef"


@pytest.fixture(autouse=True)
def join_litellm_failure_threads() -> Iterator[None]:
    """LiteLLM logs a failed stream on a short-lived thread; let it end before the checks."""
    yield
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and "failure_handler" in thread.name:
            thread.join(timeout=5)


@pytest.fixture(autouse=True)
async def close_abandoned_generators() -> AsyncIterator[None]:
    """Let the loop finish closing the async generators a test's own SDK calls abandoned.

    The OpenAI SDK stops reading a stream at "[DONE]" and closes the HTTP response, but
    not the chain of async generators it read through (its SSE decoder, httpx's and
    httpcore's byte streams), and LiteLLM's wrapper leaves one per chunk. Python hands
    each abandoned generator to the event loop, which closes it in a task of its own, one
    link of the chain per pass of the loop. The agent closes all of them itself
    (agent/upstream/openai_stream.py; tests/agent/models/test_stream_closing.py fails if
    it does not), but tests that read the SDKs plainly (tests/test_fakes.py, the upstream
    contracts' reference reads) still leave them, and on a busy machine the last links
    could be pending when Home Assistant's plugin looks for lingering tasks. Only those
    closing tasks are waited for here (a few seconds at most); any other task a test
    leaves behind still fails it.
    """
    yield
    # Generators in reference cycles are handed over only by the collector: now, not
    # during a later test.
    gc.collect(1)
    for _ in range(50):
        await asyncio.sleep(0)
        closing = [task for task in asyncio.all_tasks() if _closes_a_generator(task)]
        if not closing:
            return
        await asyncio.wait(closing, timeout=5)


def _closes_a_generator(task: asyncio.Task[Any]) -> bool:
    """Whether the loop started `task` to close an abandoned async generator."""
    return type(task.get_coro()).__name__ == "async_generator_athrow"


@pytest.fixture(autouse=True)
def fresh_model_windows() -> Iterator[None]:
    """Each test's fake Ollama server is asked for its models' windows: a server on a port
    an earlier test used must not inherit that test's answer."""
    forget_model_windows()
    yield
    forget_model_windows()


@pytest.fixture(autouse=True)
async def release_litellm_clients() -> AsyncIterator[None]:
    """Tests without an entry to unload (config flows) still leave no LiteLLM client open.

    Nor do tests that call LiteLLM plainly (tests/test_fakes.py): the integration closes
    LiteLLM's clients only once it has loaded its own LiteLLM module, which such a test
    may never do when it runs alone.
    """
    yield
    await async_release_shared_clients()
    if "litellm" in sys.modules:
        from custom_components.langgraph_conversation.agent.upstream import litellm_release

        await litellm_release.close_shared_clients()


@pytest.fixture(autouse=True)
def isolated_config_dir(hass: HomeAssistant, tmp_path: Path) -> None:
    """Each test's files (memory.db, threads.db) live in its own config directory.

    The plugin points every test at one shared testing_config directory; files written
    there would carry one test's memories into the next.
    """
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    hass.config.config_dir = str(config_dir)


@pytest.fixture(autouse=True)
def auto_enable_custom_integrations(enable_custom_integrations: None) -> None:
    """Every test may load custom integrations."""


@pytest.fixture
async def openai_server(socket_enabled: None) -> AsyncIterator[FakeOpenAIServer]:
    """An OpenAI-compatible server on 127.0.0.1 that requires TEST_KEY."""
    async with FakeOpenAIServer() as server:
        server.api_key = TEST_KEY
        yield server


@pytest.fixture
async def ollama_server(socket_enabled: None) -> AsyncIterator[FakeOllamaServer]:
    """An Ollama /api/chat server on 127.0.0.1."""
    async with FakeOllamaServer() as server:
        yield server


@pytest.fixture
def agent_overrides() -> dict[str, Any]:
    """Options a test changes on its agent (parametrize this fixture)."""
    return {}


@pytest.fixture
def agent_options(agent_overrides: dict[str, Any]) -> dict[str, Any]:
    """Options of the test agent: the defaults plus the test's overrides."""
    return {**DEFAULT_AGENT_OPTIONS, **agent_overrides}


def _test_entry(
    api_base: str, subentries: list[ConfigSubentryData], options: dict[str, Any] | None = None
) -> MockConfigEntry:
    """An OpenAI-compatible entry at `api_base` with these subentries (not yet added)."""
    return MockConfigEntry(
        domain=DOMAIN,
        title=f"openai/{TEST_MODEL}",
        data={
            CONF_MODEL: f"openai/{TEST_MODEL}",
            CONF_API_KEY: TEST_KEY,
            CONF_API_BASE: api_base,
        },
        options=options or {},
        subentries_data=subentries,
    )


def _test_agent(
    agent_options: dict[str, Any], subentry_id: str | None = None
) -> ConfigSubentryData:
    return ConfigSubentryData(
        data=agent_options,
        subentry_type=SUBENTRY_CONVERSATION,
        title="Test agent",
        unique_id=None,
        **({"subentry_id": subentry_id} if subentry_id else {}),
    )


def add_test_entry(
    hass: HomeAssistant,
    api_base: str,
    agent_options: dict[str, Any],
    *,
    options: dict[str, Any] | None = None,
    subentry_id: str | None = None,
) -> MockConfigEntry:
    """An OpenAI-compatible entry at `api_base` with one conversation agent (of
    `subentry_id` when given), with the entry's `options`, added to hass."""
    entry = _test_entry(api_base, [_test_agent(agent_options, subentry_id)], options)
    entry.add_to_hass(hass)
    return entry


async def set_up_task_entry(
    hass: HomeAssistant,
    api_base: str,
    task_options: dict[str, Any],
    *,
    with_agent: bool = True,
    task_title: str = "Test AI Task",
) -> MockConfigEntry:
    """An OpenAI-compatible entry at `api_base` with one AI Task of `task_options` (after
    the test agent, unless `with_agent` is False), added to hass and set up."""
    task = ConfigSubentryData(
        data=task_options, subentry_type=SUBENTRY_AI_TASK, title=task_title, unique_id=None
    )
    agent = [_test_agent(DEFAULT_AGENT_OPTIONS)] if with_agent else []
    entry = _test_entry(api_base, [*agent, task])
    entry.add_to_hass(hass)
    assert await async_setup_component(hass, "homeassistant", {})
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    return entry


@pytest.fixture
def media_dir(hass: HomeAssistant, tmp_path: Path) -> Path:
    """The local media folder, where Home Assistant's AI Task stores images (media_source
    reads it when it is set up, with our entry)."""
    media = tmp_path / "media"
    media.mkdir()
    hass.config.media_dirs = {"local": str(media)}
    return media


@pytest.fixture
def config_entry(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    agent_options: dict[str, Any],
    request: pytest.FixtureRequest,
) -> MockConfigEntry:
    """A config entry for the OpenAI-compatible fake, with one conversation agent.

    Its storage is this machine's files, or a fresh PostgreSQL database for tests marked
    with tests/postgres.py's BOTH_BACKENDS.
    """
    entry = add_test_entry(hass, openai_server.api_base, agent_options)
    if (options := storage_options(request)) is not None:
        hass.config_entries.async_update_entry(entry, options=options)
    return entry


@pytest.fixture
async def setup_integration(hass: HomeAssistant, config_entry: MockConfigEntry) -> MockConfigEntry:
    """Home Assistant with conversation, intents and our entry loaded."""
    assert await async_setup_component(hass, "homeassistant", {})
    assert await async_setup_component(hass, "conversation", {})
    assert await async_setup_component(hass, "intent", {})
    assert await hass.config_entries.async_setup(config_entry.entry_id)
    await hass.async_block_till_done()
    return config_entry


def agent_entity_id(hass: HomeAssistant, entry: MockConfigEntry) -> str:
    """The conversation entity of the entry's first agent."""
    from homeassistant.helpers import entity_registry as er

    subentry_id = next(iter(entry.subentries))
    entity_id = er.async_get(hass).async_get_entity_id("conversation", DOMAIN, subentry_id)
    assert entity_id is not None
    return entity_id
