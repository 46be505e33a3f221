"""An agent's profile: every option's default in one place, read once per agent, and a
changed agent seen by its next turn."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry
import voluptuous as vol

from custom_components.langgraph_conversation.agent.graph import AgentKind
from custom_components.langgraph_conversation.agent.models import ModelAccess
from custom_components.langgraph_conversation.const import (
    CONF_AGENT_KIND,
    CONF_API_BASE,
    CONF_BASE_PROMPT,
    CONF_FALLBACK_MODEL,
    CONF_FAST_MODEL,
    CONF_LLM_HASS_API,
    CONF_MAX_TOKENS,
    CONF_MODEL,
    CONF_PROMPT,
    CONF_TEMPERATURE,
    CONF_THINK,
    CONF_TOOL_CATEGORIES,
    CONF_VISION_MODEL,
    CONF_WEB_SEARCH_MODEL,
    DOMAIN,
    SUBENTRY_CONVERSATION,
    THINK_ON,
)
from custom_components.langgraph_conversation.profile import (
    AGENT_DEFAULTS,
    NEW_AGENT_OPTIONS,
    AgentProfile,
    agent_defaults,
    agent_profile,
)
from fakes import FakeOllamaServer, FakeOpenAIServer
from homeassistant import config_entries
from homeassistant.components import conversation
from homeassistant.config_entries import ConfigSubentry
from homeassistant.core import Context, HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers import llm
from homeassistant.setup import async_setup_component

from .conftest import agent_entity_id
from .helpers import form_fields, messages_of, text_of

MAIN = ModelAccess("openai/gpt-test", "sk-test", "http://127.0.0.1:1/v1")


def _subentry(options: dict[str, Any]) -> ConfigSubentry:
    return ConfigSubentry(
        data=MappingProxyType(options),
        subentry_id="agent-1",
        subentry_type=SUBENTRY_CONVERSATION,
        title="Kitchen helper",
        unique_id=None,
    )


def _profile(hass: HomeAssistant, options: dict[str, Any]) -> AgentProfile:
    return agent_profile(hass, _subentry(options), MAIN)


async def _form_fields(hass: HomeAssistant, server: FakeOllamaServer) -> dict[str, Any]:
    """The "add agent" form's fields by option key, from the real subentry flow of an
    Ollama entry (whose form has every option, the Ollama ones included)."""
    assert await async_setup_component(hass, "homeassistant", {})
    entry = MockConfigEntry(
        domain=DOMAIN,
        title="ollama_chat/llama3.2",
        data={CONF_MODEL: "ollama_chat/llama3.2", CONF_API_BASE: server.base_url},
    )
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    result = await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION), context={"source": config_entries.SOURCE_USER}
    )
    assert result["type"] is FlowResultType.FORM
    return form_fields(result["data_schema"])


async def test_the_agent_form_has_its_defaults_from_the_profile(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """Every option of the agent form is in AGENT_DEFAULTS and back; a field's default
    is the profile's, and a field without one reads as nothing chosen when left empty
    (the instructions: Home Assistant's own). A new agent's suggestions are
    NEW_AGENT_OPTIONS."""
    fields = await _form_fields(hass, ollama_server)
    defaults = agent_defaults("ollama_chat/llama3.2")
    assert set(fields) - {"name"} == set(defaults)
    for key, marker in fields.items():
        if key == "name":
            continue
        if marker.default is not vol.UNDEFINED:
            assert marker.default() == defaults[key], key
        elif key == CONF_PROMPT:
            assert defaults[key] == llm.DEFAULT_INSTRUCTIONS_PROMPT
        else:
            assert defaults[key] in (None, ()), key
        suggested = (marker.description or {}).get("suggested_value")
        assert suggested == NEW_AGENT_OPTIONS.get(key), key


async def test_a_form_left_as_it_is_gives_the_profile_of_no_options(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """An agent created with nothing but a name stores the form's defaults: its profile
    is that of an agent without any option stored."""
    await _form_fields(hass, ollama_server)
    entry = hass.config_entries.async_entries(DOMAIN)[0]
    result = await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION), context={"source": config_entries.SOURCE_USER}
    )
    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"], {"name": "Plain"}
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.CREATE_ENTRY
    (created,) = entry.subentries.values()
    assert created.data  # the defaults were written out
    access = entry.runtime_data.access
    assert agent_profile(hass, created, access) == agent_profile(
        hass, replace(created, data=MappingProxyType({})), access
    )


async def test_no_options_and_every_default_written_out_give_one_profile(
    hass: HomeAssistant,
) -> None:
    """The profile reads an absent option as its default, and nothing else."""
    assert _profile(hass, {}) == _profile(hass, dict(AGENT_DEFAULTS))


# A value other than the default, for each kind of option.
_OTHER: dict[str, Any] = {
    CONF_PROMPT: "Answer in rhymes.",
    CONF_AGENT_KIND: AgentKind.RAG.value,
    CONF_BASE_PROMPT: "You are a ship's computer.",
    CONF_LLM_HASS_API: [llm.LLM_API_ASSIST],
    CONF_TOOL_CATEGORIES: ["weather"],
    CONF_THINK: THINK_ON,
    CONF_FAST_MODEL: {CONF_MODEL: "openai/gpt-small"},
    CONF_FALLBACK_MODEL: {CONF_MODEL: "openai/gpt-other"},
    CONF_VISION_MODEL: {CONF_MODEL: "openai/gpt-eyes"},
    CONF_WEB_SEARCH_MODEL: {CONF_MODEL: "perplexity/sonar"},
}


def _other(key: str) -> Any:
    default = AGENT_DEFAULTS[key]
    if key in _OTHER:
        return _OTHER[key]
    if isinstance(default, bool):
        return not default
    if isinstance(default, int | float):
        return default + 1
    if default == ():
        return ["switch.kettle"]
    raise AssertionError(f"no other value for {key}")


@pytest.mark.parametrize("key", sorted(AGENT_DEFAULTS))
async def test_every_option_reaches_the_profile(hass: HomeAssistant, key: str) -> None:
    """Each option, set to another value, gives another profile: nothing an agent can
    choose is read anywhere else. (The tool choices are read for an assistant only.)"""
    default = _profile(hass, {})
    assert _profile(hass, {key: _other(key)}) != default


async def test_a_kind_without_tools_has_no_tool_choices(hass: HomeAssistant) -> None:
    """A chatbot keeps no API, no tool categories and no compact context, so nothing on
    Home Assistant's side offers it tools."""
    profile = _profile(hass, {**NEW_AGENT_OPTIONS, CONF_AGENT_KIND: AgentKind.CHATBOT.value})
    assert profile.llm_hass_apis == ()
    assert profile.tool_categories == ()
    assert not profile.controls_home
    assert _profile(hass, dict(NEW_AGENT_OPTIONS)).controls_home


async def test_a_changed_agent_is_seen_by_its_next_turn(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Saving the agent's form (Home Assistant's real subentry flow) reloads the entry:
    the next turn sends the new instructions, temperature and token limit."""
    entry = setup_integration
    agent_id = agent_entity_id(hass, entry)
    openai_server.add_text("Hello.")
    openai_server.add_text("Ahoy.")
    await conversation.async_converse(hass, "Hi", None, Context(), agent_id=agent_id)
    before = openai_server.requests[-1]
    assert before["temperature"] == AGENT_DEFAULTS[CONF_TEMPERATURE]
    assert before["max_tokens"] == AGENT_DEFAULTS[CONF_MAX_TOKENS]
    assert "pirate" not in text_of(messages_of(before, "system")[0])

    subentry_id = next(iter(entry.subentries))
    result = await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION),
        context={"source": config_entries.SOURCE_RECONFIGURE, "subentry_id": subentry_id},
    )
    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"],
        {
            CONF_PROMPT: "Speak like a pirate.",
            "model_settings": {CONF_TEMPERATURE: 0.2, CONF_MAX_TOKENS: 77},
        },
    )
    await hass.async_block_till_done()
    assert result["reason"] == "reconfigure_successful"

    await conversation.async_converse(hass, "Hi again", None, Context(), agent_id=agent_id)
    after = openai_server.requests[-1]
    assert after["temperature"] == 0.2
    assert after["max_tokens"] == 77
    assert "Speak like a pirate." in text_of(messages_of(after, "system")[0])
