"""Visible activity: bus events and trace entries for turns and tool calls."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import (
    MockConfigEntry,
    async_capture_events,
    async_mock_service,
)

from custom_components.langgraph_conversation.activity import TRACE_KEY
from custom_components.langgraph_conversation.const import (
    CONF_ACTIVITY_CONTENTS,
    CONF_API_KEY,
    CONF_FALLBACK_MODEL,
    CONF_MODEL,
    CONF_MODEL_RETRIES,
    EVENT_ACTIVITY,
)
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.conversation.trace import async_get_traces
from homeassistant.core import Context, HomeAssistant

from .conftest import TEST_KEY, TEST_MODEL, agent_entity_id
from .helpers import add_light, assist_tool_name

MAIN_MODEL = f"openai/{TEST_MODEL}"
REQUEST = "Please switch on the kitchen light"
ANSWER = "The kitchen light is on."
CONTENT_KEYS = {"request", "answer", "tool_args", "tool_result"}


async def _tool_turn(
    hass: HomeAssistant, entry: MockConfigEntry, server: FakeOpenAIServer
) -> tuple[conversation.ConversationResult, str]:
    """A turn that turns a light on through the Assist API, with scripted token counts."""
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    async_mock_service(hass, "light", "turn_on")
    tool = await assist_tool_name(hass, "HassTurnOn")
    server.add_tool_calls(
        [ToolCall(tool, {"name": "Kitchen Light"})], prompt_tokens=300, completion_tokens=12
    )
    server.add_text(ANSWER, prompt_tokens=340, completion_tokens=8)
    context = Context(user_id="person-1")
    result = await conversation.async_converse(
        hass, REQUEST, None, context, agent_id=agent_entity_id(hass, entry)
    )
    return result, tool


def _our_trace_entries() -> list[dict[str, Any]]:
    """Our payloads in the latest conversation trace, in order."""
    trace = async_get_traces()[-1].as_dict()
    return [
        event["data"][TRACE_KEY]
        for event in trace["events"]
        if event["event_type"] == "agent_detail" and TRACE_KEY in (event["data"] or {})
    ]


async def test_activity_events_without_contents(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Turn and tool events carry names, counts and timings, no words, no key."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    result, tool = await _tool_turn(hass, setup_integration, openai_server)
    await hass.async_block_till_done()
    assert result.response.speech["plain"]["speech"] == ANSWER

    payloads = [event.data for event in events]
    assert [p["type"] for p in payloads] == ["turn_start", "tool_start", "tool_end", "turn_end"]
    agent_id = agent_entity_id(hass, setup_integration)
    for payload in payloads:
        assert payload["agent_id"] == agent_id
        assert payload["conversation_id"] == result.conversation_id
        assert payload["turn_id"] == payloads[0]["turn_id"]
        assert payload["device_id"] is None
        assert not CONTENT_KEYS & payload.keys()
    # Fired as the person's action.
    assert all(event.context.user_id == "person-1" for event in events)

    start, tool_start, tool_end, end = payloads
    assert start["model"] == MAIN_MODEL
    assert tool_start["tool_name"] == tool
    assert tool_end["tool_call_id"] == tool_start["tool_call_id"]
    assert (tool_end["tool_name"], tool_end["success"], tool_end["error"]) == (tool, True, None)
    assert end["model"] == MAIN_MODEL
    assert end["model_role"] == "main"
    assert (end["input_tokens"], end["output_tokens"]) == (640, 20)
    # The second call began as the first did: the fake served that from its prefix cache.
    cached = end["cached_input_tokens"]
    assert cached > 0
    assert (end["model_calls"], end["tool_calls"]) == (2, 1)
    assert isinstance(end["duration"], float)
    assert end["error"] is None

    everything = json.dumps(payloads)
    assert "kitchen" not in everything.lower()
    assert ANSWER not in everything
    assert TEST_KEY not in everything
    assert openai_server.api_base not in everything

    # The same payloads are in the Assist debug trace, plus core's token stats.
    assert _our_trace_entries() == payloads
    trace = async_get_traces()[-1].as_dict()
    stats = [e["data"]["stats"] for e in trace["events"] if "stats" in (e["data"] or {})]
    assert stats == [
        {
            "input_tokens": 640,
            "cached_input_tokens": end["cached_input_tokens"],
            "output_tokens": 20,
        }
    ]


@pytest.mark.parametrize("agent_overrides", [{CONF_ACTIVITY_CONTENTS: True}])
async def test_activity_events_with_contents(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """With the option on, requests, answers and tool calls' words are included."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    await _tool_turn(hass, setup_integration, openai_server)
    await hass.async_block_till_done()

    start, tool_start, tool_end, end = [event.data for event in events]
    assert start["request"] == REQUEST
    assert tool_start["tool_args"] == {"name": "Kitchen Light"}
    assert tool_end["tool_result"]["response_type"] == "action_done"
    assert end["answer"] == ANSWER
    assert _our_trace_entries() == [start, tool_start, tool_end, end]
    assert TEST_KEY not in json.dumps([event.data for event in events])


@pytest.mark.parametrize("agent_overrides", [{CONF_MODEL_RETRIES: 0}])
async def test_activity_on_failure(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A failed turn reports its error kind once, and still ends; the detail stays out."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    openai_server.add_error(503, f"overloaded, your key {TEST_KEY} is fine")
    await conversation.async_converse(
        hass, "Hello", None, Context(), agent_id=agent_entity_id(hass, setup_integration)
    )
    await hass.async_block_till_done()

    payloads = [event.data for event in events]
    assert [p["type"] for p in payloads] == ["turn_start", "error", "turn_end"]
    assert payloads[1]["error"] == "server"
    assert payloads[2]["error"] == "server"
    assert payloads[2]["model"] is None
    assert payloads[2]["model_calls"] == 0
    assert TEST_KEY not in json.dumps(payloads)
    assert "overloaded" not in json.dumps(payloads)


@pytest.mark.parametrize(
    "agent_overrides",
    [
        {
            CONF_MODEL_RETRIES: 0,
            CONF_ACTIVITY_CONTENTS: True,
            CONF_FALLBACK_MODEL: {CONF_MODEL: "openai/backup-model"},
        }
    ],
)
async def test_no_key_in_activity_with_roles(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Even with contents on and a fallback borrowing the entry's key, no key shows."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    openai_server.add_error(429, "slow down")
    openai_server.add_text("Backup here.")
    result = await conversation.async_converse(
        hass, "Hello", None, Context(), agent_id=agent_entity_id(hass, setup_integration)
    )
    await hass.async_block_till_done()
    assert result.response.speech["plain"]["speech"] == "Backup here."
    # Same provider, no base of its own: the fallback went to the entry's server, with
    # the entry's key (the fake refuses any other).
    assert [r["model"] for r in openai_server.requests] == [TEST_MODEL, "backup-model"]
    assert setup_integration.data[CONF_API_KEY] == TEST_KEY
    end = events[-1].data
    assert (end["model"], end["model_role"]) == ("openai/backup-model", "fallback")
    assert TEST_KEY not in json.dumps([event.data for event in events])
    assert TEST_KEY not in json.dumps(async_get_traces()[-1].as_dict(), default=str)
