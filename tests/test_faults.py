"""Every fault ends the turn with a clear sentence and leaves the thread usable."""

from __future__ import annotations

import json
from pathlib import Path
import socket
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service

from custom_components.langgraph_conversation.const import (
    CONF_API_BASE,
    CONF_MAX_TOOL_ROUNDS,
    CONF_MODEL_RETRIES,
    CONF_REQUEST_TIMEOUT,
    DOMAIN,
)
from homeassistant.components import conversation
from homeassistant.config_entries import SOURCE_REAUTH
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import intent

from .conftest import agent_entity_id
from .fakes import FakeOpenAIServer, ToolCall
from .helpers import add_light, assist_tool_name, messages_of, text_of

# The sentences users hear, straight from the translations Home Assistant loads.
SENTENCES = {
    key.removeprefix("turn_"): value["message"]
    for key, value in json.loads(
        (
            Path(__file__).parent.parent / "custom_components" / DOMAIN / "translations" / "en.json"
        ).read_text(encoding="utf-8")
    )["exceptions"].items()
}


async def _ask(
    hass: HomeAssistant, entry: MockConfigEntry, text: str, conversation_id: str | None = None
):
    return await conversation.async_converse(
        hass, text, conversation_id, Context(), agent_id=agent_entity_id(hass, entry)
    )


def _history(request: dict[str, Any]) -> list[tuple[str, str]]:
    """What the model saw besides the system prompt, as (role, text) pairs."""
    return [(m["role"], text_of(m)) for m in request["messages"] if m["role"] != "system"]


def _assert_error(result: conversation.ConversationResult, kind: str) -> None:
    assert result.response.response_type == intent.IntentResponseType.ERROR
    # Home Assistant drops the final full stop of an exception message.
    assert result.response.speech["plain"]["speech"] == SENTENCES[kind].rstrip(".")


async def _assert_thread_clean(
    hass: HomeAssistant, entry: MockConfigEntry, server: FakeOpenAIServer, conversation_id: str
) -> None:
    """The next turn works and the model sees only whole earlier turns."""
    server.add_text("Still here.")
    result = await _ask(hass, entry, "Are you there?", conversation_id)
    assert result.response.speech["plain"]["speech"] == "Still here."
    assert _history(server.requests[-1]) == [
        ("user", "Hello"),
        ("assistant", "Hi!"),
        ("user", "Are you there?"),
    ]


@pytest.mark.parametrize("agent_overrides", [{CONF_MODEL_RETRIES: 0}])
@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, "auth"),
        (403, "auth"),
        (404, "model_not_found"),
        (429, "rate_limit"),
        (500, "server"),
        (502, "server"),
        (503, "server"),
    ],
)
async def test_http_errors(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    status: int,
    kind: str,
) -> None:
    """Provider errors become the matching sentence; the conversation goes on."""
    openai_server.add_text("Hi!")
    first = await _ask(hass, setup_integration, "Hello")
    openai_server.add_error(
        status, "scripted failure", headers={"Retry-After": "1"} if status == 429 else None
    )
    result = await _ask(hass, setup_integration, "What now?", first.conversation_id)
    _assert_error(result, kind)
    await _assert_thread_clean(hass, setup_integration, openai_server, first.conversation_id)


async def test_auth_error_starts_reauth(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A refused key asks the user for a new one."""
    openai_server.add_error(401, "bad key")
    await _ask(hass, setup_integration, "Hello")
    await hass.async_block_till_done()
    flows = hass.config_entries.flow.async_progress_by_handler(DOMAIN)
    assert [flow["context"]["source"] for flow in flows] == [SOURCE_REAUTH]


@pytest.mark.parametrize("agent_overrides", [{CONF_REQUEST_TIMEOUT: 1}])
async def test_first_byte_timeout(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A model that does not start answering in time is a timeout."""
    openai_server.add_text("Hi!")
    first = await _ask(hass, setup_integration, "Hello")
    openai_server.add_text("too late", first_byte_delay=3)
    result = await _ask(hass, setup_integration, "Slow one", first.conversation_id)
    _assert_error(result, "timeout")
    await _assert_thread_clean(hass, setup_integration, openai_server, first.conversation_id)


async def test_connection_refused(hass: HomeAssistant, setup_integration: MockConfigEntry) -> None:
    """Nothing listening at the model's address is a connection error."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    hass.config_entries.async_update_entry(
        setup_integration, data={**setup_integration.data, CONF_API_BASE: closed}
    )
    await hass.async_block_till_done()
    result = await _ask(hass, setup_integration, "Hello")
    _assert_error(result, "connection")


@pytest.mark.parametrize("fault", ["broken_stream", "invalid_json"])
async def test_broken_stream(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    fault: str,
) -> None:
    """A stream that breaks mid-answer ends the turn; the half answer is not kept."""
    openai_server.add_text("Hi!")
    first = await _ask(hass, setup_integration, "Hello")
    if fault == "broken_stream":
        openai_server.add_broken_stream("The weather today is sun")
    else:
        openai_server.add_invalid_json_chunk("The weather today is sun")
    result = await _ask(hass, setup_integration, "Weather?", first.conversation_id)
    assert result.response.response_type == intent.IntentResponseType.ERROR
    assert "Please try again" in result.response.speech["plain"]["speech"]
    await _assert_thread_clean(hass, setup_integration, openai_server, first.conversation_id)


@pytest.mark.parametrize("agent_overrides", [{CONF_MODEL_RETRIES: 0}])
async def test_fault_mid_tool_loop_leaves_no_half_turn(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A failure after a tool ran removes the whole turn, tool call included."""
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    async_mock_service(hass, "light", "turn_on")
    openai_server.add_text("Hi!")
    first = await _ask(hass, setup_integration, "Hello")
    openai_server.add_tool_calls(
        [ToolCall(await assist_tool_name(hass, "HassTurnOn"), {"name": "Kitchen Light"})]
    )
    openai_server.add_error(500, "server died after the tool ran")
    result = await _ask(hass, setup_integration, "Kitchen light on", first.conversation_id)
    _assert_error(result, "server")
    await _assert_thread_clean(hass, setup_integration, openai_server, first.conversation_id)


async def test_invented_tool_is_reported_to_the_model(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A tool the model made up gets an error result; the model can recover."""
    openai_server.add_tool_calls([ToolCall("open_pod_bay_doors", {"please": True})])
    openai_server.add_text("I can't do that.")
    result = await _ask(hass, setup_integration, "Open the pod bay doors")
    assert result.response.speech["plain"]["speech"] == "I can't do that."
    tool_result = json.loads(text_of(messages_of(openai_server.requests[1], "tool")[0]))
    assert tool_result["error"] == "unknown_tool"
    assert "open_pod_bay_doors" in tool_result["error_text"]


async def test_invalid_tool_arguments_are_reported_to_the_model(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Arguments that are not JSON, or miss required fields, come back as errors."""
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    turn_on = async_mock_service(hass, "light", "turn_on")
    tool = await assist_tool_name(hass, "HassTurnOn")
    openai_server.add_raw_tool_call(tool, '{"name": "Kitch')
    openai_server.add_tool_calls([ToolCall(tool, {"brightness": "very"})])
    openai_server.add_text("Sorry, I got confused.")
    result = await _ask(hass, setup_integration, "Kitchen light on")
    assert result.response.speech["plain"]["speech"] == "Sorry, I got confused."
    not_json = json.loads(text_of(messages_of(openai_server.requests[1], "tool")[0]))
    assert not_json["error"] == "invalid_arguments"
    schema_error = json.loads(text_of(messages_of(openai_server.requests[2], "tool")[-1]))
    assert "error" in schema_error
    assert turn_on == []


@pytest.mark.parametrize("agent_overrides", [{CONF_MAX_TOOL_ROUNDS: 2}])
async def test_running_out_of_tool_rounds(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A model that keeps calling tools is stopped after the configured rounds."""
    openai_server.add_text("Hi!")
    first = await _ask(hass, setup_integration, "Hello")
    tool = await assist_tool_name(hass, "GetDateTime")
    for _ in range(3):
        openai_server.add_tool_calls([ToolCall(tool, {})])
    result = await _ask(hass, setup_integration, "Loop forever", first.conversation_id)
    _assert_error(result, "tool_rounds")
    # Two rounds ran (two tool calls answered), the third model request was the last.
    assert openai_server.request_count == 4
    await _assert_thread_clean(hass, setup_integration, openai_server, first.conversation_id)


async def test_empty_answer(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A model that says nothing gives an empty answer, not a crash."""
    openai_server.add_empty()
    result = await _ask(hass, setup_integration, "Hello")
    assert result.response.response_type == intent.IntentResponseType.ERROR
    assert result.response.speech["plain"]["speech"] == SENTENCES["empty_answer"].rstrip(".")


@pytest.mark.parametrize(
    ("status", "headers"), [(503, None), (429, {"Retry-After": "1"}), (500, None)]
)
async def test_retryable_errors_are_retried(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    status: int,
    headers: dict[str, str] | None,
) -> None:
    """One failure of a kind that may pass is retried (default budget 1); then it works."""
    openai_server.add_error(status, "try again", headers=headers)
    openai_server.add_text("Worked the second time.")
    result = await _ask(hass, setup_integration, "Hello")
    assert result.response.speech["plain"]["speech"] == "Worked the second time."
    assert openai_server.request_count == 2


async def test_retry_budget_is_bounded(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Past the budget the turn fails with the sentence; 4xx other than 429 never retry."""
    openai_server.add_error(503, "down")
    openai_server.add_error(503, "still down")
    result = await _ask(hass, setup_integration, "Hello")
    _assert_error(result, "server")
    assert openai_server.request_count == 2
    openai_server.add_error(401, "bad key")
    result = await _ask(hass, setup_integration, "Hello")
    _assert_error(result, "auth")
    assert openai_server.request_count == 3


async def test_no_retry_after_words_were_spoken(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A stream that breaks after text is not retried: the words were already heard."""
    openai_server.add_broken_stream("The answer is")
    result = await _ask(hass, setup_integration, "Hello")
    _assert_error(result, "connection")
    assert openai_server.request_count == 1
