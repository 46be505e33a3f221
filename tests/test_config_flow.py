"""The config flow (model access) and the agent subentry flow."""

from __future__ import annotations

import json
from pathlib import Path
import socket

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.const import (
    CONF_API_BASE,
    CONF_API_KEY,
    CONF_LLM_HASS_API,
    CONF_MAX_TOKENS,
    CONF_MAX_TOOL_ROUNDS,
    CONF_MODEL,
    CONF_PROMPT,
    CONF_TEMPERATURE,
    DOMAIN,
    SUBENTRY_CONVERSATION,
)
from fakes import FakeOpenAIServer
from homeassistant import config_entries
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType, section
from homeassistant.helpers import llm
from homeassistant.setup import async_setup_component

from .conftest import TEST_KEY, TEST_MODEL

INTEGRATION = Path(__file__).parents[1] / "custom_components" / DOMAIN


@pytest.fixture(autouse=True)
async def core_integrations(hass: HomeAssistant) -> None:
    """A created entry sets itself up, which needs conversation's own dependencies."""
    assert await async_setup_component(hass, "homeassistant", {})


def _free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _start(hass: HomeAssistant) -> str:
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "user"
    return result["flow_id"]


async def test_user_flow_creates_entry_with_agent(
    hass: HomeAssistant, openai_server: FakeOpenAIServer
) -> None:
    """A model that answers becomes an entry with a default conversation agent."""
    flow_id = await _start(hass)
    result = await hass.config_entries.flow.async_configure(
        flow_id,
        {
            CONF_MODEL: f" openai/{TEST_MODEL} ",
            CONF_API_KEY: TEST_KEY,
            CONF_API_BASE: openai_server.api_base,
        },
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert result["title"] == f"openai/{TEST_MODEL}"
    assert result["data"] == {
        CONF_MODEL: f"openai/{TEST_MODEL}",
        CONF_API_KEY: TEST_KEY,
        CONF_API_BASE: openai_server.api_base,
    }
    entry = hass.config_entries.async_entries(DOMAIN)[0]
    subentries = list(entry.subentries.values())
    assert [s.subentry_type for s in subentries] == [SUBENTRY_CONVERSATION, "ai_task_data"]
    assert subentries[0].data[CONF_LLM_HASS_API] == [llm.LLM_API_ASSIST]
    # The validation was one real request to the model with the key.
    assert openai_server.request_count == 1
    assert openai_server.requests[0]["model"] == TEST_MODEL


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, "invalid_auth"),
        (403, "invalid_auth"),
        (404, "model_not_found"),
        (429, "rate_limited"),
        (418, "unknown"),
    ],
)
async def test_user_flow_maps_errors(
    hass: HomeAssistant, openai_server: FakeOpenAIServer, status: int, error: str
) -> None:
    """Each failed validation shows its own error, and the form can be retried."""
    openai_server.add_error(status, "refused by the test")
    flow_id = await _start(hass)
    data = {
        CONF_MODEL: f"openai/{TEST_MODEL}",
        CONF_API_KEY: TEST_KEY,
        CONF_API_BASE: openai_server.api_base,
    }
    result = await hass.config_entries.flow.async_configure(flow_id, data)
    assert result["type"] is FlowResultType.FORM
    assert result["errors"] == {"base": error}
    # Fixed on the provider's side: the same form now succeeds.
    result = await hass.config_entries.flow.async_configure(flow_id, data)
    assert result["type"] is FlowResultType.CREATE_ENTRY


async def test_user_flow_cannot_connect(hass: HomeAssistant, socket_enabled: None) -> None:
    """Nothing listening at the base URL is a connection error."""
    flow_id = await _start(hass)
    result = await hass.config_entries.flow.async_configure(
        flow_id,
        {
            CONF_MODEL: "openai/gpt-test",
            CONF_API_KEY: "x",
            CONF_API_BASE: f"http://127.0.0.1:{_free_port()}/v1",
        },
    )
    assert result["errors"] == {"base": "cannot_connect"}


async def test_user_flow_refuses_duplicate(
    hass: HomeAssistant, config_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The same model at the same base URL is configured once."""
    flow_id = await _start(hass)
    result = await hass.config_entries.flow.async_configure(
        flow_id,
        {
            CONF_MODEL: f"openai/{TEST_MODEL}",
            CONF_API_KEY: "another",
            CONF_API_BASE: openai_server.api_base,
        },
    )
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "already_configured"
    assert openai_server.request_count == 0


async def test_reauth_flow(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A new key is checked, stored, and the entry reloaded."""
    entry = setup_integration
    openai_server.api_key = "sk-new-key"
    result = await entry.start_reauth_flow(hass)
    assert result["step_id"] == "reauth_confirm"
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_API_KEY: "sk-wrong"}
    )
    assert result["errors"] == {"base": "invalid_auth"}
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_API_KEY: "sk-new-key"}
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "reauth_successful"
    assert entry.data[CONF_API_KEY] == "sk-new-key"
    assert entry.state is config_entries.ConfigEntryState.LOADED


async def test_subentry_create_and_reconfigure(
    hass: HomeAssistant, setup_integration: MockConfigEntry
) -> None:
    """Agents are added and changed in the UI; each is its own entity and device."""
    entry = setup_integration
    result = await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION), context={"source": config_entries.SOURCE_USER}
    )
    assert result["type"] is FlowResultType.FORM
    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"],
        {
            "name": "Chatty",
            CONF_PROMPT: "Speak like a pirate.",
            CONF_LLM_HASS_API: ["assist"],
            # The form's sections (form_sections.py) hold the model's settings.
            "model_settings": {CONF_TEMPERATURE: 0.2, CONF_MAX_TOOL_ROUNDS: 3.0},
        },
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.CREATE_ENTRY
    chatty = next(s for s in entry.subentries.values() if s.title == "Chatty")
    assert chatty.data[CONF_LLM_HASS_API] == ["assist"]
    assert chatty.data[CONF_MAX_TOOL_ROUNDS] == 3
    states = [
        s
        for s in hass.states.async_all("conversation")
        if s.attributes.get("friendly_name") == "Chatty"
    ]
    assert len(states) == 1

    result = await chatty_reconfigure(hass, entry, chatty.subentry_id)
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "reconfigure"
    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"],
        {CONF_PROMPT: "Speak plainly.", "model_settings": {CONF_TEMPERATURE: 0.5}},
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "reconfigure_successful"
    chatty = entry.subentries[chatty.subentry_id]
    assert chatty.data[CONF_PROMPT] == "Speak plainly."
    assert chatty.data[CONF_TEMPERATURE] == 0.5
    assert CONF_LLM_HASS_API not in chatty.data  # cleared in the form: no control


async def chatty_reconfigure(hass: HomeAssistant, entry: MockConfigEntry, subentry_id: str):
    """Open the reconfigure form of one agent."""
    return await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION),
        context={"source": config_entries.SOURCE_RECONFIGURE, "subentry_id": subentry_id},
    )


async def test_subentry_needs_loaded_entry(
    hass: HomeAssistant, config_entry: MockConfigEntry
) -> None:
    """Agents cannot be added while the model entry is not loaded."""
    result = await hass.config_entries.subentries.async_init(
        (config_entry.entry_id, SUBENTRY_CONVERSATION),
        context={"source": config_entries.SOURCE_USER},
    )
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "entry_not_loaded"


async def test_the_agent_form_shows_the_common_choices_first(
    hass: HomeAssistant, setup_integration: MockConfigEntry
) -> None:
    """A newcomer sees about nine fields, then named sections, all collapsed; a section
    left out of the answer gives its options' defaults; stored options stay flat and come
    back in their sections when the agent is reconfigured."""
    entry = setup_integration
    result = await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION), context={"source": config_entries.SOURCE_USER}
    )
    schema = result["data_schema"].schema
    top = [str(key) for key, value in schema.items() if not isinstance(value, section)]
    assert top == [
        "name",
        CONF_PROMPT,
        "agent_kind",
        CONF_LLM_HASS_API,
        "tool_categories",
        "confirm_entities",
        "safety_check",
        "memory",
        "learn_memories",
    ]
    sections = {str(key): value for key, value in schema.items() if isinstance(value, section)}
    assert list(sections) == [
        "abilities",
        "vision_model",
        "web_search_model",
        "conversations",
        "model_settings",
        "fast_model",
        "fallback_model",
        "advanced",
    ]
    assert all(value.options["collapsed"] for value in sections.values())
    assert {str(key) for key in sections["model_settings"].schema.schema} >= {
        CONF_TEMPERATURE,
        CONF_MAX_TOKENS,
        CONF_MAX_TOOL_ROUNDS,
    }
    # Every section's labels exist in English (hassfest would reject a missing one).
    english = json.loads((INTEGRATION / "translations" / "en.json").read_text())
    step = english["config_subentries"][SUBENTRY_CONVERSATION]["step"]["user"]
    for name, value in sections.items():
        labels = step["sections"][name]
        assert labels["name"], name
        # (the Ollama-only fields' labels too: this entry is not Ollama's)
        assert set(labels["data"]) >= {str(key) for key in value.schema.schema}, name
    assert set(step["data"]) == set(top)

    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"],
        {"name": "Sections", CONF_PROMPT: "Be brief.", "conversations": {"compact_context": True}},
    )
    await hass.async_block_till_done()
    created = next(s for s in entry.subentries.values() if s.title == "Sections")
    assert created.data["compact_context"] is True
    assert created.data[CONF_TEMPERATURE] == 0.7  # model_settings left out: its default
    assert not {"abilities", "conversations", "model_settings", "advanced"} & set(created.data)

    result = await chatty_reconfigure(hass, entry, created.subentry_id)
    suggested = {
        str(key): (key.description or {}).get("suggested_value")
        for key in result["data_schema"].schema["conversations"].schema.schema
    }
    assert suggested["compact_context"] is True
