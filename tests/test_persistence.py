"""Conversations live in threads.db: they survive reloads, pending confirmations too."""

from __future__ import annotations

from contextlib import closing
from datetime import timedelta
from pathlib import Path
import sqlite3

from freezegun.api import FrozenDateTimeFactory
import pytest
from pytest_homeassistant_custom_component.common import (
    MockConfigEntry,
    async_mock_service,
)

from custom_components.langgraph_conversation import persistence
from custom_components.langgraph_conversation.agent.models import ModelAccess
from custom_components.langgraph_conversation.const import (
    CONF_CHECKPOINTS_KEPT,
    CONF_EMBEDDING_API_KEY,
    CONF_EMBEDDING_MODEL,
    CONF_THREAD_IDLE_DAYS,
    DOMAIN,
)
from custom_components.langgraph_conversation.persistence import (
    DATA_STORAGE,
    StorageSettings,
    combine_settings,
)
from custom_components.langgraph_conversation.storage.postgres import PostgresStorage
from fakes import FakeOllamaServer, FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import Context, HomeAssistant, ServiceCall
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers import device_registry as dr, issue_registry as ir
from homeassistant.setup import async_setup_component

from .conftest import TEST_KEY, agent_entity_id
from .helpers import add_light, assist_tool_name, conversations_written, text_of
from .postgres import BOTH_BACKENDS


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


@BOTH_BACKENDS
async def test_conversation_continues_after_reload(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The same conversation id picks up the thread from threads.db (or PostgreSQL)."""
    openai_server.add_text("Nice to meet you, Ada.")
    first = await _ask(hass, setup_integration, "My name is Ada.", None)
    threads_db = Path(hass.config.path("langgraph_conversation", "threads.db"))
    on_postgres = isinstance(hass.data[DATA_STORAGE].backend, PostgresStorage)
    assert on_postgres is ("postgres_url" in setup_integration.options)
    # With PostgreSQL nothing is written under the configuration directory.
    assert await hass.async_add_executor_job(threads_db.is_file) is not on_postgres
    await _reload(hass, setup_integration)

    openai_server.add_text("You are Ada.")
    await _ask(hass, setup_integration, "Who am I?", first.conversation_id)
    seen = [(m["role"], text_of(m)) for m in openai_server.requests[-1]["messages"][1:]]
    assert seen == [
        ("user", "My name is Ada."),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "Who am I?"),
    ]


@BOTH_BACKENDS
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


def _rows(path: Path) -> tuple[int, ...]:
    """How many rows each conversation table of threads.db holds (a second connection)."""
    with closing(sqlite3.connect(path)) as connection:
        return tuple(
            connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("checkpoints", "channel_blobs", "checkpoint_writes")
        )


async def test_a_turn_is_written_whole_as_it_ends(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """While a turn runs, nothing of it is in threads.db: not its request, not the tool
    call it is carrying out. When it answers, all of it is, and the next turn reads it."""
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    path = Path(hass.config.path("langgraph_conversation", "threads.db"))
    openai_server.add_text("Hello.")
    first = await _ask(hass, setup_integration, "Hi", None)
    await conversations_written(hass)
    before = await hass.async_add_executor_job(_rows, path)
    seen_while_acting: list[tuple[int, ...]] = []

    async def turn_on(call: ServiceCall) -> None:
        seen_while_acting.append(await hass.async_add_executor_job(_rows, path))

    hass.services.async_register("light", "turn_on", turn_on)
    tool = await assist_tool_name(hass, "HassTurnOn")
    openai_server.add_tool_calls([ToolCall(tool, {"name": "Kitchen Light"})])
    openai_server.add_text("The kitchen light is on.")
    await _ask(hass, setup_integration, "Turn on the kitchen light", first.conversation_id)

    assert seen_while_acting == [before]
    await conversations_written(hass)
    after = await hass.async_add_executor_job(_rows, path)
    assert after[0] > before[0]
    openai_server.add_text("You asked for the kitchen light.")
    await _ask(hass, setup_integration, "What did I ask?", first.conversation_id)
    sent = openai_server.requests[-1]["messages"][1:]
    assert [message["role"] for message in sent] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert sent[3]["tool_calls"][0]["function"]["name"] == tool
    assert text_of(sent[5]) == "The kitchen light is on."


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


def _said(request: dict) -> list[str]:
    """What the person and the assistant said in a request (no system message, no notes)."""
    return [
        text_of(m)
        for m in request["messages"][1:]
        if not text_of(m).startswith("[Context for the request")
    ]


@BOTH_BACKENDS
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
    assert _said(openai_server.requests[-1]) == ["Weather today?", "Sunny today.", "And tomorrow?"]

    # Another satellite starts fresh.
    openai_server.add_text("Which day?")
    await _ask_from(hass, setup_integration, "And tomorrow?", hallway)
    assert _said(openai_server.requests[-1]) == ["And tomorrow?"]

    # The same satellite after the window starts fresh too.
    freezer.tick(timedelta(minutes=6))
    openai_server.add_text("Which day?")
    await _ask_from(hass, setup_integration, "And then?", kitchen)
    assert _said(openai_server.requests[-1]) == ["And then?"]


async def test_locked_threads_file_mid_run_continues_in_memory(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Another program locks threads.db: repair issue, the turn is answered from memory."""
    openai_server.add_text("Stored.")
    first = await _ask(hass, setup_integration, "Remember this turn", None)
    # Stored before the other program comes (a turn answers while it is written).
    await conversations_written(hass)
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
    # The turn answered from memory was written back, at the latest as the storage closed.
    openai_server.add_text("You said hello.")
    await _ask(hass, setup_integration, "What did I say?", result.conversation_id)
    assert [text_of(m) for m in openai_server.requests[-1]["messages"][1:]] == [
        "Hello again",
        "Answered anyway.",
        "What did I say?",
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


# -- retention options -----------------------------------------------------------------


def _checkpoints_per_thread(path: Path) -> dict[str, int]:
    with closing(sqlite3.connect(path)) as connection:
        rows = connection.execute(
            "SELECT thread_id, COUNT(*) FROM checkpoints GROUP BY thread_id"
        ).fetchall()
    return dict(rows)


async def test_options_flow_sets_retention_and_reloads(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """ "Configure" keeps 5 checkpoints and never deletes idle conversations."""
    flow = await hass.config_entries.options.async_init(setup_integration.entry_id)
    assert flow["type"] is FlowResultType.FORM
    assert flow["step_id"] == "init"
    result = await hass.config_entries.options.async_configure(
        flow["flow_id"], {CONF_CHECKPOINTS_KEPT: 5, CONF_THREAD_IDLE_DAYS: 0}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    await hass.async_block_till_done()
    assert setup_integration.options == {CONF_CHECKPOINTS_KEPT: 5, CONF_THREAD_IDLE_DAYS: 0}
    shared = hass.data[DATA_STORAGE]
    assert shared.settings == StorageSettings(checkpoints_kept=5, thread_idle_days=0)

    conversation_id = None
    # One checkpoint per turn (a run is saved as it ends): seven turns, five kept.
    for turn in range(7):
        openai_server.add_text(f"Answer {turn}.")
        conversation_id = (
            await _ask(hass, setup_integration, f"Question {turn}", conversation_id)
        ).conversation_id
    path = Path(hass.config.path("langgraph_conversation", "threads.db"))
    assert list((await hass.async_add_executor_job(_checkpoints_per_thread, path)).values()) == [5]


async def test_options_flow_checks_the_embedding_model(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """An embedding model the server does not have is refused with a clear error."""
    openai_server.models = {"gpt-test", "embed-test"}
    flow = await hass.config_entries.options.async_init(setup_integration.entry_id)
    answer = {
        CONF_CHECKPOINTS_KEPT: 3,
        CONF_THREAD_IDLE_DAYS: 30,
        CONF_EMBEDDING_MODEL: "openai/no-such-embed",
    }
    result = await hass.config_entries.options.async_configure(flow["flow_id"], answer)
    assert result["type"] is FlowResultType.FORM
    assert result["errors"] == {"base": "model_not_found"}
    answer[CONF_EMBEDDING_MODEL] = " openai/embed-test "
    result = await hass.config_entries.options.async_configure(flow["flow_id"], answer)
    assert result["type"] is FlowResultType.CREATE_ENTRY
    await hass.async_block_till_done()
    # No key was typed: the entry's own key is reused (same provider and server), not stored.
    assert setup_integration.options[CONF_EMBEDDING_MODEL] == "openai/embed-test"
    assert CONF_EMBEDDING_API_KEY not in setup_integration.options
    settings = hass.data[DATA_STORAGE].settings
    assert settings.embedding is not None
    assert settings.embedding.api_key == TEST_KEY


async def test_differing_options_combine_towards_keeping_more(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    ollama_server: FakeOllamaServer,
) -> None:
    """Most checkpoints, longest idle age (0 = never wins), the first entry's embedding model."""
    hass.config_entries.async_update_entry(
        setup_integration, options={CONF_CHECKPOINTS_KEPT: 2, CONF_THREAD_IDLE_DAYS: 10}
    )
    await hass.async_block_till_done()
    other = MockConfigEntry(
        domain=DOMAIN,
        data={"model": "ollama_chat/llama3.2", "api_base": ollama_server.base_url},
        options={
            CONF_CHECKPOINTS_KEPT: 7,
            CONF_THREAD_IDLE_DAYS: 60,
            CONF_EMBEDDING_MODEL: "ollama/nomic-embed-text",
        },
    )
    other.add_to_hass(hass)
    assert await hass.config_entries.async_setup(other.entry_id)
    await hass.async_block_till_done()
    shared = hass.data[DATA_STORAGE]
    assert shared.settings.as_diagnostics() == {
        "storage": "sqlite",
        "checkpoints_kept_per_conversation": 7,
        "delete_conversations_idle_days": 60,
        "embeddings": True,
        "embedding_model": "ollama/nomic-embed-text",
    }
    assert shared.backend is not None
    assert shared.backend.saver is not None
    assert shared.backend.saver.keep_last == 7
    # The Ollama entry's server is the embedding model's address; no key goes there.
    assert shared.settings.embedding == ModelAccess(
        "ollama/nomic-embed-text", None, ollama_server.base_url
    )

    hass.config_entries.async_update_entry(
        setup_integration,
        options={
            CONF_CHECKPOINTS_KEPT: 2,
            CONF_THREAD_IDLE_DAYS: 0,
            CONF_EMBEDDING_MODEL: "openai/embed-test",
        },
    )
    await hass.async_block_till_done()
    shared = hass.data[DATA_STORAGE]
    assert shared.settings.thread_idle_days == 0
    # The first entry (in Home Assistant's order) that sets an embedding model decides.
    assert shared.settings.embedding == ModelAccess(
        "openai/embed-test", TEST_KEY, openai_server.api_base
    )

    assert await hass.config_entries.async_unload(other.entry_id)
    await hass.async_block_till_done()
    assert shared.settings.checkpoints_kept == 2
    assert shared.backend.saver.keep_last == 2


def test_combining_no_entries_gives_the_defaults() -> None:
    """Nothing to combine: the documented defaults."""
    assert combine_settings([]) == StorageSettings(checkpoints_kept=3, thread_idle_days=30)


@BOTH_BACKENDS
@pytest.mark.parametrize(("idle_days", "deleted"), [(30, 1), (0, 0)])
async def test_idle_conversations_are_deleted_unless_never(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    freezer: FrozenDateTimeFactory,
    idle_days: int,
    deleted: int,
) -> None:
    """A conversation idle for 400 days goes with 30 days, and stays with 0 (never)."""
    hass.config_entries.async_update_entry(
        setup_integration,
        options={
            **setup_integration.options,
            CONF_CHECKPOINTS_KEPT: 3,
            CONF_THREAD_IDLE_DAYS: idle_days,
        },
    )
    await hass.async_block_till_done()
    openai_server.add_text("Hello.")
    await _ask(hass, setup_integration, "Hi", None)
    # Read from the database's own saver: after the writes on their way.
    await conversations_written(hass)
    shared = hass.data[DATA_STORAGE]
    assert (await shared.backend.saver.stats())["threads"] == 1
    freezer.tick(timedelta(days=400))
    assert await shared.async_expire_threads() == deleted
    stats = await shared.backend.saver.stats()
    assert stats["threads"] == 1 - deleted
    assert stats["conversation_links"] == 1 - deleted


async def test_expired_memory_items_are_swept_by_maintenance(
    hass: HomeAssistant, setup_integration: MockConfigEntry, freezer: FrozenDateTimeFactory
) -> None:
    """An item stored with a time to live leaves memory.db at a maintenance run;
    one without stays."""
    shared = hass.data[DATA_STORAGE]
    await shared.memory.aput(("memories", "household"), "short", {"text": "guest wifi"}, ttl=1)
    await shared.memory.aput(("memories", "household"), "kept", {"text": "tea"})
    path = Path(hass.config.path("langgraph_conversation", "memory.db"))
    assert await hass.async_add_executor_job(_item_keys, path) == ["kept", "short"]
    freezer.tick(timedelta(hours=7))
    # The maintenance run itself (Home Assistant 2026.2's frozen clock does not fire the
    # 6-hour interval timer in tests; the run is what the timer calls).
    await persistence._async_maintain(hass, shared)
    assert await hass.async_add_executor_job(_item_keys, path) == ["kept"]


def _item_keys(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        return [row[0] for row in conn.execute("SELECT key FROM items ORDER BY key")]
