"""The migrate_storage action: conversations (with their links and answer ratings) and
memories written through real turns on this machine's files are copied into PostgreSQL and
back; nothing is lost, a second run
copies nothing, the source stays as it was."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.const import (
    CONF_POSTGRES_URL,
    CONF_STORAGE,
    DOMAIN,
    STORAGE_POSTGRES,
)
from custom_components.langgraph_conversation.persistence import DATA_STORAGE
from custom_components.langgraph_conversation.storage import SqliteStorage
from custom_components.langgraph_conversation.storage.postgres import PostgresStorage
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.exceptions import ServiceValidationError

from .conftest import agent_entity_id
from .helpers import messages_of, text_of


async def _ask(hass: HomeAssistant, entry: MockConfigEntry, text: str, conversation_id=None):
    return await conversation.async_converse(
        hass, text, conversation_id, Context(), agent_id=agent_entity_id(hass, entry)
    )


async def _migrate(hass: HomeAssistant, direction: str) -> dict[str, Any]:
    return await hass.services.async_call(
        DOMAIN, "migrate_storage", {"direction": direction}, blocking=True, return_response=True
    )


def _digest(folder: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.glob("*.db"))
    }


def _said(server: FakeOpenAIServer) -> list[str]:
    return [text_of(m) for m in messages_of(server.requests[-1], "user")]


async def _choose_postgres(hass: HomeAssistant, entry: MockConfigEntry, url: str) -> None:
    hass.config_entries.async_update_entry(
        entry, options={**entry.options, CONF_STORAGE: STORAGE_POSTGRES, CONF_POSTGRES_URL: url}
    )
    await hass.async_block_till_done()
    assert isinstance(hass.data[DATA_STORAGE].backend, PostgresStorage)


async def test_files_move_to_postgres_and_back_without_loss(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    postgres_url: str,
) -> None:
    # On this machine's files: a conversation of two turns and two memories.
    openai_server.add_tool_calls(
        [ToolCall("memory", {"action": "remember", "text": "The cat is called Miso"})]
    )
    openai_server.add_text("Noted.")
    begun = await _ask(hass, setup_integration, "Remember our cat is called Miso")
    openai_server.add_tool_calls(
        [ToolCall("memory", {"action": "remember", "text": "Bins go out on Tuesday"})]
    )
    openai_server.add_text("Noted too.")
    await _ask(hass, setup_integration, "Remember bins go out on Tuesday", begun.conversation_id)
    # The second answer is rated (an automation: no user, so the conversation without one).
    conversation_of_agent = {
        "agent": agent_entity_id(hass, setup_integration),
        "conversation_id": begun.conversation_id,
    }
    await hass.services.async_call(
        DOMAIN,
        "rate_answer",
        {**conversation_of_agent, "rating": "up", "comment": "Clear"},
        blocking=True,
        return_response=True,
    )
    folder = Path(hass.config.path(DOMAIN))

    await _choose_postgres(hass, setup_integration, postgres_url)
    before = await hass.async_add_executor_job(_digest, folder)
    moved = await _migrate(hass, "to_postgresql")
    assert moved["ratings"] == {"copied": 1, "already_there": 0}
    assert moved["threads"] == {"copied": 1, "already_there": 0}
    assert moved["conversation_links"] == {"copied": 1, "already_there": 0}
    assert moved["checkpoints_copied"] >= 1
    assert moved["memories"]["copied"] == 2
    assert moved["memories"]["already_there"] == 0
    # The source files are only read.
    assert await hass.async_add_executor_job(_digest, folder) == before

    # Idempotent: a second run finds everything there.
    again = await _migrate(hass, "to_postgresql")
    assert again["threads"] == {"copied": 0, "already_there": 1}
    assert again["checkpoints_copied"] == 0
    assert again["conversation_links"] == {"copied": 0, "already_there": 1}
    assert again["memories"]["copied"] == 0
    assert again["memories"]["already_there"] == 2
    assert again["ratings"] == {"copied": 0, "already_there": 1}
    # The rating is read from PostgreSQL with its answer.
    exported = await hass.services.async_call(
        DOMAIN, "export_thread", conversation_of_agent, blocking=True, return_response=True
    )
    assert [(m["content"], m["rating"]) for m in exported["messages"] if "rating" in m] == [
        ("Noted too.", {"rating": "up", "comment": "Clear"})
    ]

    # On PostgreSQL the conversation goes on with its history, and memories are recalled.
    openai_server.add_text("Miso.")
    await _ask(hass, setup_integration, "What is the cat called?", begun.conversation_id)
    said = _said(openai_server)
    assert "Remember our cat is called Miso" in said
    assert "Remember bins go out on Tuesday" in said
    openai_server.add_text("Tuesday.")
    await _ask(hass, setup_integration, "When do the bins go out?")
    assert any("Bins go out on Tuesday" in text for text in _said(openai_server))

    # And back: a new memory made on PostgreSQL reaches the files, the rest is there.
    openai_server.add_tool_calls(
        [ToolCall("memory", {"action": "remember", "text": "Plants need water on Sunday"})]
    )
    openai_server.add_text("Noted.")
    await _ask(hass, setup_integration, "Remember plants need water on Sunday")
    back = await _migrate(hass, "to_sqlite")
    assert back["memories"]["copied"] == 1
    assert back["memories"]["already_there"] == 2
    assert back["ratings"] == {"copied": 0, "already_there": 1}
    assert back["threads"]["copied"] >= 1  # the new conversations, and the continued one
    hass.config_entries.async_update_entry(setup_integration, options={})
    await hass.async_block_till_done()
    assert isinstance(hass.data[DATA_STORAGE].backend, SqliteStorage)
    openai_server.add_text("Sunday.")
    await _ask(hass, setup_integration, "When do the plants need water?")
    assert any("Plants need water on Sunday" in text for text in _said(openai_server))
    openai_server.add_text("Miso, still.")
    await _ask(hass, setup_integration, "And the cat?", begun.conversation_id)
    assert "What is the cat called?" in _said(openai_server)


async def test_without_postgres_chosen_the_action_says_so(
    hass: HomeAssistant, setup_integration: MockConfigEntry
) -> None:
    with pytest.raises(ServiceValidationError) as caught:
        await _migrate(hass, "to_postgresql")
    assert caught.value.translation_key == "postgres_not_chosen"


async def test_a_satellites_recent_conversation_continues_after_the_move(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    postgres_url: str,
) -> None:
    """The links move too: a new wake word on the same satellite, right after the move,
    continues the conversation it had on this machine's files."""
    from homeassistant.helpers import device_registry as dr

    kitchen = (
        dr.async_get(hass)
        .async_get_or_create(
            config_entry_id=setup_integration.entry_id, identifiers={("test", "kitchen")}
        )
        .id
    )

    async def from_kitchen(text: str) -> None:
        await conversation.async_converse(
            hass,
            text,
            None,
            Context(),
            agent_id=agent_entity_id(hass, setup_integration),
            device_id=kitchen,
        )

    openai_server.add_text("Sunny today.")
    await from_kitchen("Weather today?")
    await _choose_postgres(hass, setup_integration, postgres_url)
    moved = await _migrate(hass, "to_postgresql")
    assert moved["conversation_links"]["copied"] == 1
    openai_server.add_text("Rain tomorrow.")
    await from_kitchen("And tomorrow?")
    said = _said(openai_server)
    assert "Weather today?" in said
    assert "And tomorrow?" in said
