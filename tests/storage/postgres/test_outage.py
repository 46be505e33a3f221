"""PostgreSQL stopped and started while Home Assistant runs: the storage heals itself.

A server of the test's own (the session's stays up for the other tests) is stopped as a
crash or an administrator would stop it, in the middle of use. During the outage turns are
answered from memory (conversations started before it go on with their history, new ones
begin, a memory is saved) and a repair issue says PostgreSQL failed; once the server is back,
without any reload, the repair issue goes away and everything said meanwhile is in the
database: a restart of the integration (new storage, nothing in memory) continues every
conversation with each of its turns exactly once, and finds the memory.
"""

from __future__ import annotations

from collections.abc import Iterator
import json

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.const import (
    DOMAIN,
)
from custom_components.langgraph_conversation.diagnostics import (
    async_get_config_entry_diagnostics,
)
from fakes import FakeOpenAIServer, ToolCall
from fakes.postgres_server import (
    APP_PASSWORD,
    APP_ROLE,
    RunningServer,
    ServerUnavailable,
    start_server,
)
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import issue_registry as ir
from homeassistant.setup import async_setup_component

from ...conftest import agent_entity_id
from ...helpers import messages_of, storage_down, text_of, wait_until_healed

GATE_CODE = "The gate code is 4711"
# Conversations: two held before the outage, three begun during it.
BEFORE = ("kitchen", "hall")
DURING = ("garden", "garage", "attic")
TURNS_DURING = 20


@pytest.fixture
def postgres_url(stoppable_postgres: RunningServer) -> str:
    """The entry's database (tests/postgres.py's storage_options reads this fixture): on
    the server of this test's own."""
    return stoppable_postgres.server.url("outage")


@pytest.fixture
def stoppable_postgres(socket_enabled: None) -> Iterator[RunningServer]:
    """A PostgreSQL server of this test's own, with the integration's database."""
    try:
        running = start_server()
    except ServerUnavailable as err:
        pytest.fail(f"PostgreSQL could not be started: {err}")
    try:
        running.server.sql(f"CREATE DATABASE outage OWNER {APP_ROLE}")
        yield running
    finally:
        running.stop()


class _Household:
    """Five conversations through Home Assistant's conversation API, each turn answered
    with a text of its own, and what each conversation's person said, in order."""

    def __init__(self, hass: HomeAssistant, entry: MockConfigEntry, server: FakeOpenAIServer):
        self.hass, self.entry, self.server = hass, entry, server
        self.ids: dict[str, str | None] = dict.fromkeys((*BEFORE, *DURING))
        self.said: dict[str, list[str]] = {name: [] for name in self.ids}

    async def turn(self, name: str, text: str, *, remember: str | None = None) -> None:
        if remember is not None:
            call = ToolCall("memory", {"action": "remember", "text": remember})
            self.server.add_tool_calls([call])
        answer = f"Answer {len(self.said[name])} in the {name}."
        self.server.add_text(answer)
        result = await conversation.async_converse(
            self.hass,
            text,
            self.ids[name],
            Context(),
            agent_id=agent_entity_id(self.hass, self.entry),
        )
        assert result.response.speech["plain"]["speech"] == answer
        self.ids[name] = result.conversation_id
        self.said[name].append(text)

    def sent_history(self) -> list[str]:
        """What the person said, as the model was last sent it (the new request last)."""
        return [
            text_of(m)
            for m in messages_of(self.server.requests[-1], "user")
            if not text_of(m).startswith("[Context for the request")
        ]


@pytest.mark.parametrize("config_entry", ["postgresql"], indirect=True)
async def test_postgres_stopped_and_started_heals_without_a_reload(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    config_entry: MockConfigEntry,
    stoppable_postgres: RunningServer,
) -> None:
    entry = config_entry
    for component in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, component, {})
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    house = _Household(hass, entry, openai_server)
    for name in BEFORE:
        await house.turn(name, f"Hello from the {name}.")

    await hass.async_add_executor_job(stoppable_postgres.pause)
    names = [*BEFORE, *DURING]
    for number in range(TURNS_DURING):
        name = names[number % len(names)]
        fact = GATE_CODE if number == 7 else None
        await house.turn(name, f"Turn {number} in the {name}.", remember=fact)
        if name in BEFORE and house.said[name][0] == f"Hello from the {name}.":
            # A conversation held before the outage goes on with its history meanwhile.
            assert house.sent_history()[0] == f"Hello from the {name}."
    assert storage_down(hass) == {"database"}
    issue = ir.async_get(hass).async_get_issue(DOMAIN, "postgres_unavailable")
    assert issue is not None
    assert APP_PASSWORD not in json.dumps(issue.translation_placeholders)

    await hass.async_add_executor_job(stoppable_postgres.resume)
    await wait_until_healed(hass)
    assert ir.async_get(hass).async_get_issue(DOMAIN, "postgres_unavailable") is None
    diagnostics = await async_get_config_entry_diagnostics(hass, entry)
    health = diagnostics["storage"]["health"]["database"]
    assert health["state"] == "up"
    assert health["outages"] == 1
    assert health["failed_at"] < health["recovered_at"]
    assert health["written_back"]["conversations"] == len(names)
    assert health["written_back"]["memory_writes"] == 1
    assert APP_PASSWORD not in json.dumps(diagnostics)
    # The next turn goes to the database itself.
    await house.turn("garden", "Back in the garden.")

    # A restart: the storage is opened anew, nothing is left in memory.
    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    for name in names:
        await house.turn(name, f"After the restart, in the {name}.")
        # Every turn of the conversation, each once and in order, then this one.
        assert house.sent_history() == house.said[name], name
    openai_server.add_text("It is 4711.")
    await conversation.async_converse(
        hass, "What is the gate code?", None, Context(), agent_id=agent_entity_id(hass, entry)
    )
    assert GATE_CODE in json.dumps(openai_server.requests[-1])
