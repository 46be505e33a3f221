"""The AI Task entity: generate_data with and without a structure, attachments, the subentry."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry
import voluptuous as vol

from custom_components.langgraph_conversation.config_flow import (
    DEFAULT_AGENT_OPTIONS,
    DEFAULT_AI_TASK_OPTIONS,
)
from custom_components.langgraph_conversation.const import (
    CONF_API_BASE,
    CONF_API_KEY,
    CONF_MAX_TOKENS,
    CONF_MODEL,
    CONF_REQUEST_TIMEOUT,
    CONF_TEMPERATURE,
    DOMAIN,
    SUBENTRY_AI_TASK,
    SUBENTRY_CONVERSATION,
)
from homeassistant import config_entries
from homeassistant.components import ai_task
from homeassistant.config_entries import ConfigSubentryData
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import entity_registry as er, selector
from homeassistant.setup import async_setup_component

from .conftest import TEST_KEY, TEST_MODEL
from .fakes import FakeOpenAIServer

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
def media_dir(hass: HomeAssistant, tmp_path: Path) -> Path:
    """The local media folder (media_source reads it when it is set up, with our entry)."""
    media = tmp_path / "media"
    media.mkdir()
    hass.config.media_dirs = {"local": str(media)}
    return media


@pytest.fixture
async def ai_entry(
    hass: HomeAssistant, openai_server: FakeOpenAIServer, media_dir: Path
) -> MockConfigEntry:
    """An entry for the OpenAI-compatible fake with one conversation agent and one AI Task."""
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=f"openai/{TEST_MODEL}",
        data={
            CONF_MODEL: f"openai/{TEST_MODEL}",
            CONF_API_KEY: TEST_KEY,
            CONF_API_BASE: openai_server.api_base,
        },
        subentries_data=[
            ConfigSubentryData(
                data=DEFAULT_AGENT_OPTIONS,
                subentry_type=SUBENTRY_CONVERSATION,
                title="Test agent",
                unique_id=None,
            ),
            ConfigSubentryData(
                data=DEFAULT_AI_TASK_OPTIONS,
                subentry_type=SUBENTRY_AI_TASK,
                title="Test AI Task",
                unique_id=None,
            ),
        ],
    )
    entry.add_to_hass(hass)
    assert await async_setup_component(hass, "homeassistant", {})
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    return entry


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
    """A rate limit is the conversation agent's translated message; nothing is retried."""
    openai_server.add_error(429, "Rate limit reached")
    with pytest.raises(HomeAssistantError) as caught:
        await _generate(hass, ai_entry)
    assert caught.value.translation_key == "turn_rate_limit"
    # Home Assistant drops the final full stop of translated exception messages.
    assert str(caught.value) == _message("turn_rate_limit").rstrip(".")
    assert openai_server.request_count == 1


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
