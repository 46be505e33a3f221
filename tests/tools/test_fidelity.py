"""Every instruction of Home Assistant's own request keeps its meaning in ours, per version.

Core's instructions that carry meaning (its default instructions, the Assist API prompt,
the tool descriptions) are listed below as markers, for the exact texts of each supported
Home Assistant version: a marker is a short phrase, or a few alternatives that say it,
that our request (built through a real turn against the fake model server) must hold.
Our request must also hold none of the phrasings that would contradict core (asking for
confirmation itself, not calling the tool for a critical action).

The markers are keyed to the digest of core's texts, as tests/tools/test_assist_wording.py
keys its rewrites: a release that changes any of them fails here until its markers are
read from the new text and listed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.tools.assist_wording import digest
from custom_components.langgraph_conversation.tools.context import entity_listing
from custom_components.langgraph_conversation.tools.schema import tool_parameters
from fakes import FakeOpenAIServer
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import llm
from homeassistant.setup import async_setup_component

from ..conftest import agent_entity_id
from ..helpers import add_light, assist_api, messages_of, text_of

# A marker: what core says, and the phrasings (lower case) of ours that say it.
Marker = tuple[str, tuple[str, ...]]

_COMMON: tuple[Marker, ...] = (
    ("voice assistant", ("voice assistant for home assistant",)),
    ("world questions truthfully", ("answer questions about the world truthfully",)),
    ("plain text", ("plain text",)),
    ("always call the intent tools", ("always call the intent tools",)),
    ("lock with turn on", ("hassturnon to lock",)),
    ("unlock with turn off", ("hassturnoff to unlock",)),
    ("a device: just name and domain", ("for a device or area", "just name and domain")),
    ("an area: just area and domain", ("name or area, plus domain", "just area name and domain")),
    ("area rule", ("to specify an area",)),
    ("timers", ("not able to start timers",)),
    ("live data is a primary function", ("primary function",)),
    ("never say it is lacking", ("never say you lack", "do not state you lack")),
    ("existence from the listing", ("answer from the static context",)),
    ("current state needs live data", ("current state, value or mode",)),
    ("example: lock", ("is the lock locked?",)),
    ("example: fan", ("is the fan on?",)),
    ("example: thermostat", ("what mode is the thermostat in?",)),
    ("example: outside temperature", ("what is the temperature outside?",)),
    ("MUST call the live-context tool", ("you must call",)),
    ("local weather, lock status", ("local weather, lock status",)),
    ("answer with the tool's value", ("actual value or state it returned", "value from tool")),
    ("general knowledge", ("general knowledge",)),
    ("live-context tool: current conditions", ("is the light on?",)),
    ("live-context tool: conditional actions", ("conditional actions",)),
)
# The live-context tool's filters (2026.10 and later).
_FILTERS: tuple[Marker, ...] = (
    ("filter by name, domain and area", ("filter by name, domain, area",)),
    ("prefer domain for several devices", ("prefer domain for several",)),
    ("domain: one or a list", ('"type": "array"',)),
)

# Digest of core's instruction texts (see _core_texts) → the markers they carry.
MARKERS: dict[str, tuple[Marker, ...]] = {
    "2026.2": _COMMON,
    "2026.10": _COMMON + _FILTERS,
    "2026.11": _COMMON + _FILTERS,
}
VERSIONS: dict[str, str] = {
    "e1cfb6d1f86c654c": "2026.2",
    "72ccc9ea9a81e5a7": "2026.10",
    "fb400f155254464e": "2026.11",
}

# What would contradict core: the model asking for a yes itself, or not calling the tool.
CONTRADICTING = (
    "ask for confirmation",
    "ask the person for",
    "ask the user for their yes",
    "ask the user to confirm",
    "wait for the person's yes",
    "do not get around",
    "do not call",
    "never call",
    "refuse to unlock",
    "before calling",
)


async def _setup_home(hass: HomeAssistant) -> None:
    for component in ("homeassistant", "conversation", "intent", "light"):
        assert await async_setup_component(hass, component, {})
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    # The light's intents register as its integration finishes loading.
    await hass.async_block_till_done()


def _parameter_texts(tool: llm.Tool, api: llm.APIInstance) -> list[tuple[str, str]]:
    """A tool's parameters and their descriptions, in a stable order (enums built from
    sets may come in any order)."""
    properties = tool_parameters(tool.parameters, api.custom_serializer)["properties"]
    return sorted((name, sub.get("description", "")) for name, sub in properties.items())


def _core_texts(api: llm.APIInstance) -> str:
    """Core's instructions for this home: its default instructions, its Assist prompt
    without the entity listing, and every tool's description and parameters."""
    prompt = api.api_prompt.replace(entity_listing(api.api_prompt), "")
    tools = [
        f"{tool.name}: {tool.description}: {_parameter_texts(tool, api)}" for tool in api.tools
    ]
    return "\n".join([llm.DEFAULT_INSTRUCTIONS_PROMPT, prompt, *sorted(tools)])


def _request_text(request: dict[str, Any]) -> str:
    """What the model reads: the system message and every tool as sent, in lower case."""
    system = text_of(messages_of(request, "system")[0])
    return "\n".join([system, json.dumps(request.get("tools") or [])]).lower()


def missing(text: str, markers: tuple[Marker, ...]) -> list[str]:
    """The markers none of whose phrasings `text` holds."""
    return [name for name, says in markers if not any(s in text for s in says)]


def contradicting(text: str) -> list[str]:
    """The contradicting phrasings `text` holds."""
    return [phrase for phrase in CONTRADICTING if phrase in text]


async def _our_request(
    hass: HomeAssistant, entry: MockConfigEntry, server: FakeOpenAIServer
) -> tuple[str, str]:
    """(the version core's texts are, our request's text) for one real turn."""
    await _setup_home(hass)
    api = await assist_api(hass)
    key = digest(_core_texts(api))
    await conversation.async_converse(
        hass, "Hi", None, Context(), agent_id=agent_entity_id(hass, entry)
    )
    assert key in VERSIONS, (
        f"Home Assistant's instructions changed (digest {key}): read its prompt and tool "
        f"descriptions, list their markers in MARKERS and key them here.\n{_core_texts(api)}"
    )
    return VERSIONS[key], _request_text(server.requests[0])


async def test_our_request_says_every_instruction_of_cores(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Each marker of this version's core texts is in our request; nothing contradicts."""
    version, text = await _our_request(hass, setup_integration, openai_server)
    assert missing(text, MARKERS[version]) == []
    assert contradicting(text) == []


async def test_the_check_fails_when_a_marker_is_removed(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The check itself: our text without one marker's phrasings is reported as lacking
    exactly that marker; a contradicting rule added to it is reported too."""
    version, text = await _our_request(hass, setup_integration, openai_server)
    for name, says in MARKERS[version]:
        without = text
        for phrase in says:
            without = without.replace(phrase, "")
        assert missing(without, MARKERS[version]) == [name]
    added = f"{text}\nfor unlocking, ask the user to confirm before calling the tool."
    assert contradicting(added) == ["ask the user to confirm", "before calling"]


@pytest.mark.parametrize("phrase", CONTRADICTING)
def test_each_contradicting_phrasing_is_caught(phrase: str) -> None:
    """No contradicting phrasing slips past the check."""
    assert phrase in contradicting(f"some rule: {phrase} the lock.")
