"""Memory search by meaning on PostgreSQL: LangGraph's vector index through pgvector, fed by
the entry's embedding model (LiteLLM against the fake /v1/embeddings), and words only when
pgvector cannot be used or the embedding model is down.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
import logging
import os
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.const import (
    CONF_EMBEDDING_MODEL,
    CONF_POSTGRES_URL,
    CONF_STORAGE,
    STORAGE_POSTGRES,
)
from custom_components.langgraph_conversation.persistence import DATA_STORAGE
from fakes import ErrorReply, FakeOpenAIServer, ToolCall
from fakes.openai_server import word_vector
from fakes.postgres_server import APP_ROLE, PostgresServer
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import issue_registry as ir

from .conftest import agent_entity_id
from .helpers import messages_of, prompt_text, text_of

EMBEDDING_MODEL = "openai/embed-test"
# The fake embedding model's "meaning": these words are about getting to work.
COMMUTING = {"bicycle": "commute", "cycles": "commute", "commute": "commute", "rides": "commute"}
MEMORY = "Ada cycles to the office on a bicycle"
QUESTION = "How should I plan my commute?"
# The entry starts on PostgreSQL (tests/postgres.py's storage_options).
ON_POSTGRESQL = pytest.mark.parametrize(
    "config_entry", ["postgresql"], indirect=True, ids=["postgresql"]
)


def _meaningful(text: str) -> list[float]:
    return word_vector(text, COMMUTING)


async def _ask(hass: HomeAssistant, entry: MockConfigEntry, text: str) -> Any:
    return await conversation.async_converse(
        hass, text, None, Context(), agent_id=agent_entity_id(hass, entry)
    )


async def _use(hass: HomeAssistant, entry: MockConfigEntry, url: str, **options: Any) -> None:
    """PostgreSQL at `url` with `options`, as the options flow saves them (the entry reloads)."""
    hass.config_entries.async_update_entry(
        entry, options={CONF_STORAGE: STORAGE_POSTGRES, CONF_POSTGRES_URL: url, **options}
    )
    await hass.async_block_till_done(wait_background_tasks=True)


async def _remember(hass: HomeAssistant, entry: MockConfigEntry, server: FakeOpenAIServer) -> str:
    """Save MEMORY through the agent's tool; the tool's result."""
    server.add_tool_calls([ToolCall("memory", {"action": "remember", "text": MEMORY})])
    server.add_text("Noted.")
    await _ask(hass, entry, "Remember: Ada cycles to the office on a bicycle")
    return text_of(messages_of(server.requests[-1], "tool")[0])


def _require_pgvector(server: PostgresServer) -> None:
    if not server.has_vector:
        pytest.skip("the server has no pgvector (Debian's postgresql-NN-pgvector)")


@pytest.fixture
async def database_without_pgvector(
    postgres_server: PostgresServer, socket_enabled: None
) -> AsyncIterator[str]:
    """A database the integration's role owns, without pgvector, which that role may not
    create (an extension takes a superuser) or the server does not have."""
    name = f"novector_{os.getpid()}"
    # psql runs in a worker thread: the test's event loop is never held up.
    await asyncio.to_thread(postgres_server.sql, f"CREATE DATABASE {name} OWNER {APP_ROLE}")
    try:
        yield postgres_server.url(name)
    finally:
        await asyncio.to_thread(postgres_server.sql, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@ON_POSTGRESQL
async def test_meaning_without_shared_words_is_recalled_with_pgvector(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    postgres_server: PostgresServer,
    postgres_url: str,
) -> None:
    """A memory about cycling to the office answers a question about commuting."""
    _require_pgvector(postgres_server)
    openai_server.embed_text = _meaningful
    await _use(hass, setup_integration, postgres_url, **{CONF_EMBEDDING_MODEL: EMBEDDING_MODEL})
    assert '"saved"' in await _remember(hass, setup_integration, openai_server)

    openai_server.add_text("By bike.")
    await _ask(hass, setup_integration, QUESTION)
    assert MEMORY in prompt_text(openai_server.requests[-1])
    embedded = [text for body in openai_server.embedding_requests for text in body["input"]]
    assert MEMORY in embedded
    stats = await hass.data[DATA_STORAGE].backend.store.stats()
    assert stats["vector_index"] is True
    assert stats["vector_problem"] is None


@ON_POSTGRESQL
async def test_without_pgvector_memories_are_found_by_words_only(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    postgres_server: PostgresServer,
    database_without_pgvector: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No pgvector (not installed, or not allowed): words find the memory, meaning does not;
    one log line and diagnostics say why, and no repair issue is raised."""
    openai_server.embed_text = _meaningful
    with caplog.at_level(logging.WARNING):
        await _use(
            hass,
            setup_integration,
            database_without_pgvector,
            **{CONF_EMBEDDING_MODEL: EMBEDDING_MODEL},
        )
        assert '"saved"' in await _remember(hass, setup_integration, openai_server)
        openai_server.add_text("On a bicycle.")
        await _ask(hass, setup_integration, "Does Ada have a bicycle?")
        assert MEMORY in prompt_text(openai_server.requests[-1])
        openai_server.add_text("No idea.")
        await _ask(hass, setup_integration, QUESTION)
        assert MEMORY not in prompt_text(openai_server.requests[-1])

    expected = "pgvector_not_allowed" if postgres_server.has_vector else "pgvector_not_installed"
    stats = await hass.data[DATA_STORAGE].backend.store.stats()
    assert (stats["vector_index"], stats["vector_problem"]) == (False, expected)
    said = [r for r in caplog.records if "searched by their words only" in r.message]
    assert len(said) == 1
    assert expected in said[0].getMessage()
    assert not [
        issue
        for (domain, _), issue in ir.async_get(hass).issues.items()
        if domain == "langgraph_conversation"
    ]


@ON_POSTGRESQL
async def test_embedding_server_down_words_still_find_memories(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    postgres_server: PostgresServer,
    postgres_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The index exists, then the embedding model fails: a memory is still saved (without a
    vector) and found by its words; the turn never fails, one line is logged."""
    _require_pgvector(postgres_server)
    openai_server.embed_text = _meaningful
    await _use(hass, setup_integration, postgres_url, **{CONF_EMBEDDING_MODEL: EMBEDDING_MODEL})
    assert (await hass.data[DATA_STORAGE].backend.store.stats())["vector_index"] is True
    openai_server.embedding_error = ErrorReply(status=500, message="embedding backend down")
    with caplog.at_level(logging.WARNING):
        assert '"saved"' in await _remember(hass, setup_integration, openai_server)
        openai_server.add_text("On a bicycle.")
        await _ask(hass, setup_integration, "Does Ada have a bicycle?")
        assert MEMORY in prompt_text(openai_server.requests[-1])
    failures = [r for r in caplog.records if "searching memories by their words" in r.message]
    assert len(failures) == 1
    assert (await hass.data[DATA_STORAGE].backend.store.stats())["items"] == 1

    # The model is back; a reload (a new embedder, without the failure's pause) gives the
    # memory its vector in the background, and meaning finds it again.
    openai_server.embedding_error = None
    assert await hass.config_entries.async_reload(setup_integration.entry_id)
    await hass.async_block_till_done(wait_background_tasks=True)
    openai_server.add_text("By bike.")
    await _ask(hass, setup_integration, QUESTION)
    assert MEMORY in prompt_text(openai_server.requests[-1])
