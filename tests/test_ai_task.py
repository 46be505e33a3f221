"""The AI Task entity: generate_data with and without a structure, attachments, the subentry."""

from __future__ import annotations

import base64
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import (
    MockConfigEntry,
    MockUser,
    async_capture_events,
)
import voluptuous as vol

from custom_components.langgraph_conversation.config_flow import (
    DEFAULT_AI_TASK_OPTIONS,
)
from custom_components.langgraph_conversation.const import (
    CONF_ACTIVITY_CONTENTS,
    CONF_FALLBACK_MODEL,
    CONF_MAX_TOKENS,
    CONF_MODEL,
    CONF_MODEL_RETRIES,
    CONF_REQUEST_TIMEOUT,
    CONF_TEMPERATURE,
    DEFAULT_MODEL_RETRIES,
    DOMAIN,
    EVENT_ACTIVITY,
    SUBENTRY_AI_TASK,
    SUBENTRY_CONVERSATION,
)
from fakes import FakeOpenAIServer
from homeassistant import config_entries
from homeassistant.components import ai_task, conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import entity_registry as er, selector

from .conftest import TEST_KEY, TEST_MODEL, set_up_task_entry

STRINGS = Path(__file__).parents[1] / "custom_components" / DOMAIN / "strings.json"

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)

STRUCTURE = vol.Schema(
    {
        vol.Required("name"): selector.selector({"text": {}}),
        vol.Required("count"): selector.selector({"number": {}}),
    }
)


@pytest.fixture
def ai_task_overrides() -> dict[str, Any]:
    """Options a test changes on its AI Task (parametrize this fixture)."""
    return {}


@pytest.fixture
async def ai_entry(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    media_dir: Path,
    ai_task_overrides: dict[str, Any],
) -> MockConfigEntry:
    """An entry for the OpenAI-compatible fake with one conversation agent and one AI Task."""
    return await set_up_task_entry(
        hass, openai_server.api_base, {**DEFAULT_AI_TASK_OPTIONS, **ai_task_overrides}
    )


def _task_entity_id(hass: HomeAssistant, entry: MockConfigEntry) -> str:
    subentry_id = next(
        s.subentry_id for s in entry.subentries.values() if s.subentry_type == SUBENTRY_AI_TASK
    )
    entity_id = er.async_get(hass).async_get_entity_id("ai_task", DOMAIN, subentry_id)
    assert entity_id is not None
    return entity_id


def _message(key: str, **placeholders: str) -> str:
    text = json.loads(STRINGS.read_text())["exceptions"][key]["message"]
    return text.format(**placeholders)


async def _generate(hass: HomeAssistant, entry: MockConfigEntry, **kwargs: Any) -> Any:
    return await ai_task.async_generate_data(
        hass,
        task_name="Test task",
        entity_id=_task_entity_id(hass, entry),
        **{"instructions": "Do the task.", **kwargs},
    )


def _user_content(request: dict[str, Any]) -> Any:
    return next(m for m in request["messages"] if m["role"] == "user")["content"]


async def test_entity_and_device(hass: HomeAssistant, ai_entry: MockConfigEntry) -> None:
    """One AI Task entity per ai_task_data subentry, on its own service device."""
    entity_id = _task_entity_id(hass, ai_entry)
    state = hass.states.get(entity_id)
    assert state is not None
    assert state.attributes["supported_features"] == (
        ai_task.AITaskEntityFeature.GENERATE_DATA | ai_task.AITaskEntityFeature.SUPPORT_ATTACHMENTS
    )
    assert state.attributes["friendly_name"] == "Test AI Task"


async def test_text(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Without a structure the answer's text is the data, from one model call."""
    openai_server.add_text("A short poem about lights.")
    result = await _generate(hass, ai_entry, instructions="Write a poem about lights.")
    assert result.data == "A short poem about lights."
    assert result.conversation_id
    assert openai_server.request_count == 1
    request = openai_server.requests[0]
    assert request["messages"][0]["role"] == "system"
    assert _user_content(request) == "Write a poem about lights."
    assert "response_format" not in request


async def test_structured(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """With a structure: the schema is in the prompt, JSON mode asked, the answer validated."""
    openai_server.add_text('```json\n{"name": "kitchen", "count": 3}\n```')
    result = await _generate(hass, ai_entry, structure=STRUCTURE)
    assert result.data == {"name": "kitchen", "count": 3}
    assert openai_server.request_count == 1
    request = openai_server.requests[0]
    assert request["response_format"] == {"type": "json_object"}
    system = request["messages"][0]["content"]
    assert "JSON schema" in system
    assert '"count"' in system


async def test_structured_retry_with_error(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Invalid data is retried once, telling the model what was wrong."""
    openai_server.add_text('{"name": "kitchen"}')
    openai_server.add_text('{"name": "kitchen", "count": 2}')
    result = await _generate(hass, ai_entry, structure=STRUCTURE)
    assert result.data == {"name": "kitchen", "count": 2}
    assert openai_server.request_count == 2
    retry = openai_server.requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": '{"name": "kitchen"}'}
    assert retry[-1]["role"] == "user"
    assert "not valid" in retry[-1]["content"]
    assert "count" in retry[-1]["content"]


async def test_structured_fails_twice(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A second invalid answer is an error with a translated message."""
    openai_server.add_text("Sure! Here it is: kitchen, 3")
    openai_server.add_text("not json either")
    with pytest.raises(HomeAssistantError) as caught:
        await _generate(hass, ai_entry, structure=STRUCTURE)
    assert caught.value.translation_key == "ai_task_invalid_structure"
    expected = _message(
        "ai_task_invalid_structure", error=caught.value.translation_placeholders["error"]
    )
    assert str(caught.value) == expected
    assert openai_server.request_count == 2
    assert "Expecting value" in openai_server.requests[1]["messages"][-1]["content"]


async def test_structured_through_the_action(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The generate_data action builds the structure itself (voluptuous or probatio)."""
    openai_server.add_text('{"count": "many"}')
    openai_server.add_text('{"count": 4}')
    response = await hass.services.async_call(
        "ai_task",
        "generate_data",
        {
            "task_name": "Count",
            "entity_id": _task_entity_id(hass, ai_entry),
            "instructions": "How many lights are on?",
            "structure": {"count": {"selector": {"number": {}}, "required": True}},
        },
        blocking=True,
        return_response=True,
    )
    assert response is not None
    assert response["data"] == {"count": 4}
    assert openai_server.request_count == 2
    assert "not valid" in openai_server.requests[1]["messages"][-1]["content"]


async def test_model_error(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A rate limit that outlasts the retry is the conversation agent's translated message."""
    openai_server.add_error(429, "Rate limit reached", headers={"Retry-After": "0"})
    openai_server.add_error(429, "Rate limit reached", headers={"Retry-After": "0"})
    with pytest.raises(HomeAssistantError) as caught:
        await _generate(hass, ai_entry)
    assert caught.value.translation_key == "turn_rate_limit"
    # Home Assistant drops the final full stop of translated exception messages.
    assert str(caught.value) == _message("turn_rate_limit").rstrip(".")
    # The first attempt and the one retry the default options allow.
    assert openai_server.request_count == 1 + DEFAULT_MODEL_RETRIES


async def test_image_attachment(
    hass: HomeAssistant,
    ai_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    media_dir: Path,
) -> None:
    """An image from a local media source reaches the model as an image content block."""
    await hass.async_add_executor_job((media_dir / "snapshot.png").write_bytes, PNG)
    openai_server.add_text("A transparent pixel.")
    result = await _generate(
        hass,
        ai_entry,
        instructions="What is in the picture?",
        attachments=[
            {
                "media_content_id": "media-source://media_source/local/snapshot.png",
                "media_content_type": "image/png",
            }
        ],
    )
    assert result.data == "A transparent pixel."
    content = _user_content(openai_server.requests[0])
    assert content[0] == {"type": "text", "text": "What is in the picture?"}
    assert content[1]["type"] == "image_url"
    assert content[1]["image_url"]["url"] == (
        "data:image/png;base64," + base64.b64encode(PNG).decode()
    )


async def test_non_image_attachment(
    hass: HomeAssistant,
    ai_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    media_dir: Path,
) -> None:
    """Files other than images are refused with a clear message, before any model call."""
    await hass.async_add_executor_job((media_dir / "notes.txt").write_text, "hello")
    with pytest.raises(HomeAssistantError) as caught:
        await _generate(
            hass,
            ai_entry,
            attachments=[
                {
                    "media_content_id": "media-source://media_source/local/notes.txt",
                    "media_content_type": "text/plain",
                }
            ],
        )
    assert caught.value.translation_key == "ai_task_attachment_type"
    assert "notes.txt" in str(caught.value)
    assert openai_server.request_count == 0


async def test_subentry_create_and_reconfigure(
    hass: HomeAssistant, ai_entry: MockConfigEntry
) -> None:
    """AI Task entities are added and changed in the UI."""
    result = await hass.config_entries.subentries.async_init(
        (ai_entry.entry_id, SUBENTRY_AI_TASK), context={"source": config_entries.SOURCE_USER}
    )
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "user"
    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"],
        {
            "name": "Summaries",
            CONF_TEMPERATURE: 0.1,
            CONF_MAX_TOKENS: 500.0,
            CONF_REQUEST_TIMEOUT: 30.0,
        },
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.CREATE_ENTRY
    created = next(s for s in ai_entry.subentries.values() if s.title == "Summaries")
    assert created.subentry_type == SUBENTRY_AI_TASK
    assert created.data == {CONF_TEMPERATURE: 0.1, CONF_MAX_TOKENS: 500, CONF_REQUEST_TIMEOUT: 30}
    assert er.async_get(hass).async_get_entity_id("ai_task", DOMAIN, created.subentry_id)

    result = await hass.config_entries.subentries.async_init(
        (ai_entry.entry_id, SUBENTRY_AI_TASK),
        context={"source": config_entries.SOURCE_RECONFIGURE, "subentry_id": created.subentry_id},
    )
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "reconfigure"
    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"],
        {CONF_TEMPERATURE: 0.6, CONF_MAX_TOKENS: 800.0, CONF_REQUEST_TIMEOUT: 45.0},
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "reconfigure_successful"
    assert ai_entry.subentries[created.subentry_id].data == {
        CONF_TEMPERATURE: 0.6,
        CONF_MAX_TOKENS: 800,
        CONF_REQUEST_TIMEOUT: 45,
    }


# A second model on the same fake server: the fallback borrows the entry's key and base.
BACKUP_MODEL = "backup-model"


async def test_retry_after_server_error(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A 503 before the first word is retried on the main model, and the task succeeds."""
    openai_server.add_error(503, "overloaded", headers={"Retry-After": "0"})
    openai_server.add_text("A short poem about lights.")
    result = await _generate(hass, ai_entry, instructions="Write a poem about lights.")
    assert result.data == "A short poem about lights."
    assert [r["model"] for r in openai_server.requests] == [TEST_MODEL, TEST_MODEL]
    assert openai_server.requests[0]["messages"] == openai_server.requests[1]["messages"]


@pytest.mark.parametrize("ai_task_overrides", [{CONF_MODEL_RETRIES: 1}])
async def test_retry_after_connection_reset(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A connection reset before any byte of the answer is retried; the data is valid."""
    openai_server.add_reset()
    openai_server.add_text('{"name": "kitchen", "count": 3}')
    result = await _generate(hass, ai_entry, structure=STRUCTURE)
    assert result.data == {"name": "kitchen", "count": 3}
    assert openai_server.request_count == 2
    # The retry is the same request, JSON mode included.
    assert openai_server.requests[1]["response_format"] == {"type": "json_object"}
    assert openai_server.requests[0]["messages"] == openai_server.requests[1]["messages"]


@pytest.mark.parametrize(
    "ai_task_overrides",
    [{CONF_MODEL_RETRIES: 1, CONF_FALLBACK_MODEL: {CONF_MODEL: f"openai/{BACKUP_MODEL}"}}],
)
async def test_fallback_model_answers(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The main model fails twice (first attempt, retry): the fallback model answers, and
    the activity events name it."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    openai_server.add_error(503, "overloaded", headers={"Retry-After": "0"})
    openai_server.add_error(503, "overloaded", headers={"Retry-After": "0"})
    openai_server.add_text('{"name": "hall", "count": 1}')
    result = await _generate(hass, ai_entry, structure=STRUCTURE)
    await hass.async_block_till_done()
    assert result.data == {"name": "hall", "count": 1}
    assert [r["model"] for r in openai_server.requests] == [TEST_MODEL, TEST_MODEL, BACKUP_MODEL]
    # The fallback got the same task, with the schema and in JSON mode.
    assert openai_server.requests[2]["messages"] == openai_server.requests[0]["messages"]
    assert openai_server.requests[2]["response_format"] == {"type": "json_object"}

    payloads = [event.data for event in events]
    assert [p["type"] for p in payloads] == ["turn_start", "turn_end"]
    start, end = payloads
    assert start["agent_id"] == end["agent_id"] == _task_entity_id(hass, ai_entry)
    assert start["conversation_id"] == end["conversation_id"] == result.conversation_id
    assert start["turn_id"] == end["turn_id"]
    assert start["model"] == f"openai/{TEST_MODEL}"
    assert (end["model"], end["model_role"]) == (f"openai/{BACKUP_MODEL}", "fallback")
    assert (end["model_calls"], end["error"]) == (1, None)
    assert TEST_KEY not in json.dumps(payloads)


@pytest.mark.parametrize("ai_task_overrides", [{CONF_ACTIVITY_CONTENTS: True}])
async def test_activity_events(
    hass: HomeAssistant,
    ai_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
) -> None:
    """A task reports like a turn: start and end (both model calls of a structured retry
    counted, tokens summed), with the words when the option is on, as the caller's act."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    openai_server.add_text('{"count": "many"}', prompt_tokens=100, completion_tokens=5)
    openai_server.add_text('{"count": 4}', prompt_tokens=120, completion_tokens=4)
    # A real user: Home Assistant 2026.11 checks the caller's permissions first.
    context = Context(user_id=hass_admin_user.id)
    response = await hass.services.async_call(
        "ai_task",
        "generate_data",
        {
            "task_name": "Count",
            "entity_id": _task_entity_id(hass, ai_entry),
            "instructions": "How many lights are on?",
            "structure": {"count": {"selector": {"number": {}}, "required": True}},
        },
        blocking=True,
        return_response=True,
        context=context,
    )
    await hass.async_block_till_done()
    assert response is not None
    assert response["data"] == {"count": 4}
    start, end = [event.data for event in events]
    assert (start["type"], end["type"]) == ("turn_start", "turn_end")
    assert start["request"] == "How many lights are on?"
    assert end["answer"] == '{"count": 4}'
    assert (end["model"], end["model_role"]) == (f"openai/{TEST_MODEL}", "main")
    assert (end["model_calls"], end["input_tokens"], end["output_tokens"]) == (2, 220, 9)
    # Home Assistant 2026.10+ hands the caller's context to the entity; 2026.2 does not.
    passes_context = (
        "context" in inspect.signature(ai_task.AITaskEntity.internal_async_generate_data).parameters
    )
    expected_user = hass_admin_user.id if passes_context else None
    assert all(event.context.user_id == expected_user for event in events)


async def test_activity_on_invalid_structure(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Data still invalid after the retry ends the task's activity with its own error."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    openai_server.add_text("not json")
    openai_server.add_text("not json either")
    with pytest.raises(HomeAssistantError):
        await _generate(hass, ai_entry, structure=STRUCTURE)
    await hass.async_block_till_done()
    payloads = [event.data for event in events]
    assert [p["type"] for p in payloads] == ["turn_start", "error", "turn_end"]
    assert payloads[1]["error"] == payloads[2]["error"] == "invalid_structure"
    assert payloads[2]["model_calls"] == 2
    assert "not json" not in json.dumps(payloads)


async def test_hard_failure_is_the_turns_sentence(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A failure no retry or fallback helps (a bad request) is not retried, and the task
    fails with the very sentence a conversation turn speaks for it."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    openai_server.add_error(400, f"bad request, key {TEST_KEY}")
    with pytest.raises(HomeAssistantError) as caught:
        await _generate(hass, ai_entry)
    await hass.async_block_till_done()
    assert caught.value.translation_key == "turn_bad_request"
    assert openai_server.request_count == 1
    assert TEST_KEY not in str(caught.value)
    assert [event.data["type"] for event in events] == ["turn_start", "error", "turn_end"]
    assert events[1].data["error"] == "bad_request"

    openai_server.add_error(400, f"bad request, key {TEST_KEY}")
    subentry_id = next(
        s.subentry_id
        for s in ai_entry.subentries.values()
        if s.subentry_type == SUBENTRY_CONVERSATION
    )
    agent_id = er.async_get(hass).async_get_entity_id("conversation", DOMAIN, subentry_id)
    turn = await conversation.async_converse(hass, "Hello", None, Context(), agent_id=agent_id)
    assert turn.response.speech["plain"]["speech"] == str(caught.value)
    assert str(caught.value) == _message("turn_bad_request").rstrip(".")


async def test_subentry_fallback_and_retries(
    hass: HomeAssistant, ai_entry: MockConfigEntry
) -> None:
    """The AI Task form takes the agents' retries and fallback model (stored trimmed; an
    empty fallback section is dropped)."""
    result = await hass.config_entries.subentries.async_init(
        (ai_entry.entry_id, SUBENTRY_AI_TASK), context={"source": config_entries.SOURCE_USER}
    )
    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"],
        {
            "name": "Resilient",
            CONF_MODEL_RETRIES: 2.0,
            CONF_FALLBACK_MODEL: {CONF_MODEL: f" openai/{BACKUP_MODEL} "},
            CONF_ACTIVITY_CONTENTS: True,
        },
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.CREATE_ENTRY
    created = next(s for s in ai_entry.subentries.values() if s.title == "Resilient")
    assert created.data[CONF_MODEL_RETRIES] == 2
    assert created.data[CONF_FALLBACK_MODEL] == {CONF_MODEL: f"openai/{BACKUP_MODEL}"}
    assert created.data[CONF_ACTIVITY_CONTENTS] is True

    result = await hass.config_entries.subentries.async_init(
        (ai_entry.entry_id, SUBENTRY_AI_TASK),
        context={"source": config_entries.SOURCE_RECONFIGURE, "subentry_id": created.subentry_id},
    )
    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"], {CONF_MODEL_RETRIES: 0.0, CONF_FALLBACK_MODEL: {CONF_MODEL: " "}}
    )
    await hass.async_block_till_done()
    assert result["reason"] == "reconfigure_successful"
    assert CONF_FALLBACK_MODEL not in ai_entry.subentries[created.subentry_id].data
    assert ai_entry.subentries[created.subentry_id].data[CONF_MODEL_RETRIES] == 0
