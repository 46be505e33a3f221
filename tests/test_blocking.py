"""No blocking call on the event loop at the first of everything: the first config-flow
check, setup, a text and a tool turn, the first embedding, the first image.

Each test runs in an interpreter of its own (marker `isolated`, see scripts/lib/run_leg.sh):
LiteLLM and the provider SDKs import lazily on first use, so only a process where nothing
has called them yet shows whether the warm-ups really keep those imports off the loop.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service

from custom_components.langgraph_conversation.const import (
    CONF_API_BASE,
    CONF_API_KEY,
    CONF_EMBEDDING_MODEL,
    CONF_IMAGE_MODEL,
    CONF_MODEL,
    DOMAIN,
)
from fakes import FakeGeminiServer, FakeOllamaServer, FakeOpenAIServer, ToolCall, png_image
from homeassistant import block_async_io, config_entries
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.setup import async_setup_component

from .conftest import TEST_KEY, TEST_MODEL, agent_entity_id, set_up_task_entry
from .helpers import add_light, assist_tool_name, setup_ollama_entry

pytestmark = pytest.mark.isolated


@pytest.fixture
def strict_detector(disable_block_async_io: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Home Assistant's blocking-call detector with every check on (under pytest it
    skips file, import and SSL checks)."""
    monkeypatch.setattr(block_async_io, "_IN_TESTS", False)
    block_async_io.enable()


def _blocking_reports(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "Detected blocking call" in r.getMessage()]


async def _start_setup_flow(hass: HomeAssistant, data: dict[str, str]) -> None:
    """Add the integration as a person does: the first thing the process does with it."""
    assert await async_setup_component(hass, "homeassistant", {})
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    result = await hass.config_entries.flow.async_configure(result["flow_id"], data)
    assert result["type"] is FlowResultType.CREATE_ENTRY, result


async def test_first_config_flow_check_does_not_block(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    strict_detector: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The setup form's one real request, in a process that never called LiteLLM."""
    openai_server.add_text("OK")
    await _start_setup_flow(
        hass,
        {
            CONF_MODEL: f"openai/{TEST_MODEL}",
            CONF_API_KEY: TEST_KEY,
            CONF_API_BASE: openai_server.api_base,
        },
    )
    assert openai_server.request_count >= 1
    assert _blocking_reports(caplog) == []


async def test_first_ollama_config_flow_check_does_not_block(
    hass: HomeAssistant,
    ollama_server: FakeOllamaServer,
    strict_detector: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The same for Ollama's native API, whose LiteLLM modules are others."""
    ollama_server.add_text("OK")
    await _start_setup_flow(
        hass, {CONF_MODEL: "ollama_chat/llama3.2", CONF_API_BASE: ollama_server.base_url}
    )
    assert ollama_server.request_count >= 1
    assert _blocking_reports(caplog) == []


async def test_first_embedding_does_not_block(
    hass: HomeAssistant,
    config_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    strict_detector: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An entry with an embedding model: a memory saved and recalled by meaning, each
    embedded for the first time in this process."""
    hass.config_entries.async_update_entry(
        config_entry, options={**config_entry.options, CONF_EMBEDDING_MODEL: "openai/embed-test"}
    )
    assert await async_setup_component(hass, "homeassistant", {})
    assert await async_setup_component(hass, "conversation", {})
    assert await hass.config_entries.async_setup(config_entry.entry_id)
    await hass.async_block_till_done()
    agent_id = agent_entity_id(hass, config_entry)

    openai_server.add_tool_calls(
        [ToolCall("memory", {"action": "remember", "text": "Ada cycles to work"})]
    )
    openai_server.add_text("Noted.")
    await conversation.async_converse(
        hass, "Remember that Ada cycles to work", None, Context(), agent_id=agent_id
    )
    openai_server.add_text("By bike.")
    await conversation.async_converse(
        hass, "How does Ada commute to work?", None, Context(), agent_id=agent_id
    )
    await hass.async_block_till_done(wait_background_tasks=True)
    assert openai_server.embedding_requests, "nothing was embedded"
    assert _blocking_reports(caplog) == []


async def test_setup_and_turns_do_not_block(
    hass: HomeAssistant,
    config_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    strict_detector: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With Home Assistant's detector on, setup, a text turn and a tool turn run clean."""
    assert await async_setup_component(hass, "homeassistant", {})
    assert await async_setup_component(hass, "conversation", {})
    assert await async_setup_component(hass, "intent", {})
    assert await hass.config_entries.async_setup(config_entry.entry_id)
    await hass.async_block_till_done()
    agent_id = agent_entity_id(hass, config_entry)

    openai_server.add_text("Hello there.")
    result = await conversation.async_converse(hass, "Hi", None, Context(), agent_id=agent_id)
    assert result.response.speech["plain"]["speech"] == "Hello there."

    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    async_mock_service(hass, "light", "turn_on")
    openai_server.add_tool_calls(
        [ToolCall(await assist_tool_name(hass, "HassTurnOn"), {"name": "Kitchen Light"})]
    )
    openai_server.add_text("Done.")
    await conversation.async_converse(
        hass, "Kitchen on", result.conversation_id, Context(), agent_id=agent_id
    )
    openai_server.add_error(500, "one failure path too")
    await conversation.async_converse(
        hass, "Again", result.conversation_id, Context(), agent_id=agent_id
    )

    assert _blocking_reports(caplog) == []


async def test_ollama_setup_and_turns_do_not_block(
    hass: HomeAssistant,
    ollama_server: FakeOllamaServer,
    strict_detector: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The same for an Ollama entry, whose warm-up leaves the OpenAI SDK's resources and
    the other providers' LiteLLM configs out (issue #29): its turns need none of them."""
    assert await async_setup_component(hass, "homeassistant", {})
    assert await async_setup_component(hass, "conversation", {})
    assert await async_setup_component(hass, "intent", {})
    entry = await setup_ollama_entry(hass, ollama_server)
    agent_id = agent_entity_id(hass, entry)

    ollama_server.add_text("Hello there.")
    result = await conversation.async_converse(hass, "Hi", None, Context(), agent_id=agent_id)
    assert result.response.speech["plain"]["speech"] == "Hello there."

    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    calls = async_mock_service(hass, "light", "turn_on")
    ollama_server.add_tool_calls(
        [ToolCall(await assist_tool_name(hass, "HassTurnOn"), {"name": "Kitchen Light"})]
    )
    ollama_server.add_text("Done.")
    await conversation.async_converse(
        hass, "Kitchen on", result.conversation_id, Context(), agent_id=agent_id
    )
    assert len(calls) == 1
    ollama_server.add_error(500, "one failure path too")
    await conversation.async_converse(
        hass, "Again", result.conversation_id, Context(), agent_id=agent_id
    )

    assert _blocking_reports(caplog) == []


@pytest.mark.parametrize(
    ("image_model", "server_kind"),
    [("openai/gpt-image-1", "openai"), ("gemini/imagen-4.0-generate-001", "gemini")],
)
async def test_first_image_does_not_block(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    strict_detector: None,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    image_model: str,
    server_kind: str,
) -> None:
    """The first ai_task.generate_image of the process (LiteLLM's image modules, the OpenAI
    SDK's images resource, Google's format), stored by Home Assistant."""
    media = tmp_path / "media"
    media.mkdir()
    hass.config.media_dirs = {"local": str(media)}
    async with FakeGeminiServer() as gemini:
        image_section = {CONF_MODEL: image_model}
        if server_kind == "gemini":
            image_section |= {CONF_API_KEY: "gm-key", CONF_API_BASE: gemini.api_base}
            gemini.images.add_image(png_image(32, 32))
        else:
            openai_server.images.add_image(png_image(32, 32))
        entry = await set_up_task_entry(
            hass,
            openai_server.api_base,
            {CONF_IMAGE_MODEL: image_section},
            with_agent=False,
            task_title="Pictures",
        )
        response = await hass.services.async_call(
            "ai_task",
            "generate_image",
            {"task_name": "Pictures", "entity_id": "ai_task.pictures", "instructions": "A cat."},
            blocking=True,
            return_response=True,
        )
        assert response is not None
        assert response["width"] == 32
        await hass.async_block_till_done(wait_background_tasks=True)
        assert await hass.config_entries.async_unload(entry.entry_id)
    assert _blocking_reports(caplog) == []
