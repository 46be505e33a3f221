"""Prompt layers: every combination renders in the fixed order, and through Home Assistant."""

from __future__ import annotations

from dataclasses import fields, replace
from itertools import product

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.agent.graph import AgentKind
from custom_components.langgraph_conversation.agent.history import summary_section
from custom_components.langgraph_conversation.agent.memory import MEMORY_INSTRUCTIONS
from custom_components.langgraph_conversation.agent.prompts import (
    BASE_PROMPTS,
    VOICE_RULE,
    PromptLayers,
    base_prompt,
    speaker_layer,
)
from custom_components.langgraph_conversation.const import CONF_BASE_PROMPT, CONF_PROMPT
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import area_registry as ar, device_registry as dr

from .conftest import agent_entity_id
from .fakes import FakeOpenAIServer
from .helpers import messages_of, text_of

# What each optional layer renders as, in the order the prompt must hold them.
OPTIONAL_LAYERS = {
    "voice": (True, VOICE_RULE),
    "memory_rules": (True, MEMORY_INSTRUCTIONS),
    "speaker": ('The person is in the area "Hall".', 'The person is in the area "Hall".'),
    "instructions": ("Be kind. It is 10:00.", "Be kind. It is 10:00."),
    "summary": ("They asked about tea.", summary_section("They asked about tea.")),
    "memories": ("<memories>\n- x\n</memories>", "<memories>\n- x\n</memories>"),
    "knowledge": ("<knowledge>\n- y\n</knowledge>", "<knowledge>\n- y\n</knowledge>"),
}


def test_every_layer_is_covered() -> None:
    """The table above names every layer but the base (a new layer needs a test here)."""
    assert [f.name for f in fields(PromptLayers)] == ["base", *OPTIONAL_LAYERS]


def test_layer_combinations_render_in_order() -> None:
    """Each of the 128 combinations: the base first, then exactly the present layers, in
    order. (One test, not 128: every test here starts a Home Assistant.)"""
    combinations = list(product([False, True], repeat=len(OPTIONAL_LAYERS)))
    assert len(combinations) == 2 ** len(OPTIONAL_LAYERS)
    for present in combinations:
        layers = PromptLayers(base="BASE")
        expected = ["BASE"]
        for (name, (value, rendered)), on in zip(OPTIONAL_LAYERS.items(), present, strict=True):
            if on:
                layers = replace(layers, **{name: value})
                expected.append(rendered)
        assert layers.render() == "\n\n".join(expected), present


def test_blank_layers_leave_no_gaps() -> None:
    """Empty or blank layers are left out, not rendered as empty paragraphs."""
    layers = PromptLayers(base="BASE", instructions="  \n", memories="", knowledge="K")
    assert layers.render() == "BASE\n\nK"


def test_base_prompts_per_kind_and_override() -> None:
    """One base prompt file per kind; an agent's override replaces it, blank keeps it."""
    assert set(BASE_PROMPTS) == {kind.value for kind in AgentKind}
    assert all(len(text) > 100 for text in BASE_PROMPTS.values())
    assert "square brackets" in BASE_PROMPTS["rag"]
    assert "cannot see or control devices" in BASE_PROMPTS["chatbot"]
    assert base_prompt(AgentKind.RAG) == BASE_PROMPTS["rag"]
    assert base_prompt(AgentKind.CHATBOT, "  You are Jarvis.\n") == "You are Jarvis."
    assert base_prompt(AgentKind.CHATBOT, " \n ") == BASE_PROMPTS["chatbot"]


def test_speaker_layer_quotes_names() -> None:
    """Device and area names are quoted as data; unknown parts are left out."""
    assert speaker_layer(None, None) == ""
    assert speaker_layer("Kitchen satellite", None) == (
        'The person is speaking through the device "Kitchen satellite".'
    )
    both = speaker_layer('Sat "1"', "Living room")
    assert both.startswith('The person is speaking through the device "Sat \\"1\\""')
    assert 'in the area "Living room"' in both
    assert speaker_layer(None, "Hall").startswith('The person is in the area "Hall".')


def _system(server: FakeOpenAIServer, index: int = -1) -> str:
    return text_of(messages_of(server.requests[index], "system")[0])


@pytest.mark.parametrize(
    "agent_overrides", [{CONF_PROMPT: "Call me {{ 'Captain' }}.", CONF_BASE_PROMPT: "BASE-X"}]
)
async def test_layers_through_home_assistant(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Typed turns: override, then the rendered template, then memories; voice adds its
    rule and the satellite's place before the instructions."""
    agent_id = agent_entity_id(hass, setup_integration)
    await conversation.async_converse(hass, "Hello", None, Context(), agent_id=agent_id)
    typed = _system(openai_server)
    assert typed.startswith("BASE-X\n\n")
    assert "Call me Captain." in typed
    assert typed.index("BASE-X") < typed.index(MEMORY_INSTRUCTIONS) < typed.index("Call me")
    assert VOICE_RULE not in typed
    assert "The person is" not in typed

    other = MockConfigEntry(domain="test")
    other.add_to_hass(hass)
    area = ar.async_get(hass).async_create("Kitchen")
    device = dr.async_get(hass).async_get_or_create(
        config_entry_id=other.entry_id, identifiers={("test", "sat1")}, name="Kitchen satellite"
    )
    dr.async_get(hass).async_update_device(device.id, area_id=area.id)
    await conversation.async_converse(
        hass, "Hello", None, Context(), agent_id=agent_id, device_id=device.id
    )
    spoken = _system(openai_server)
    place = 'The person is speaking through the device "Kitchen satellite" in the area "Kitchen".'
    assert spoken.index("BASE-X") < spoken.index(VOICE_RULE) < spoken.index(place)
    assert spoken.index(place) < spoken.index("Call me Captain.")
