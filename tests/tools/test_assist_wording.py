"""Home Assistant's live-context wording in shorter words: written for this version's
exact texts (a version with other texts fails here), sent in their place."""

from __future__ import annotations

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.tools import assist_wording
from custom_components.langgraph_conversation.tools.assist_wording import (
    DYNAMIC_CONTEXT_PROMPT,
    digest,
    shorter,
    shorter_parameters,
    shorter_prompt,
)
from custom_components.langgraph_conversation.tools.schema import tool_parameters
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import Context, HomeAssistant
from homeassistant.setup import async_setup_component

from ..conftest import agent_entity_id
from ..helpers import add_light, assist_api, messages_of, text_of


async def _live_context_tool(hass: HomeAssistant):
    for component in ("homeassistant", "conversation", "intent", "light"):
        assert await async_setup_component(hass, component, {})
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    api = await assist_api(hass)
    return api, next(t for t in api.tools if t.name.endswith("GetLiveContext"))


async def test_rewrites_were_written_for_this_versions_texts(hass: HomeAssistant) -> None:
    """Every live-context text this Home Assistant sends has a rewrite; when one fails
    here, Home Assistant changed its words: write the rewrite for the new text."""
    known = assist_wording._SHORTER
    assert digest(DYNAMIC_CONTEXT_PROMPT) in known, DYNAMIC_CONTEXT_PROMPT
    api, tool = await _live_context_tool(hass)
    assert digest(tool.description) in known, tool.description
    assert DYNAMIC_CONTEXT_PROMPT.rstrip("\n") in api.api_prompt
    for name, sub in tool_parameters(tool.parameters, api.custom_serializer)["properties"].items():
        if "description" in sub:
            assert digest(sub["description"]) in known, (name, sub["description"])


def test_unknown_texts_are_sent_as_they_are() -> None:
    """A text no rewrite was written for is Home Assistant's own, unchanged."""
    assert shorter("Some new wording.") == "Some new wording."
    assert shorter_prompt("A prompt without the guidance.") == "A prompt without the guidance."
    parameters = {"type": "object", "properties": {"x": {"type": "string", "description": "d"}}}
    assert shorter_parameters(parameters) == parameters


async def test_the_request_carries_the_shorter_wording(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The guidance and the live-context tool reach the model in fewer tokens; Home
    Assistant's other instructions (how to lock and unlock) are there as it wrote them."""
    _api, tool = await _live_context_tool(hass)
    await conversation.async_converse(
        hass, "Hi", None, Context(), agent_id=agent_entity_id(hass, setup_integration)
    )
    request = openai_server.requests[0]
    system = text_of(messages_of(request, "system")[0])
    short = shorter(DYNAMIC_CONTEXT_PROMPT)
    assert short in system
    assert DYNAMIC_CONTEXT_PROMPT.rstrip("\n") not in system
    assert len(short) < len(DYNAMIC_CONTEXT_PROMPT) * 0.7
    assert "to lock" in system
    sent = next(t["function"] for t in request["tools"] if t["function"]["name"] == tool.name)
    assert sent["description"] == shorter(tool.description)
    assert len(sent["description"]) < len(tool.description)


async def test_the_live_context_domain_takes_a_list_through_a_turn(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Home Assistant's live-context tool filters by one domain or a list of them: the
    model is offered both, and a list reaches Home Assistant whole (its result holds every
    domain of the list and nothing else)."""
    _api, tool = await _live_context_tool(hass)
    domain = tool_parameters(tool.parameters, _api.custom_serializer)["properties"].get("domain")
    if domain is None:
        pytest.skip("this version's live-context tool takes no filters")
    hass.states.async_set("sensor.kitchen_temperature", "21", {"friendly_name": "Kitchen Temp"})
    async_expose_entity(hass, conversation.DOMAIN, "sensor.kitchen_temperature", True)
    hass.states.async_set("switch.office_socket", "on", {"friendly_name": "Office Socket"})
    async_expose_entity(hass, conversation.DOMAIN, "switch.office_socket", True)
    openai_server.add_tool_calls([ToolCall(tool.name, {"domain": ["light", "sensor"]})])
    openai_server.add_text("The kitchen light is off; it is 21 degrees.")
    await conversation.async_converse(
        hass,
        "Lights and sensors?",
        None,
        Context(),
        agent_id=agent_entity_id(hass, setup_integration),
    )
    offered = next(
        t["function"]
        for t in openai_server.requests[0]["tools"]
        if t["function"]["name"] == tool.name
    )
    kinds = offered["parameters"]["properties"]["domain"]["anyOf"]
    assert {"type": "string"} in kinds
    assert {"type": "array", "items": {"type": "string"}} in kinds
    result = text_of(messages_of(openai_server.requests[1], "tool")[0])
    assert "Kitchen Light" in result
    assert "Kitchen Temp" in result
    assert "Office Socket" not in result
    assert "error" not in result.lower()
