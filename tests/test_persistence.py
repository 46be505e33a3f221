"""Conversations live in threads.db: they survive reloads, pending confirmations too."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
import sqlite3

from freezegun.api import FrozenDateTimeFactory
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service

from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import device_registry as dr, issue_registry as ir
from homeassistant.setup import async_setup_component

from .conftest import agent_entity_id
from .fakes import FakeOpenAIServer, ToolCall
from .helpers import assist_tool_name, text_of


async def _ask(hass: HomeAssistant, entry: MockConfigEntry, text: str, conversation_id: str | None):
    return await conversation.async_converse(
        hass, text, conversation_id, Context(), agent_id=agent_entity_id(hass, entry)
    )


async def _reload(hass: HomeAssistant, entry: MockConfigEntry) -> None:
    """Unload (closing the files) and set up again."""
    assert await hass.config_entries.async_unload(entry.entry_id)
    await hass.async_block_till_done()
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()


async def test_conversation_continues_after_reload(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The same conversation id picks up the thread from threads.db."""
    openai_server.add_text("Nice to meet you, Ada.")
    first = await _ask(hass, setup_integration, "My name is Ada.", None)
    threads_db = Path(hass.config.path("langgraph_conversation", "threads.db"))
    assert await hass.async_add_executor_job(threads_db.is_file)
    await _reload(hass, setup_integration)

    openai_server.add_text("You are Ada.")
    await _ask(hass, setup_integration, "Who am I?", first.conversation_id)
    seen = [(m["role"], text_of(m)) for m in openai_server.requests[-1]["messages"][1:]]
    assert seen == [
        ("user", "My name is Ada."),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "Who am I?"),
    ]


async def test_confirmation_pending_across_reload(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A question asked before a reload is answered after it."""
    hass.states.async_set("lock.front_door", "locked", {"friendly_name": "Front Door"})
    async_expose_entity(hass, conversation.DOMAIN, "lock.front_door", True)
    unlock = async_mock_service(hass, "lock", "unlock")
    openai_server.add_tool_calls(
        [ToolCall(await assist_tool_name(hass, "HassTurnOff"), {"name": "Front Door"})]
    )
    asked = await _ask(hass, setup_integration, "Unlock the front door", None)
    assert asked.continue_conversation
    await _reload(hass, setup_integration)
    assert unlock == []

    openai_server.add_text("Unlocked.")
    done = await _ask(hass, setup_integration, "yes", asked.conversation_id)
    assert done.response.speech["plain"]["speech"] == "Unlocked."
    assert len(unlock) == 1


async def test_unusable_threads_file_falls_back_to_memory(
    hass: HomeAssistant, config_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """threads.db cannot be opened: a repair issue, and conversations still work."""
    blocker = Path(hass.config.path("langgraph_conversation", "threads.db"))
    await hass.async_add_executor_job(lambda: blocker.mkdir(parents=True))
    for component in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, component, {})
    assert await hass.config_entries.async_setup(config_entry.entry_id)
    await hass.async_block_till_done()
    assert ir.async_get(hass).async_get_issue("langgraph_conversation", "threads_unavailable")
    openai_server.add_text("Hello.")
    first = await _ask(hass, config_entry, "Hi", None)
    openai_server.add_text("You said hi.")
    await _ask(hass, config_entry, "What did I say?", first.conversation_id)
    assert [m["role"] for m in openai_server.requests[-1]["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
    ]


async def _ask_from(
    hass: HomeAssistant, entry: MockConfigEntry, text: str, device_id: str | None
) -> conversation.ConversationResult:
    """A new conversation (no id), as a satellite starts one at each wake word."""
    return await conversation.async_converse(
        hass, text, None, Context(), agent_id=agent_entity_id(hass, entry), device_id=device_id
    )


async def test_continue_recent_conversation_window(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    freezer: FrozenDateTimeFactory,
) -> None:
    """A new wake word on the same satellite within 5 minutes continues the thread."""
    kitchen = (
        dr.async_get(hass)
        .async_get_or_create(
            config_entry_id=setup_integration.entry_id, identifiers={("test", "kitchen")}
        )
        .id
    )
    hallway = (
        dr.async_get(hass)
        .async_get_or_create(
            config_entry_id=setup_integration.entry_id, identifiers={("test", "hallway")}
        )
        .id
    )
    openai_server.add_text("Sunny today.")
    await _ask_from(hass, setup_integration, "Weather today?", kitchen)

    freezer.tick(timedelta(minutes=2))
    openai_server.add_text("Rain tomorrow.")
    await _ask_from(hass, setup_integration, "And tomorrow?", kitchen)
    assert [text_of(m) for m in openai_server.requests[-1]["messages"][1:]] == [
        "Weather today?",
        "Sunny today.",
        "And tomorrow?",
    ]

    # Another satellite starts fresh.
    openai_server.add_text("Which day?")
    await _ask_from(hass, setup_integration, "And tomorrow?", hallway)
    assert len(openai_server.requests[-1]["messages"]) == 2

    # The same satellite after the window starts fresh too.
    freezer.tick(timedelta(minutes=6))
    openai_server.add_text("Which day?")
    await _ask_from(hass, setup_integration, "And then?", kitchen)
    assert len(openai_server.requests[-1]["messages"]) == 2


async def test_locked_threads_file_mid_run_continues_in_memory(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Another program locks threads.db: repair issue, the turn is answered from memory."""
    openai_server.add_text("Stored.")
    first = await _ask(hass, setup_integration, "Remember this turn", None)
    path = hass.config.path("langgraph_conversation", "threads.db")

    def lock() -> sqlite3.Connection:
        holder = sqlite3.connect(path, timeout=0, check_same_thread=False)
        holder.execute("BEGIN EXCLUSIVE")
        return holder

    holder = await hass.async_add_executor_job(lock)
    try:
        openai_server.add_text("Answered anyway.")
        result = await _ask(hass, setup_integration, "Hello again", None)
    finally:
        await hass.async_add_executor_job(holder.close)
    assert result.response.speech["plain"]["speech"] == "Answered anyway."
    issue = ir.async_get(hass).async_get_issue("langgraph_conversation", "threads_unavailable")
    assert issue is not None
    assert "locked" in issue.translation_placeholders["error"]

    # After a reload the file is used again and nothing stored before was lost.
    await _reload(hass, setup_integration)
    openai_server.add_text("Welcome back.")
    await _ask(hass, setup_integration, "And now?", first.conversation_id)
    assert [text_of(m) for m in openai_server.requests[-1]["messages"][1:]] == [
        "Remember this turn",
        "Stored.",
        "And now?",
    ]


async def test_corrupted_threads_file_is_not_replaced(
    hass: HomeAssistant, config_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A file that is not a database: repair issue, answers, and the file is left alone."""
    path = Path(hass.config.path("langgraph_conversation", "threads.db"))
    garbage = b"this is not a database, but someone's data" * 100

    def corrupt() -> None:
        path.parent.mkdir(parents=True)
        path.write_bytes(garbage)

    await hass.async_add_executor_job(corrupt)
    for component in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, component, {})
    assert await hass.config_entries.async_setup(config_entry.entry_id)
    await hass.async_block_till_done()
    assert ir.async_get(hass).async_get_issue("langgraph_conversation", "threads_unavailable")
    openai_server.add_text("Hello.")
    result = await _ask(hass, config_entry, "Hi", None)
    assert result.response.speech["plain"]["speech"] == "Hello."
    assert await hass.async_add_executor_job(path.read_bytes) == garbage
