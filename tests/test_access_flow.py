"""Model access: each failure's own error, reconfiguring the entry, the model picker,
a new agent's free default name, and which abort strings Home Assistant shows."""

from __future__ import annotations

import json
import logging
from pathlib import Path
import socket
from typing import Any

import httpx
import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry
import voluptuous as vol

from custom_components.langgraph_conversation import config_flow
from custom_components.langgraph_conversation.agent.models import ModelAccess, async_list_models
from custom_components.langgraph_conversation.const import (
    CONF_API_BASE,
    CONF_API_KEY,
    CONF_MODEL,
    DOMAIN,
    SUBENTRY_CONVERSATION,
)
from fakes import FakeOllamaServer, FakeOpenAIServer
from homeassistant import config_entries
from homeassistant.components import conversation
from homeassistant.config_entries import ConfigSubentryData
from homeassistant.core import Context, HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers.selector import SelectSelector, TextSelector
from homeassistant.setup import async_setup_component

from .conftest import TEST_KEY, TEST_MODEL, agent_entity_id

COMPONENT = Path(config_flow.__file__).parent
EN = json.loads((COMPONENT / "translations" / "en.json").read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
async def core_integrations(hass: HomeAssistant) -> None:
    """A created entry sets itself up, which needs conversation's own dependencies."""
    assert await async_setup_component(hass, "homeassistant", {})
    assert await async_setup_component(hass, "conversation", {})


@pytest.fixture(autouse=True)
def no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys in the test process's environment would stand in for a missing one."""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _submit_user(hass: HomeAssistant, data: dict[str, Any]) -> dict[str, Any]:
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    result = await hass.config_entries.flow.async_configure(result["flow_id"], data)
    await hass.async_block_till_done()
    return result


def _model_selector(result: dict[str, Any]) -> Any:
    schema: vol.Schema = result["data_schema"]
    return next(value for key, value in schema.schema.items() if key == CONF_MODEL)


def _check_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "Checking model" in r.getMessage()]


# -- the right error for each failure -----------------------------------------------------


async def test_missing_key_is_reported_as_missing(
    hass: HomeAssistant, openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A provider that needs a key, none given: "missing key", and nothing was sent.

    Anthropic pointed at a server of our own: LiteLLM refuses before any request.
    """
    caplog.set_level(logging.INFO)
    result = await _submit_user(
        hass, {CONF_MODEL: "anthropic/claude-test", CONF_API_BASE: openai_server.base_url}
    )
    assert result["errors"] == {"base": "missing_key"}
    assert openai_server.paths == []
    [line] = _check_lines(caplog)
    assert "no API key was given" in line
    assert "Could not reach" not in line


async def test_missing_key_for_openai_itself(hass: HomeAssistant) -> None:
    """OpenAI's own API (no base URL) without a key: missing, not "could not reach"."""
    result = await _submit_user(hass, {CONF_MODEL: "openai/gpt-4o-mini"})
    assert result["errors"] == {"base": "missing_key"}


@pytest.mark.parametrize("provider", ["openai", "ollama"])
async def test_unreachable_server(
    hass: HomeAssistant,
    socket_enabled: None,
    caplog: pytest.LogCaptureFixture,
    provider: str,
) -> None:
    """Nothing listening at the base URL: cannot_connect, logged as such."""
    caplog.set_level(logging.INFO)
    base = f"http://127.0.0.1:{_free_port()}"
    data = (
        {CONF_MODEL: "openai/gpt-test", CONF_API_KEY: "sk-x", CONF_API_BASE: f"{base}/v1"}
        if provider == "openai"
        else {CONF_MODEL: "ollama_chat/llama3.2", CONF_API_BASE: base}
    )
    result = await _submit_user(hass, data)
    assert result["errors"] == {"base": "cannot_connect"}
    [line] = _check_lines(caplog)
    assert "could not reach the model's server" in line
    # Nothing to list from a server that is not there: the form stays free text.
    assert isinstance(_model_selector(result), TextSelector)


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_key_openai(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
    status: int,
) -> None:
    """A refused key is invalid_auth; the log says so, never "reach", never the key."""
    caplog.set_level(logging.INFO)
    openai_server.add_error(status, "refused by the test")
    result = await _submit_user(
        hass,
        {
            CONF_MODEL: f"openai/{TEST_MODEL}",
            CONF_API_KEY: TEST_KEY,
            CONF_API_BASE: openai_server.api_base,
        },
    )
    assert result["errors"] == {"base": "invalid_auth"}
    [line] = _check_lines(caplog)
    assert "refused the API key" in line
    assert "reach" not in line
    assert TEST_KEY not in caplog.text


async def test_refused_key_ollama(
    hass: HomeAssistant, ollama_server: FakeOllamaServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Ollama behind a proxy that checks keys: a wrong key is invalid_auth."""
    caplog.set_level(logging.INFO)
    ollama_server.api_key = "right-key-0123456789"
    result = await _submit_user(
        hass,
        {
            CONF_MODEL: "ollama_chat/llama3.2",
            CONF_API_KEY: "wrong-key-0123456789",
            CONF_API_BASE: ollama_server.base_url,
        },
    )
    assert result["errors"] == {"base": "invalid_auth"}
    assert "wrong-key-0123456789" not in caplog.text


async def test_unknown_model_openai_offers_the_servers_models(
    hass: HomeAssistant, openai_server: FakeOpenAIServer
) -> None:
    """A model the server lacks: model_not_found, and the form now lists what it has."""
    openai_server.models = {TEST_MODEL, "gpt-other"}
    data = {
        CONF_MODEL: "openai/gpt-typo",
        CONF_API_KEY: TEST_KEY,
        CONF_API_BASE: openai_server.api_base,
    }
    result = await _submit_user(hass, data)
    assert result["errors"] == {"base": "model_not_found"}
    selector = _model_selector(result)
    assert isinstance(selector, SelectSelector)
    assert selector.config["options"] == ["openai/gpt-other", f"openai/{TEST_MODEL}"]
    assert selector.config["custom_value"] is True
    # Picking one of them creates the entry.
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {**data, CONF_MODEL: "openai/gpt-other"}
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert result["data"][CONF_MODEL] == "openai/gpt-other"


async def test_unknown_model_ollama_offers_the_servers_models(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """Ollama's "model not found" is model_not_found; /api/tags fills the picker."""
    ollama_server.models = {"llama3.2", "qwen3:4b"}
    result = await _submit_user(
        hass, {CONF_MODEL: "ollama_chat/llama9", CONF_API_BASE: ollama_server.base_url}
    )
    assert result["errors"] == {"base": "model_not_found"}
    selector = _model_selector(result)
    assert isinstance(selector, SelectSelector)
    assert selector.config["options"] == ["ollama_chat/llama3.2:latest", "ollama_chat/qwen3:4b"]
    assert "GET /api/tags" in ollama_server.paths


@pytest.mark.parametrize(("status", "error"), [(500, "server_error"), (418, "unknown")])
async def test_other_failures(
    hass: HomeAssistant, openai_server: FakeOpenAIServer, status: int, error: str
) -> None:
    """A server error is the server's own error; anything else is unknown."""
    openai_server.add_error(status, "broken on purpose")
    result = await _submit_user(
        hass,
        {
            CONF_MODEL: f"openai/{TEST_MODEL}",
            CONF_API_KEY: TEST_KEY,
            CONF_API_BASE: openai_server.api_base,
        },
    )
    assert result["errors"] == {"base": error}


async def _answer(hass: HomeAssistant, entry: config_entries.ConfigEntry) -> str:
    result = await conversation.async_converse(
        hass, "Hello", None, Context(), agent_id=agent_entity_id(hass, entry)
    )
    return result.response.speech["plain"]["speech"]


async def test_no_key_needed_ollama(hass: HomeAssistant, ollama_server: FakeOllamaServer) -> None:
    """A local Ollama with an empty key: the entry is created and its agent answers."""
    result = await _submit_user(
        hass,
        {
            CONF_MODEL: "ollama_chat/llama3.2",
            CONF_API_KEY: "  ",
            CONF_API_BASE: ollama_server.base_url,
        },
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert CONF_API_KEY not in result["data"]
    ollama_server.add_text("Hi from Ollama")
    assert await _answer(hass, result["result"]) == "Hi from Ollama"


async def test_no_key_needed_openai_compatible(
    hass: HomeAssistant, openai_server: FakeOpenAIServer
) -> None:
    """An OpenAI-compatible server of one's own that needs no key, an empty key: works.

    The OpenAI SDK will not build a client without a key, so a placeholder goes along;
    the server ignores it.
    """
    openai_server.api_key = None
    result = await _submit_user(
        hass, {CONF_MODEL: f"openai/{TEST_MODEL}", CONF_API_BASE: openai_server.api_base}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert CONF_API_KEY not in result["data"]
    openai_server.add_text("Hi without a key")
    assert await _answer(hass, result["result"]) == "Hi without a key"


async def test_placeholder_key_is_refused_like_a_wrong_key(
    hass: HomeAssistant, openai_server: FakeOpenAIServer
) -> None:
    """A server of one's own that does check keys, no key entered: the key is refused."""
    result = await _submit_user(
        hass, {CONF_MODEL: f"openai/{TEST_MODEL}", CONF_API_BASE: openai_server.api_base}
    )
    assert result["errors"] == {"base": "invalid_auth"}


# -- reconfigure -------------------------------------------------------------------------


async def test_reconfigure_changes_model_and_reloads(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The form lists the server's models; the new one is checked, stored, reloaded."""
    entry = setup_integration
    openai_server.models = {TEST_MODEL, "gpt-other"}
    result = await entry.start_reconfigure_flow(hass)
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "reconfigure"
    selector = _model_selector(result)
    assert isinstance(selector, SelectSelector)
    assert selector.config["options"] == ["openai/gpt-other", f"openai/{TEST_MODEL}"]
    # The current access is what the form suggests.
    suggested = {
        str(key): key.description["suggested_value"]
        for key in result["data_schema"].schema
        if key.description
    }
    assert suggested[CONF_MODEL] == f"openai/{TEST_MODEL}"
    assert suggested[CONF_API_BASE] == openai_server.api_base

    checks = openai_server.request_count
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"],
        {
            CONF_MODEL: "openai/gpt-other",
            CONF_API_KEY: TEST_KEY,
            CONF_API_BASE: openai_server.api_base,
        },
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "reconfigure_successful"
    assert openai_server.request_count == checks + 1  # one real request
    assert entry.data[CONF_MODEL] == "openai/gpt-other"
    assert entry.title == "openai/gpt-other"
    assert entry.state is config_entries.ConfigEntryState.LOADED
    # The reloaded agent talks to the new model.
    openai_server.add_text("Now the other model")
    assert await _answer(hass, entry) == "Now the other model"
    assert openai_server.requests[-1]["model"] == "gpt-other"
    # The reload is the update listener's, which Home Assistant asks for (2026.10+ logs
    # an integration that reloads from its flow while it has one).
    assert "should use it for scheduling a reload" not in caplog.text


async def test_reconfigure_takes_a_typed_model_and_keeps_entry_on_failure(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A string not in the list is accepted by the picker and checked; failures keep
    the entry as it was, and a renamed entry keeps its name."""
    entry = setup_integration
    hass.config_entries.async_update_entry(entry, title="My model")
    openai_server.models = {TEST_MODEL, "gpt-other"}
    result = await entry.start_reconfigure_flow(hass)
    form = {
        CONF_MODEL: "openai/gpt-typed",
        CONF_API_KEY: TEST_KEY,
        CONF_API_BASE: openai_server.api_base,
    }
    result = await hass.config_entries.flow.async_configure(result["flow_id"], form)
    assert result["errors"] == {"base": "model_not_found"}
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {**form, CONF_MODEL: f"openai/{TEST_MODEL}", CONF_API_KEY: "sk-wrong"}
    )
    assert result["errors"] == {"base": "invalid_auth"}
    assert entry.data[CONF_API_KEY] == TEST_KEY
    openai_server.models.add("gpt-typed")
    result = await hass.config_entries.flow.async_configure(result["flow_id"], form)
    await hass.async_block_till_done()
    assert result["reason"] == "reconfigure_successful"
    assert entry.data[CONF_MODEL] == "openai/gpt-typed"
    assert entry.title == "My model"


async def test_reconfigure_removes_key_and_moves_server(
    hass: HomeAssistant, setup_integration: MockConfigEntry, ollama_server: FakeOllamaServer
) -> None:
    """From an OpenAI-compatible server with a key to a local Ollama without one."""
    entry = setup_integration
    result = await entry.start_reconfigure_flow(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"],
        {
            CONF_MODEL: "ollama_chat/llama3.2",
            CONF_API_KEY: "",
            CONF_API_BASE: ollama_server.base_url,
        },
    )
    await hass.async_block_till_done()
    assert result["reason"] == "reconfigure_successful"
    assert entry.data == {CONF_MODEL: "ollama_chat/llama3.2", CONF_API_BASE: ollama_server.base_url}
    ollama_server.add_text("Local now")
    assert await _answer(hass, entry) == "Local now"


async def test_reconfigure_refuses_another_entrys_model(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Becoming the same model at the same address as another entry is refused."""
    other = MockConfigEntry(
        domain=DOMAIN,
        title="openai/gpt-other",
        data={CONF_MODEL: "openai/gpt-other", CONF_API_BASE: openai_server.api_base},
    )
    other.add_to_hass(hass)
    result = await setup_integration.start_reconfigure_flow(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"],
        {
            CONF_MODEL: "openai/gpt-other",
            CONF_API_KEY: TEST_KEY,
            CONF_API_BASE: openai_server.api_base,
        },
    )
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "already_configured"
    assert setup_integration.data[CONF_MODEL] == f"openai/{TEST_MODEL}"


# -- which strings Home Assistant shows ---------------------------------------------------


def _shown_by_us(result: dict[str, Any], section: dict[str, Any]) -> None:
    """The frontend looks an abort up in our strings unless the result names another
    translation domain (2026.10+ names "homeassistant" for its own success reasons)."""
    if result.get("translation_domain") is None:
        assert result["reason"] in section["abort"]
    else:
        assert result["translation_domain"] == "homeassistant"


async def test_success_strings_are_ours_where_shown(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    entry = setup_integration
    result = await entry.start_reconfigure_flow(hass)
    result = await hass.config_entries.flow.async_configure(result["flow_id"], dict(entry.data))
    await hass.async_block_till_done()
    assert result["reason"] == "reconfigure_successful"
    _shown_by_us(result, EN["config"])
    result = await entry.start_reauth_flow(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_API_KEY: TEST_KEY}
    )
    await hass.async_block_till_done()
    assert result["reason"] == "reauth_successful"
    _shown_by_us(result, EN["config"])
    subentry_id = next(iter(entry.subentries))
    result = await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION),
        context={"source": config_entries.SOURCE_RECONFIGURE, "subentry_id": subentry_id},
    )
    result = await hass.config_entries.subentries.async_configure(result["flow_id"], {})
    await hass.async_block_till_done()
    assert result["reason"] == "reconfigure_successful"
    _shown_by_us(result, EN["config_subentries"][SUBENTRY_CONVERSATION])


def test_every_flow_error_has_a_string() -> None:
    errors = EN["config"]["error"]
    for key in {*config_flow._FLOW_ERRORS.values(), "unknown"}:
        assert errors.get(key), key
    assert json.loads((COMPONENT / "strings.json").read_text(encoding="utf-8")) == EN


# -- a new agent's default name ----------------------------------------------------------


async def _new_agent_form(hass: HomeAssistant, entry: MockConfigEntry) -> dict[str, Any]:
    return await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION), context={"source": config_entries.SOURCE_USER}
    )


def _default_name(result: dict[str, Any]) -> str:
    key = next(key for key in result["data_schema"].schema if str(key) == "name")
    return key.default()


async def test_new_agent_default_name_is_free(
    hass: HomeAssistant, setup_integration: MockConfigEntry
) -> None:
    """ "Add conversation agent" suggests a name no agent has yet."""
    entry = setup_integration
    result = await _new_agent_form(hass, entry)
    assert _default_name(result) == "LangGraph Conversation"
    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"], {"name": "LangGraph Conversation"}
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.CREATE_ENTRY
    result = await _new_agent_form(hass, entry)
    assert _default_name(result) == "LangGraph Conversation 2"
    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"], {"name": _default_name(result)}
    )
    await hass.async_block_till_done()
    titles = sorted(s.title for s in entry.subentries.values() if s.subentry_type == "conversation")
    assert titles == ["LangGraph Conversation", "LangGraph Conversation 2", "Test agent"]
    # Agents of other entries count too (their entities share the conversation domain).
    MockConfigEntry(
        domain=DOMAIN,
        data={CONF_MODEL: "openai/gpt-other", CONF_API_BASE: "http://127.0.0.1:9/v1"},
        subentries_data=[
            ConfigSubentryData(
                data={},
                subentry_type=SUBENTRY_CONVERSATION,
                title="LangGraph Conversation 3",
                unique_id=None,
            )
        ],
    ).add_to_hass(hass)
    result = await _new_agent_form(hass, entry)
    assert _default_name(result) == "LangGraph Conversation 4"


# -- listing through agent/models/catalog.py -------------------------------------------------


async def test_listing_needs_the_key_and_fails_quietly(
    openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The key goes with the listing request; a refused one gives no list, logged at
    debug only, without the key."""
    caplog.set_level(logging.DEBUG)
    openai_server.models = {TEST_MODEL}
    async with httpx.AsyncClient() as client:
        right = ModelAccess(f"openai/{TEST_MODEL}", TEST_KEY, openai_server.api_base)
        assert await async_list_models(client, right) == [f"openai/{TEST_MODEL}"]
        wrong = ModelAccess(f"openai/{TEST_MODEL}", "sk-wrong-0123456789", openai_server.api_base)
        assert await async_list_models(client, wrong) == []
        # OpenAI's own API is not asked (no base URL): its list is not of chat models.
        assert await async_list_models(client, ModelAccess("openai/gpt-4o", TEST_KEY)) == []
    failures = [r for r in caplog.records if "No model list" in r.getMessage()]
    assert [r.levelno for r in failures] == [logging.DEBUG]
    assert "sk-wrong-0123456789" not in caplog.text


async def test_check_in_flight_survives_the_last_entry_reloading(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The only entry reloads (an option or title changed) while a flow's check waits for
    the model: closing LiteLLM's shared clients on that unload must not break the check."""
    entry = setup_integration
    openai_server.add_text("OK", first_byte_delay=0.5)
    result = await entry.start_reconfigure_flow(hass)
    check = hass.async_create_task(
        hass.config_entries.flow.async_configure(
            result["flow_id"],
            {
                CONF_MODEL: f"openai/{TEST_MODEL}",
                CONF_API_KEY: TEST_KEY,
                CONF_API_BASE: openai_server.api_base,
            },
        )
    )
    await openai_server.wait_for_requests(openai_server.request_count + 1)
    assert await hass.config_entries.async_reload(entry.entry_id)
    result = await check
    await hass.async_block_till_done()
    assert result.get("errors") is None, result.get("errors")
    assert result["reason"] == "reconfigure_successful"
