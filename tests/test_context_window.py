"""A request larger than the model's context window: one sentence saying so, nothing lost.

The fake OpenAI-compatible server answers exactly as llama.cpp's llama-server does when a
prompt does not fit its context (HTTP 400, error type `exceed_context_size_error`), and as
OpenAI does (HTTP 400, code `context_length_exceeded`). scripts/e2e checks the same
against a real llama-server.
"""

from __future__ import annotations

import json
from pathlib import Path

import litellm
import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_capture_events

from custom_components.langgraph_conversation.agent.errors import ModelErrorKind
from custom_components.langgraph_conversation.agent.models import classify_error
from custom_components.langgraph_conversation.agent.models.error_kinds import is_retryable
from custom_components.langgraph_conversation.const import EVENT_ACTIVITY
from fakes import ErrorReply, FakeOpenAIServer
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import intent

from .conftest import TEST_KEY, agent_entity_id

STRINGS = Path(__file__).parents[1] / "custom_components/langgraph_conversation/strings.json"
# llama-server 0.7.0's words for a prompt over its window (its body also has the counts).
LLAMA_SERVER_TOO_LONG = ErrorReply(
    status=400,
    message=(
        "request (3031 tokens) exceeds the available context size (2048 tokens), try increasing it"
    ),
    error_type="exceed_context_size_error",
)
OPENAI_TOO_LONG = ErrorReply(
    status=400,
    message=(
        "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9001 tokens. Please reduce the length of the messages."
    ),
    code="context_length_exceeded",
    error_type="invalid_request_error",
)


def _sentence(key: str) -> str:
    return json.loads(STRINGS.read_text())["exceptions"][key]["message"]


@pytest.mark.parametrize(
    "too_long", [LLAMA_SERVER_TOO_LONG, OPENAI_TOO_LONG], ids=["llama-server", "openai"]
)
async def test_request_over_the_window_gets_one_sentence(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    too_long: ErrorReply,
) -> None:
    """The user hears what is wrong and what to do; the conversation goes on afterwards."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    agent_id = agent_entity_id(hass, setup_integration)
    openai_server.add_text("Hello there.")
    first = await conversation.async_converse(hass, "Hi", None, Context(), agent_id=agent_id)

    openai_server.add(too_long)
    result = await conversation.async_converse(
        hass, "word " * 3000, first.conversation_id, Context(), agent_id=agent_id
    )
    await hass.async_block_till_done()

    assert result.response.response_type == intent.IntentResponseType.ERROR
    sentence = result.response.speech["plain"]["speech"]
    # Home Assistant drops the final full stop of an error sentence.
    assert sentence == _sentence("turn_context_window").rstrip(".")
    assert events[-1].data["error"] == ModelErrorKind.CONTEXT_WINDOW
    # Not retried: the same request would not fit a second time.
    assert openai_server.request_count == 2

    openai_server.add_text("Still here.")
    after = await conversation.async_converse(
        hass, "Short one", first.conversation_id, Context(), agent_id=agent_id
    )
    assert after.response.speech["plain"]["speech"] == "Still here."
    roles = [m["role"] for m in openai_server.requests[-1]["messages"]]
    assert roles[-3:] == ["user", "assistant", "user"]


async def test_window_errors_are_not_retried(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The classification holds for the exception LiteLLM raises, not only the sentence."""
    openai_server.add(LLAMA_SERVER_TOO_LONG)
    with pytest.raises(litellm.BadRequestError) as caught:
        await litellm.acompletion(
            model="openai/test-model",
            api_base=openai_server.api_base,
            api_key=TEST_KEY,
            messages=[{"role": "user", "content": "too long"}],
        )
    assert classify_error(caught.value) is ModelErrorKind.CONTEXT_WINDOW
    assert not is_retryable(caught.value)
