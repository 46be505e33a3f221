"""Ollama's native API options of an agent: window, keep-alive, thinking.

What reaches the fake Ollama server through LiteLLM's real client, what an
OpenAI-compatible server gets instead (none of them), and the agent form's fields.
"""

from __future__ import annotations

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.const import (
    CONF_CONTEXT_WINDOW,
    CONF_KEEP_ALIVE,
    CONF_THINK,
    SUBENTRY_CONVERSATION,
)
from fakes import FakeOllamaServer, FakeOpenAIServer
from homeassistant import config_entries
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.data_entry_flow import FlowResultType

from .conftest import agent_entity_id
from .helpers import setup_ollama_entry

_OLLAMA_FIELDS = {CONF_CONTEXT_WINDOW, CONF_KEEP_ALIVE, CONF_THINK}


async def _ask(hass: HomeAssistant, entry: MockConfigEntry, text: str = "Hello") -> str:
    result = await conversation.async_converse(
        hass, text, None, Context(), agent_id=agent_entity_id(hass, entry)
    )
    return result.response.speech["plain"]["speech"]


async def test_defaults_keep_the_model_loaded_in_a_sent_window(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """An agent saved before these options existed gets Home Assistant's defaults."""
    entry = await setup_ollama_entry(hass, ollama_server)
    ollama_server.add_text("Hi.")
    assert await _ask(hass, entry) == "Hi."
    request = ollama_server.requests[0]
    assert request["options"]["num_ctx"] == 8192
    assert request["keep_alive"] == -1
    assert "think" not in request
    assert ollama_server.loaded_models() == ["llama3.2:latest"]


@pytest.mark.parametrize(("think", "sent"), [("on", True), ("off", False)])
async def test_chosen_options_are_sent(
    hass: HomeAssistant, ollama_server: FakeOllamaServer, think: str, sent: bool
) -> None:
    entry = await setup_ollama_entry(
        hass, ollama_server, **{CONF_CONTEXT_WINDOW: 6144, CONF_KEEP_ALIVE: 0, CONF_THINK: think}
    )
    ollama_server.add_text("Hi.")
    await _ask(hass, entry)
    request = ollama_server.requests[0]
    assert (request["options"]["num_ctx"], request["keep_alive"], request["think"]) == (
        6144,
        0,
        sent,
    )
    # keep_alive 0: the model is unloaded right after the answer.
    assert ollama_server.loaded_models() == []


async def test_the_window_is_bounded_by_the_model(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """A window larger than the model holds is cut to its context length, asked once."""
    ollama_server.context_length = 4096
    entry = await setup_ollama_entry(hass, ollama_server, **{CONF_CONTEXT_WINDOW: 32768})
    for _ in range(2):
        ollama_server.add_text("Hi.")
        await _ask(hass, entry)
    assert [r["options"]["num_ctx"] for r in ollama_server.requests] == [4096, 4096]
    assert ollama_server.paths.count("POST /api/show") == 1


async def test_a_reload_asks_the_server_again(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """A model replaced under the same name (another context length) is seen after the
    integration is reloaded, not only after Home Assistant restarts."""
    ollama_server.context_length = 4096
    entry = await setup_ollama_entry(hass, ollama_server, **{CONF_CONTEXT_WINDOW: 32768})
    ollama_server.add_text("Hi.")
    await _ask(hass, entry)
    ollama_server.context_length = 16384
    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    ollama_server.add_text("Hi again.")
    await _ask(hass, entry)
    assert [r["options"]["num_ctx"] for r in ollama_server.requests] == [4096, 16384]
    assert ollama_server.paths.count("POST /api/show") == 2


async def test_a_model_without_a_reported_length_keeps_the_configured_window(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """/api/show without a context length (an older server) costs the bound only."""
    ollama_server.context_length = None
    entry = await setup_ollama_entry(hass, ollama_server, **{CONF_CONTEXT_WINDOW: 16384})
    ollama_server.add_text("Hi.")
    assert await _ask(hass, entry) == "Hi."
    assert ollama_server.paths.count("POST /api/show") == 1
    assert ollama_server.requests[0]["options"]["num_ctx"] == 16384


async def test_openai_compatible_servers_get_none_of_them(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add_text("Hi.")
    await _ask(hass, setup_integration)
    request = openai_server.requests[0]
    assert not {"num_ctx", "keep_alive", "think", "options"} & request.keys()
    assert "POST /api/show" not in openai_server.paths


async def _agent_form(hass: HomeAssistant, entry: MockConfigEntry) -> set[str]:
    result = await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION), context={"source": config_entries.SOURCE_USER}
    )
    assert result["type"] is FlowResultType.FORM
    return {str(key) for key in result["data_schema"].schema}


async def test_the_form_shows_them_for_ollama_only(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    ollama_server: FakeOllamaServer,
) -> None:
    assert not _OLLAMA_FIELDS & await _agent_form(hass, setup_integration)
    local = await setup_ollama_entry(hass, ollama_server)
    assert await _agent_form(hass, local) >= _OLLAMA_FIELDS


async def test_the_form_stores_whole_numbers(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    entry = await setup_ollama_entry(hass, ollama_server)
    result = await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION), context={"source": config_entries.SOURCE_USER}
    )
    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"],
        {
            "name": "Thinker",
            CONF_CONTEXT_WINDOW: 12288.0,
            CONF_KEEP_ALIVE: 600.0,
            CONF_THINK: "off",
        },
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.CREATE_ENTRY
    thinker = next(s for s in entry.subentries.values() if s.title == "Thinker")
    assert thinker.data[CONF_CONTEXT_WINDOW] == 12288
    assert isinstance(thinker.data[CONF_CONTEXT_WINDOW], int)
    assert thinker.data[CONF_KEEP_ALIVE] == 600
    assert thinker.data[CONF_THINK] == "off"
