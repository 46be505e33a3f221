"""Prompt layers: every combination renders in the fixed order, and through Home Assistant."""

from __future__ import annotations

from dataclasses import fields, replace
from itertools import product

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.agent.graph import (
    AgentKind,
    PromptLayers,
    base_prompt,
    speaker_layer,
)
from custom_components.langgraph_conversation.agent.graph.prompts import (
    BASE_PROMPTS,
    NOTE_HEADER,
    VOICE_RULE,
)
from custom_components.langgraph_conversation.agent.memory import MEMORY_INSTRUCTIONS
from custom_components.langgraph_conversation.const import CONF_BASE_PROMPT, CONF_PROMPT
from fakes import FakeOpenAIServer
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import area_registry as ar, device_registry as dr

from ...conftest import agent_entity_id
from ...helpers import messages_of, text_of

# What each optional system layer renders as, in the order the system message holds them.
SYSTEM_LAYERS = {
    "voice": (True, VOICE_RULE),
    "memory_rules": (True, MEMORY_INSTRUCTIONS),
    "instructions": ("Be kind.", "Be kind."),
}
# The volatile layers of the context note, in order.
NOTE_LAYERS = {
    "clock": "Current time is 10:00:00. Today's date is 2026-12-03.",
    "speaker": 'The person is in the area "Hall".',
    "memories": "<memories>\n- x\n</memories>",
}


def test_every_layer_is_covered() -> None:
    """The tables above name every layer but the base and the two the graph places (the
    summary after the system message, passages before the request)."""
    assert [f.name for f in fields(PromptLayers)] == [
        "base",
        *SYSTEM_LAYERS,
        *NOTE_LAYERS,
        "summary",
        "knowledge",
    ]


def test_layer_combinations_render_in_order() -> None:
    """Each combination: the system message holds the base and exactly the present stable
    layers, in order, and never a volatile one; the note holds exactly the volatile ones.
    (One test, not one per combination: every test here starts a Home Assistant.)"""
    names = [*SYSTEM_LAYERS, *NOTE_LAYERS, "summary", "knowledge"]
    combinations = list(product([False, True], repeat=len(names)))
    for present in combinations:
        on = dict(zip(names, present, strict=True))
        layers = PromptLayers(base="BASE")
        system, note = ["BASE"], []
        for name, (value, rendered) in SYSTEM_LAYERS.items():
            if on[name]:
                layers = replace(layers, **{name: value})
                system.append(rendered)
        for name, value in NOTE_LAYERS.items():
            if on[name]:
                layers = replace(layers, **{name: value})
                note.append(value)
        if on["summary"]:
            layers = replace(layers, summary="They asked about tea.")
        if on["knowledge"]:
            layers = replace(layers, knowledge="<knowledge>\n- y\n</knowledge>")
        assert layers.render() == "\n\n".join(system), present
        assert layers.note() == ("\n".join([NOTE_HEADER, *note]) if note else ""), present


def test_blank_layers_leave_no_gaps() -> None:
    """Empty or blank layers are left out, not rendered as empty paragraphs."""
    layers = PromptLayers(base="BASE", instructions="  \n", memories="", clock=" ")
    assert layers.render() == "BASE"
    assert layers.note() == ""


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
    """Typed turns: override, then the rendered template, with the memory rules between;
    voice adds its rule. The place and the clock are in the turn's context note, right
    before the request, never in the system message."""
    agent_id = agent_entity_id(hass, setup_integration)
    await conversation.async_converse(hass, "Hello", None, Context(), agent_id=agent_id)
    typed = _system(openai_server)
    assert typed.startswith("BASE-X\n\n")
    assert "Call me Captain." in typed
    assert typed.index("BASE-X") < typed.index(MEMORY_INSTRUCTIONS) < typed.index("Call me")
    assert VOICE_RULE not in typed
    assert "The person is" not in typed
    assert "Current time is" not in typed
    assert [text_of(m) for m in messages_of(openai_server.requests[-1], "user")] == ["Hello"]

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
    assert spoken.index("BASE-X") < spoken.index(VOICE_RULE) < spoken.index("Call me Captain.")
    assert place not in spoken
    *_, note, request = messages_of(openai_server.requests[-1], "user")
    assert text_of(request) == "Hello"
    assert text_of(note) == f"{NOTE_HEADER}\n{place} Requests without a place mean this area."
