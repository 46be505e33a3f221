"""The storage closes whole when PostgreSQL fails on the way out.

A turn answers before its checkpoint is written (storage/healing/saver.py), so the write
may still be on its way when the entry unloads or Home Assistant stops, and the database
may fail just then. The failed database is closed beside the turns, never by them; the
storage's close must still wait for that goodbye: a pool left half closed keeps workers
that reconnect, log and wait for work for as long as Home Assistant runs.
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.persistence import DATA_STORAGE
from custom_components.langgraph_conversation.storage.postgres import PostgresStorage
from fakes import FakeOpenAIServer
from fakes.postgres_server import PostgresServer
from homeassistant.components import conversation
from homeassistant.config_entries import ConfigEntryState
from homeassistant.core import Context, HomeAssistant
from homeassistant.setup import async_setup_component

from ...conftest import agent_entity_id


@pytest.mark.parametrize("config_entry", ["postgresql"], indirect=True)
@pytest.mark.parametrize("closing", ["unload", "stop"])
async def test_a_database_failing_as_the_storage_closes_is_closed_with_it(
    hass: HomeAssistant,
    closing: str,
    openai_server: FakeOpenAIServer,
    config_entry: MockConfigEntry,
    postgres_server: PostgresServer,
    postgres_database: str,
    postgres_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    running_before = asyncio.all_tasks()
    for component in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, component, {})
    assert await hass.config_entries.async_setup(config_entry.entry_id)
    await hass.async_block_till_done()
    storage = hass.data[DATA_STORAGE].backend
    assert isinstance(storage, PostgresStorage)
    agent = agent_entity_id(hass, config_entry)
    entry_id = config_entry.entry_id

    # Another client holds the checkpoints against writes (reads go on): the turn's
    # checkpoint is surely still on its way when the turn has answered.
    holder = await psycopg.AsyncConnection.connect(postgres_url)
    try:
        await holder.execute("BEGIN")
        await holder.execute("LOCK TABLE checkpoints IN EXCLUSIVE MODE")
        openai_server.add_text("Hello.")
        result = await conversation.async_converse(hass, "Hi", None, Context(), agent_id=agent)
        assert result.response.speech["plain"]["speech"] == "Hello."
        # The entry unloads, or Home Assistant stops: the storage's close waits for the
        # write on its way.
        healing = hass.data[DATA_STORAGE].healing
        assert healing is not None
        if closing == "unload":
            ending = hass.async_create_task(hass.config_entries.async_unload(entry_id))
        else:
            ending = asyncio.get_running_loop().create_task(hass.async_stop())
        deadline = asyncio.get_running_loop().time() + 60
        while not healing.closing:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        assert not ending.done()
        # Then the database goes (every connection to it cut, the holder's too): the
        # write fails, and so does every reconnection of the pool.
        await hass.async_add_executor_job(
            postgres_server.sql, f"DROP DATABASE {postgres_database} WITH (FORCE)"
        )
        await ending
        left = [task for task in asyncio.all_tasks() if task not in running_before]
    finally:
        await holder.close()

    if closing == "unload":
        assert config_entry.state is ConfigEntryState.NOT_LOADED
    assert storage.pool.closed
    # The last attempt found no database: what it held is said to be lost.
    assert "Closing while the storage is down: 1 conversations" in caplog.text
    # Nothing goes on once the storage has closed: not the goodbye to the failed
    # database, not its pool's workers reconnecting to it.
    assert left == []
