"""PostgreSQL at runtime, through real turns: what only this backend has to show.

Two Home Assistant instances on one database share the household's memories and a
person's own (by the person's entity id), and continue each other's conversations; the
checkpoints kept per conversation apply; diagnostics count without naming the database; a
database that cannot be opened is a repair issue while the agent keeps answering. (The
tests both backends share are parametrised in test_persistence.py and test_memory.py.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import (
    MockConfigEntry,
    async_test_home_assistant,
)
from pytest_homeassistant_custom_component.components.diagnostics import (
    get_diagnostics_for_config_entry,
)
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

from custom_components.langgraph_conversation.const import (
    CONF_API_BASE,
    CONF_API_KEY,
    CONF_CHECKPOINTS_KEPT,
    CONF_MODEL,
    CONF_POSTGRES_URL,
    CONF_STORAGE,
    CONF_THREAD_IDLE_DAYS,
    DOMAIN,
    STORAGE_POSTGRES,
    SUBENTRY_CONVERSATION,
)
from custom_components.langgraph_conversation.persistence import DATA_STORAGE
from custom_components.langgraph_conversation.storage.postgres import PostgresStorage
from fakes import FakeOpenAIServer, ToolCall
from fakes.postgres_server import APP_PASSWORD, PostgresServer
from homeassistant import loader
from homeassistant.components import conversation
from homeassistant.config_entries import ConfigSubentryData
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import issue_registry as ir
from homeassistant.setup import async_setup_component

from .conftest import TEST_KEY, TEST_MODEL, agent_entity_id
from .helpers import conversations_written, messages_of, text_of


def _postgres(url: str, **options: Any) -> dict[str, Any]:
    return {CONF_STORAGE: STORAGE_POSTGRES, CONF_POSTGRES_URL: url, **options}


def _entry(api_base: str, agent_options: dict, options: dict, subentry_id: str | None = None):
    return MockConfigEntry(
        domain=DOMAIN,
        title=f"openai/{TEST_MODEL}",
        data={CONF_MODEL: f"openai/{TEST_MODEL}", CONF_API_KEY: TEST_KEY, CONF_API_BASE: api_base},
        options=options,
        subentries_data=[
            ConfigSubentryData(
                data=agent_options,
                subentry_type=SUBENTRY_CONVERSATION,
                title="Test agent",
                unique_id=None,
                **({"subentry_id": subentry_id} if subentry_id else {}),
            )
        ],
    )


async def _set_up(hass: HomeAssistant, entry: MockConfigEntry) -> None:
    entry.add_to_hass(hass)
    for component in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, component, {})
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()


async def _ask(
    hass: HomeAssistant,
    entry: MockConfigEntry,
    text: str,
    conversation_id=None,
    user_id: str | None = None,
):
    return await conversation.async_converse(
        hass, text, conversation_id, Context(user_id=user_id), agent_id=agent_entity_id(hass, entry)
    )


async def _people(hass: HomeAssistant, *names: str) -> dict[str, str]:
    """Users with a person each, through Home Assistant's auth and person integration
    (person entity `person.<name>`); their user ids by name (random per instance)."""
    users = {name: await hass.auth.async_create_user(name.title()) for name in names}
    people = [
        {"id": name, "name": name.title(), "user_id": user.id} for name, user in users.items()
    ]
    assert await async_setup_component(hass, "person", {"person": people})
    await hass.async_block_till_done()
    for name, user in users.items():
        assert hass.states.get(f"person.{name}").attributes["user_id"] == user.id
    return {name: user.id for name, user in users.items()}


def _note(server: FakeOpenAIServer) -> str:
    """The last request's context note (where recalled memories go)."""
    users = [text_of(m) for m in messages_of(server.requests[-1], "user")]
    return users[-2] if len(users) > 1 else ""


async def test_two_instances_share_memories_and_conversations(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    agent_options: dict[str, Any],
    postgres_url: str,
    tmp_path: Path,
) -> None:
    """A household memory saved through one Home Assistant is recalled through another on
    the same database, and a conversation begun on one continues on the other."""
    first = _entry(openai_server.api_base, agent_options, _postgres(postgres_url))
    await _set_up(hass, first)
    openai_server.add_tool_calls(
        [
            ToolCall(
                "memory",
                {"action": "remember", "text": "The spare key is under the blue flowerpot"},
            )
        ]
    )
    openai_server.add_text("Noted.")
    begun = await _ask(hass, first, "Remember: the spare key is under the blue flowerpot")

    second_dir = tmp_path / "second"
    second_dir.mkdir()
    async with async_test_home_assistant(config_dir=str(second_dir)) as other:
        other.data.pop(loader.DATA_CUSTOM_COMPONENTS)
        # The same agent (subentry) as on the first instance: its conversations are shared.
        subentry_id = next(iter(first.subentries))
        second = _entry(openai_server.api_base, agent_options, _postgres(postgres_url), subentry_id)
        try:
            await _set_up(other, second)
            openai_server.add_text("Under the blue flowerpot.")
            await _ask(other, second, "Where is the spare key?")
            assert "spare key is under the blue flowerpot" in _note(openai_server)

            openai_server.add_text("You asked me to remember the key.")
            await _ask(other, second, "What did I just ask you?", begun.conversation_id)
            said = [text_of(m) for m in messages_of(openai_server.requests[-1], "user")]
            assert "Remember: the spare key is under the blue flowerpot" in said
            # Nothing of it went to the second instance's configuration directory.
            assert not await other.async_add_executor_job((second_dir / DOMAIN).exists)
        finally:
            assert await other.config_entries.async_unload(second.entry_id)
            await other.async_block_till_done()
            await other.async_stop(force=True)


async def test_a_persons_memories_follow_them_to_the_other_instance(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    agent_options: dict[str, Any],
    postgres_url: str,
    tmp_path: Path,
) -> None:
    """Alice's memory saved through one Home Assistant is recalled for person.alice on the
    other (another user id there), and not for Bob, another person on that instance."""
    first = _entry(openai_server.api_base, agent_options, _postgres(postgres_url))
    await _set_up(hass, first)
    on_first = await _people(hass, "alice")
    openai_server.add_tool_calls(
        [ToolCall("memory", {"action": "remember", "text": "Alice takes her coffee black"})]
    )
    openai_server.add_text("Noted.")
    await _ask(hass, first, "Remember that I take my coffee black", user_id=on_first["alice"])
    stored = await hass.data[DATA_STORAGE].memory.asearch(("memories",), limit=10)
    assert [item.namespace for item in stored] == [("memories", "person", "alice")]

    second_dir = tmp_path / "second"
    second_dir.mkdir()
    async with async_test_home_assistant(config_dir=str(second_dir)) as other:
        other.data.pop(loader.DATA_CUSTOM_COMPONENTS)
        second = _entry(openai_server.api_base, agent_options, _postgres(postgres_url))
        try:
            await _set_up(other, second)
            on_second = await _people(other, "alice", "bob")
            assert on_second["alice"] != on_first["alice"]

            openai_server.add_text("Black.")
            await _ask(other, second, "How do I take my coffee?", user_id=on_second["alice"])
            assert "Alice takes her coffee black" in _note(openai_server)

            openai_server.add_text("I do not know.")
            await _ask(other, second, "How do I take my coffee?", user_id=on_second["bob"])
            sent = str(openai_server.requests[-1])
            assert "coffee black" not in sent
        finally:
            assert await other.config_entries.async_unload(second.entry_id)
            await other.async_block_till_done()
            await other.async_stop(force=True)


async def test_checkpoints_kept_per_conversation_apply(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    agent_options: dict[str, Any],
    postgres_url: str,
) -> None:
    """With 2 checkpoints kept, a conversation of four turns keeps 2, and still continues."""
    options = _postgres(postgres_url, **{CONF_CHECKPOINTS_KEPT: 2, CONF_THREAD_IDLE_DAYS: 30})
    entry = _entry(openai_server.api_base, agent_options, options)
    await _set_up(hass, entry)
    conversation_id = None
    for turn in range(4):
        openai_server.add_text(f"Answer {turn}.")
        conversation_id = (
            await _ask(hass, entry, f"Question {turn}", conversation_id)
        ).conversation_id
    # The last turn's checkpoint (and its pruning) is written while the turn answers.
    await conversations_written(hass)
    stats = await hass.data[DATA_STORAGE].backend.saver.stats()
    assert (stats["threads"], stats["checkpoints"]) == (1, 2)
    said = [text_of(m) for m in messages_of(openai_server.requests[-1], "user")]
    assert [text for text in said if text.startswith("Question")] == [
        f"Question {turn}" for turn in range(4)
    ]


async def test_diagnostics_count_without_naming_the_database(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    agent_options: dict[str, Any],
    postgres_url: str,
    hass_client: ClientSessionGenerator,
) -> None:
    entry = _entry(openai_server.api_base, agent_options, _postgres(postgres_url))
    await _set_up(hass, entry)
    openai_server.add_tool_calls(
        [ToolCall("memory", {"action": "remember", "text": "Tea at five"})]
    )
    openai_server.add_text("Noted.")
    await _ask(hass, entry, "Remember tea at five")
    diagnostics = await get_diagnostics_for_config_entry(hass, hass_client, entry)
    storage = diagnostics["storage"]
    assert storage["settings"]["storage"] == "postgresql"
    assert storage["threads"]["backend"] == "postgresql"
    assert storage["threads"]["threads"] == 1
    assert storage["memory"]["items"] == 1
    assert postgres_url.split("@")[1] not in str(diagnostics)
    assert APP_PASSWORD not in str(diagnostics)


async def test_unusable_database_is_a_repair_and_the_agent_answers(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    agent_options: dict[str, Any],
    postgres_server: PostgresServer,
    socket_enabled: None,
) -> None:
    """A database that is not there: a repair issue naming the problem (not the password),
    and the agent answers, keeping the conversation in memory."""
    url = postgres_server.url("no_such_database")
    entry = _entry(openai_server.api_base, agent_options, _postgres(url))
    await _set_up(hass, entry)
    issue = ir.async_get(hass).async_get_issue(DOMAIN, "postgres_unavailable")
    assert issue is not None
    assert issue.translation_placeholders["problem"] == "database_missing"
    assert APP_PASSWORD not in str(issue.translation_placeholders)
    openai_server.add_text("Hello.")
    first = await _ask(hass, entry, "Hi")
    openai_server.add_text("You said hi.")
    await _ask(hass, entry, "What did I say?", first.conversation_id)
    assert "Hi" in [text_of(m) for m in messages_of(openai_server.requests[-1], "user")]


def _refuse(server: PostgresServer, database: str) -> None:
    """The database refuses the integration's connections and cuts those it has (the
    server still runs: an administrator's doing, or a connection limit reached)."""
    server.sql(f"ALTER DATABASE {database} CONNECTION LIMIT 0")
    server.sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        f" WHERE datname = '{database}' AND pid <> pg_backend_pid()"
    )


def _admit(server: PostgresServer, database: str) -> None:
    """The database takes connections again."""
    server.sql(f"ALTER DATABASE {database} CONNECTION LIMIT -1")


async def test_database_gone_mid_use_the_answer_continues_and_nothing_is_lost(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    agent_options: dict[str, Any],
    postgres_server: PostgresServer,
    postgres_database: str,
    postgres_url: str,
) -> None:
    """The database refuses the integration's connections in the middle of use: the turn
    is answered (conversations go on in memory), a repair issue says so without the
    password, and once it is back a reload finds what was stored before."""
    entry = _entry(openai_server.api_base, agent_options, _postgres(postgres_url))
    await _set_up(hass, entry)
    openai_server.add_text("Nice to meet you, Ada.")
    before = await _ask(hass, entry, "My name is Ada.")
    # Stored before the database goes (a turn answers while it is written).
    await conversations_written(hass)

    await hass.async_add_executor_job(_refuse, postgres_server, postgres_database)
    openai_server.add_text("Still here.")
    during = await _ask(hass, entry, "Are you there?")
    assert during.response.speech["plain"]["speech"] == "Still here."
    issue = ir.async_get(hass).async_get_issue(DOMAIN, "postgres_unavailable")
    assert issue is not None
    assert APP_PASSWORD not in str(issue.translation_placeholders)

    await hass.async_add_executor_job(_admit, postgres_server, postgres_database)
    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    assert isinstance(hass.data[DATA_STORAGE].backend, PostgresStorage)
    openai_server.add_text("You are Ada.")
    await _ask(hass, entry, "Who am I?", before.conversation_id)
    said = [text_of(m) for m in messages_of(openai_server.requests[-1], "user")]
    assert "My name is Ada." in said


async def test_a_reload_just_after_the_database_returns_keeps_what_was_said_meanwhile(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    agent_options: dict[str, Any],
    postgres_server: PostgresServer,
    postgres_database: str,
    postgres_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The storage closes (an options change reloads it) after the database came back
    but before the next background retry: its close tries the database once more and
    writes back the conversation said during the outage, which goes on after the reload."""
    entry = _entry(openai_server.api_base, agent_options, _postgres(postgres_url))
    await _set_up(hass, entry)
    await hass.async_add_executor_job(_refuse, postgres_server, postgres_database)
    openai_server.add_text("Noted, the code is 4711.")
    during = await _ask(hass, entry, "The gate code is 4711.")
    health = hass.data[DATA_STORAGE].healing.threads_health
    assert not health.up
    # The retry the failing turn brought forward has failed: the next one is seconds away.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while "too many connections" not in (health.outage.error or ""):
        assert loop.time() < deadline, health.outage
        await asyncio.sleep(0.01)
    # Admitted now; the next retry is about 2 s away, so the reload below normally
    # comes first (on a very slow machine the retry may win: the outcome is the same).
    await hass.async_add_executor_job(_admit, postgres_server, postgres_database)

    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    assert "Closing while the storage is down" not in caplog.text
    assert ir.async_get(hass).async_get_issue(DOMAIN, "postgres_unavailable") is None
    openai_server.add_text("It is 4711.")
    await _ask(hass, entry, "What is the gate code?", during.conversation_id)
    said = [text_of(m) for m in messages_of(openai_server.requests[-1], "user")]
    assert said[-2:] == ["The gate code is 4711.", "What is the gate code?"]
