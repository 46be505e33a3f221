"""Tool faults: a service that raises, one that hangs, an entity gone by the time of the call.

The model must read each as a tool error it can talk about (asserted on the request the
fake server received next), and the turn must end with the model's answer and a whole
turn in the thread.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from fakes import FakeOpenAIServer, ToolCall
from homeassistant.core import HomeAssistant, ServiceCall
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import intent, llm

from ..conftest import TEST_KEY
from ..helpers import add_light, assist_tool_name, messages_of, text_of
from .conftest import (
    ask,
    assert_responsive,
    assert_thread_consistent,
    speech,
    thread_messages,
)

ANSWER = "Sorry, that did not work."


async def _tool_call(hass: HomeAssistant, which: str) -> ToolCall:
    """A call that switches the kitchen light, through Assist or through our own tool."""
    if which == "assist":
        return ToolCall(await assist_tool_name(hass, "HassTurnOn"), {"name": "Kitchen Light"})
    return ToolCall("home_light_control", {"action": "turn_on", "name": "Kitchen Light"})


def _tool_result(server: FakeOpenAIServer) -> dict[str, Any]:
    """The tool result the model received in its last request."""
    results = messages_of(server.requests[-1], "tool")
    assert len(results) == 1
    return json.loads(text_of(results[0]))


def _assert_readable(text: str) -> None:
    """A tool error a model can relay: no stack trace, no secret."""
    assert "Traceback" not in text
    assert 'File "' not in text
    assert TEST_KEY not in text


async def _assert_turn_ended_cleanly(
    entry: MockConfigEntry, result: Any, conversation_id: str
) -> None:
    assert result.response.response_type == intent.IntentResponseType.ACTION_DONE
    assert speech(result) == ANSWER
    messages = await thread_messages(entry, conversation_id)
    assert_thread_consistent(messages)
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[2].status == "error"


@pytest.mark.parametrize("which", ["assist", "own"])
@pytest.mark.parametrize(
    "error",
    [
        HomeAssistantError("The kitchen bulb does not answer"),
        RuntimeError("The kitchen bulb does not answer"),
    ],
    ids=["HomeAssistantError", "RuntimeError"],
)
async def test_service_that_raises(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    which: str,
    error: Exception,
) -> None:
    """The service's error reaches the model as a readable tool result."""
    if which == "assist" and not hasattr(llm, "ToolResult"):
        # Home Assistant 2026.2 (told apart by its lack of llm.ToolResult) answers an
        # intent "done" and lets the service fail in the background: no tool can report
        # what Home Assistant does not say.
        pytest.skip("this Home Assistant's intents do not report service failures")
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)

    async def turn_on(call: ServiceCall) -> None:
        raise error

    hass.services.async_register("light", "turn_on", turn_on)
    openai_server.add_tool_calls([await _tool_call(hass, which)])
    openai_server.add_text(ANSWER)
    result = await ask(hass, setup_integration, "Kitchen light on")

    tool_result = _tool_result(openai_server)
    assert "error" in tool_result
    text = json.dumps(tool_result)
    # Home Assistant's intents say which call failed; our tools pass the service's words on.
    assert ("Failed to call turn_on" if which == "assist" else "does not answer") in text
    _assert_readable(text)
    await _assert_turn_ended_cleanly(setup_integration, result, result.conversation_id)
    await assert_responsive(hass)


async def test_service_that_hangs_past_the_tool_timeout(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A tool waiting on a service that never returns is cut at its timeout (15 s)."""
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    release = asyncio.Event()
    started = asyncio.Event()

    async def turn_on(call: ServiceCall) -> None:
        started.set()
        await release.wait()

    hass.services.async_register("light", "turn_on", turn_on)
    openai_server.add_tool_calls([await _tool_call(hass, "own")])
    openai_server.add_text(ANSWER)
    turn = asyncio.create_task(ask(hass, setup_integration, "Kitchen light on"))
    await started.wait()
    # Home Assistant serves others while the tool hangs.
    await assert_responsive(hass)
    result = await turn
    release.set()
    await hass.async_block_till_done()

    tool_result = _tool_result(openai_server)
    assert tool_result["error"] == "timeout"
    assert "did not finish within 15 seconds" in tool_result["error_text"]
    await _assert_turn_ended_cleanly(setup_integration, result, result.conversation_id)


@pytest.mark.parametrize("which", ["assist", "own"])
async def test_entity_removed_between_listing_and_calling(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    which: str,
) -> None:
    """The light was in the prompt, is gone when the call comes: the model is told."""
    light = add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    switched: list[ServiceCall] = []

    async def turn_on(call: ServiceCall) -> None:
        switched.append(call)

    hass.services.async_register("light", "turn_on", turn_on)
    # The model "thinks" for a while; the light disappears meanwhile.
    openai_server.add_tool_calls([await _tool_call(hass, which)], first_byte_delay=1)
    openai_server.add_text(ANSWER)
    turn = asyncio.create_task(ask(hass, setup_integration, "Kitchen light on"))
    await openai_server.wait_for_requests(1)
    assert "Kitchen Light" in text_of(messages_of(openai_server.requests[0], "system")[0])
    hass.states.async_remove(light)
    result = await turn

    assert switched == []
    tool_result = _tool_result(openai_server)
    assert "error" in tool_result
    _assert_readable(json.dumps(tool_result))
    await _assert_turn_ended_cleanly(setup_integration, result, result.conversation_id)
