"""The other ways people reach the agent: the chat panel's websocket, a voice pipeline,
an Ollama model; and the entry's lifecycle."""

from __future__ import annotations

import litellm
from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service
from pytest_homeassistant_custom_component.typing import WebSocketGenerator

from fakes import FakeOllamaServer, FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.config_entries import ConfigEntryState
from homeassistant.const import STATE_UNAVAILABLE
from homeassistant.core import Context, HomeAssistant
from homeassistant.setup import async_setup_component

from .conftest import agent_entity_id
from .helpers import add_light, assist_tool_name, setup_ollama_entry


async def test_chat_panel_websocket(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_ws_client: WebSocketGenerator,
) -> None:
    """The Assist chat panel sends conversation/process over the websocket."""
    client = await hass_ws_client(hass)
    openai_server.add_text("Hello from the panel.")
    await client.send_json_auto_id(
        {
            "type": "conversation/process",
            "text": "Hi",
            "agent_id": agent_entity_id(hass, setup_integration),
            "language": "en",
        }
    )
    msg = await client.receive_json()
    assert msg["success"], msg
    assert msg["result"]["response"]["speech"]["plain"]["speech"] == "Hello from the panel."
    assert msg["result"]["conversation_id"]


async def test_voice_pipeline_streams_deltas(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_ws_client: WebSocketGenerator,
) -> None:
    """A pipeline run gets each token as a chat_log_delta before the run ends."""
    assert await async_setup_component(hass, "assist_pipeline", {})
    entity_id = agent_entity_id(hass, setup_integration)
    state = hass.states.get(entity_id)
    assert state is not None
    client = await hass_ws_client(hass)
    await client.send_json_auto_id(
        {
            "type": "assist_pipeline/pipeline/create",
            "conversation_engine": entity_id,
            "conversation_language": "en",
            "language": "en",
            "name": "LangGraph",
            "stt_engine": None,
            "stt_language": None,
            "tts_engine": None,
            "tts_language": None,
            "tts_voice": None,
            "wake_word_entity": None,
            "wake_word_id": None,
        }
    )
    created = await client.receive_json()
    assert created["success"], created
    answer = "It is sunny and warm today, with a light breeze from the west in the afternoon."
    openai_server.add_text(answer, chunk_size=5)
    await client.send_json_auto_id(
        {
            "type": "assist_pipeline/run",
            "start_stage": "intent",
            "end_stage": "intent",
            "input": {"text": "How is the weather?"},
            "pipeline": created["result"]["id"],
        }
    )
    assert (await client.receive_json())["success"]
    events: list[dict] = []
    while True:
        msg = await client.receive_json()
        events.append(msg["event"])
        if msg["event"]["type"] == "run-end":
            break
    types = [event["type"] for event in events]
    deltas = [
        event["data"]["chat_log_delta"].get("content")
        for event in events
        if event["type"] == "intent-progress" and "chat_log_delta" in event["data"]
    ]
    # Token by token, in order, all before the intent stage ended.
    assert "".join(d for d in deltas if d) == answer
    assert len([d for d in deltas if d]) >= len(answer) // 5
    last_delta = max(i for i, t in enumerate(types) if t == "intent-progress")
    assert last_delta < types.index("intent-end") < types.index("run-end")
    intent_end = events[types.index("intent-end")]
    speech = intent_end["data"]["intent_output"]["response"]["speech"]["plain"]["speech"]
    assert speech == answer
    assert state.attributes["supported_features"] & conversation.ConversationEntityFeature.CONTROL


async def test_ollama_model(hass: HomeAssistant, ollama_server: FakeOllamaServer) -> None:
    """The same agent works over Ollama's native /api/chat through LiteLLM."""
    entry = await setup_ollama_entry(hass, ollama_server)
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    turn_on = async_mock_service(hass, "light", "turn_on")
    ollama_server.add_tool_calls(
        [ToolCall(await assist_tool_name(hass, "HassTurnOn"), {"name": "Kitchen Light"})]
    )
    ollama_server.add_text("Done, the kitchen light is on.")
    result = await conversation.async_converse(
        hass, "Kitchen light on", None, Context(), agent_id=agent_entity_id(hass, entry)
    )
    assert result.response.speech["plain"]["speech"] == "Done, the kitchen light is on."
    assert [call.data["entity_id"] for call in turn_on] == [["light.kitchen"]]
    assert ollama_server.requests[0]["model"] == "llama3.2"
    assert [m["role"] for m in ollama_server.requests[1]["messages"]][-1] == "tool"


async def test_ollama_tool_round_keeps_its_calls(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """The second request of a tool round carries the assistant's calls and the result's id.

    LiteLLM 1.83.0 alone drops both (agent/upstream/litellm_ollama.py); without them the
    model reads a result it has no record of asking for.
    """
    entry = await setup_ollama_entry(hass, ollama_server)
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    async_mock_service(hass, "light", "turn_on")
    tool = await assist_tool_name(hass, "HassTurnOn")
    ollama_server.add_tool_calls([ToolCall(tool, {"name": "Kitchen Light"})])
    ollama_server.add_text("Done.")
    await conversation.async_converse(
        hass, "Kitchen light on", None, Context(), agent_id=agent_entity_id(hass, entry)
    )
    second = ollama_server.requests[1]["messages"]
    assistant, result = second[-2], second[-1]
    assert assistant["role"] == "assistant"
    [call] = assistant["tool_calls"]
    assert call["function"] == {"name": tool, "arguments": {"name": "Kitchen Light"}}
    assert call["id"]
    assert result["role"] == "tool"
    assert result["tool_call_id"] == call["id"]
    assert result["tool_name"] == tool


async def test_unload_and_reload(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Unload closes everything LiteLLM kept open; a reload answers again."""
    entry = setup_integration
    entity_id = agent_entity_id(hass, entry)
    openai_server.add_text("Before.")
    await conversation.async_converse(hass, "Hi", None, Context(), agent_id=entity_id)
    assert litellm.in_memory_llm_clients_cache.cache_dict

    assert await hass.config_entries.async_unload(entry.entry_id)
    await hass.async_block_till_done()
    assert entry.state is ConfigEntryState.NOT_LOADED
    assert hass.states.get(entity_id).state == STATE_UNAVAILABLE
    assert not litellm.in_memory_llm_clients_cache.cache_dict
    assert GLOBAL_LOGGING_WORKER._worker_task is None

    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    openai_server.add_text("After.")
    result = await conversation.async_converse(
        hass, "Hi again", None, Context(), agent_id=entity_id
    )
    assert result.response.speech["plain"]["speech"] == "After."


async def test_two_models_keep_their_own_servers_and_keys(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    ollama_server: FakeOllamaServer,
) -> None:
    """Calls of one entry never change where another entry's calls go, or with which key."""
    local = await setup_ollama_entry(hass, ollama_server)
    for n in range(2):
        openai_server.add_text(f"Cloud {n}.")
        cloud = await conversation.async_converse(
            hass, "Hi", None, Context(), agent_id=agent_entity_id(hass, setup_integration)
        )
        assert cloud.response.speech["plain"]["speech"] == f"Cloud {n}."
        ollama_server.add_text(f"Local {n}.")
        here = await conversation.async_converse(
            hass, "Hi", None, Context(), agent_id=agent_entity_id(hass, local)
        )
        assert here.response.speech["plain"]["speech"] == f"Local {n}."
    assert openai_server.request_count == 2
    assert ollama_server.request_count == 2
    # Nothing was left in LiteLLM's module-wide settings for other callers to pick up.
    assert litellm.api_key is None
    assert litellm.api_base is None


async def test_ollama_errors_keep_their_meaning(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """LiteLLM wraps every Ollama error as a connection error; the status still decides."""
    entry = await setup_ollama_entry(hass, ollama_server, model_retries=0)
    ollama_server.add_error(404, "model 'llama3.2' not found, try pulling it first")
    result = await conversation.async_converse(
        hass, "Hi", None, Context(), agent_id=agent_entity_id(hass, entry)
    )
    assert "does not know the configured model" in result.response.speech["plain"]["speech"]
