"""Ollama's native API options of an agent: window, keep-alive, thinking.

What reaches the fake Ollama server through LiteLLM's real client, what an
OpenAI-compatible server gets instead (none of them), and the agent form's fields.
"""

from __future__ import annotations

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry
import voluptuous as vol

from custom_components.langgraph_conversation.config_flow import DEFAULT_AGENT_OPTIONS
from custom_components.langgraph_conversation.const import (
    CONF_API_BASE,
    CONF_CONTEXT_WINDOW,
    CONF_KEEP_ALIVE,
    CONF_MAX_TOKENS,
    CONF_MODEL,
    CONF_TEMPERATURE,
    CONF_THINK,
    DOMAIN,
    SUBENTRY_CONVERSATION,
    THINK_DEFAULT,
)
from fakes import FakeOllamaServer, FakeOpenAIServer
from homeassistant import config_entries
from homeassistant.components import conversation
from homeassistant.config_entries import ConfigSubentryData
from homeassistant.core import Context, HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers import entity_registry as er
from homeassistant.setup import async_setup_component

from .conftest import agent_entity_id
from .helpers import form_fields, setup_ollama_entry

_OLLAMA_FIELDS = {CONF_CONTEXT_WINDOW, CONF_KEEP_ALIVE, CONF_THINK}


async def _ask(hass: HomeAssistant, entry: MockConfigEntry, text: str = "Hello") -> str:
    result = await conversation.async_converse(
        hass, text, None, Context(), agent_id=agent_entity_id(hass, entry)
    )
    return result.response.speech["plain"]["speech"]


async def test_defaults_keep_the_model_loaded_in_a_sent_window(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """An agent saved before these options existed gets Home Assistant's defaults:
    thinking off, temperature and answer length the model's own (nothing sent)."""
    entry = await setup_ollama_entry(hass, ollama_server)
    ollama_server.add_text("Hi.")
    assert await _ask(hass, entry) == "Hi."
    request = ollama_server.requests[0]
    assert request["options"]["num_ctx"] == 8192
    assert request["keep_alive"] == -1
    assert request["think"] is False
    assert not {"temperature", "num_predict"} & request["options"].keys()
    assert ollama_server.loaded_models() == ["llama3.2:latest"]


async def test_a_chosen_temperature_and_answer_length_are_sent(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    entry = await setup_ollama_entry(
        hass, ollama_server, **{CONF_TEMPERATURE: 0.7, CONF_MAX_TOKENS: 1024}
    )
    ollama_server.add_text("Hi.")
    await _ask(hass, entry)
    options = ollama_server.requests[0]["options"]
    assert (options["temperature"], options["num_predict"]) == (0.7, 1024)


async def test_an_upgrade_drops_the_old_defaults_an_ollama_agent_stored(
    hass: HomeAssistant, ollama_server: FakeOllamaServer, openai_server: FakeOpenAIServer
) -> None:
    """Every Ollama agent stored temperature 0.7, 1,024 tokens and the model's own
    thinking (the form's and the first agent's defaults): after the upgrade it gets Home
    Assistant's defaults. Other values are the user's choice and stay; other providers'
    agents keep theirs."""
    old = {CONF_TEMPERATURE: 0.7, CONF_MAX_TOKENS: 1024, CONF_THINK: THINK_DEFAULT}
    chosen = {CONF_TEMPERATURE: 0.2, CONF_MAX_TOKENS: 300, CONF_THINK: "on"}
    assert await async_setup_component(hass, "homeassistant", {})
    entries = [
        MockConfigEntry(
            domain=DOMAIN,
            version=1,
            minor_version=1,
            data=data,
            subentries_data=[
                ConfigSubentryData(
                    data={**DEFAULT_AGENT_OPTIONS, **options},
                    subentry_type=SUBENTRY_CONVERSATION,
                    title=title,
                    unique_id=None,
                )
                for title, options in (("Old", old), ("Chosen", chosen))
            ],
        )
        for data in (
            {CONF_MODEL: "ollama_chat/llama3.2", CONF_API_BASE: ollama_server.base_url},
            {CONF_MODEL: "openai/gpt-test", CONF_API_BASE: openai_server.api_base},
        )
    ]
    for entry in entries:
        entry.add_to_hass(hass)
        assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    local, cloud = entries
    assert (local.minor_version, cloud.minor_version) == (2, 2)
    stored = {s.title: dict(s.data) for s in local.subentries.values()}
    assert not old.keys() & stored["Old"].keys()
    assert chosen.items() <= stored["Chosen"].items()
    assert all(old.items() <= s.data.items() for s in cloud.subentries.values() if s.title == "Old")

    ollama_server.add_text("Hi.")
    await conversation.async_converse(
        hass, "Hello", None, Context(), agent_id=_agent_of(hass, local, "Old")
    )
    request = ollama_server.requests[0]
    assert request["think"] is False
    assert not {"temperature", "num_predict"} & request["options"].keys()


def _agent_of(hass: HomeAssistant, entry: MockConfigEntry, title: str) -> str:
    subentry_id = next(s.subentry_id for s in entry.subentries.values() if s.title == title)
    entity_id = er.async_get(hass).async_get_entity_id(conversation.DOMAIN, DOMAIN, subentry_id)
    assert entity_id
    return entity_id


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
    return set(form_fields(result["data_schema"]))


async def test_the_form_leaves_temperature_and_answer_length_to_an_ollama_model(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    ollama_server: FakeOllamaServer,
) -> None:
    """On Ollama the two fields have no default (left empty, nothing is stored or sent);
    other providers' forms keep theirs."""

    async def defaults(entry: MockConfigEntry) -> dict[str, object]:
        result = await hass.config_entries.subentries.async_init(
            (entry.entry_id, SUBENTRY_CONVERSATION),
            context={"source": config_entries.SOURCE_USER},
        )
        return {
            key: marker.default
            for key, marker in form_fields(result["data_schema"]).items()
            if key in (CONF_TEMPERATURE, CONF_MAX_TOKENS, CONF_THINK)
        }

    other = await defaults(setup_integration)
    assert {key: default() for key, default in other.items()} == {
        CONF_TEMPERATURE: 0.7,
        CONF_MAX_TOKENS: 1024,
    }
    local = await defaults(await setup_ollama_entry(hass, ollama_server))
    assert local[CONF_TEMPERATURE] is vol.UNDEFINED
    assert local[CONF_MAX_TOKENS] is vol.UNDEFINED
    assert local[CONF_THINK]() == "off"


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
            "model_settings": {
                CONF_CONTEXT_WINDOW: 12288.0,
                CONF_KEEP_ALIVE: 600.0,
                CONF_THINK: "off",
            },
        },
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.CREATE_ENTRY
    thinker = next(s for s in entry.subentries.values() if s.title == "Thinker")
    assert thinker.data[CONF_CONTEXT_WINDOW] == 12288
    assert isinstance(thinker.data[CONF_CONTEXT_WINDOW], int)
    assert thinker.data[CONF_KEEP_ALIVE] == 600
    assert thinker.data[CONF_THINK] == "off"
