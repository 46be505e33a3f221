"""No blocking call on the event loop during setup and a full turn.

Runs in its own interpreter (marker `isolated`, see scripts/lib/run_leg.sh): LiteLLM does
its lazy imports on first use, so only a process where no other test has called LiteLLM
yet shows whether setup's warm-up really keeps them off the loop.
"""

from __future__ import annotations

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service

from homeassistant import block_async_io
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.setup import async_setup_component

from .conftest import agent_entity_id
from .fakes import FakeOpenAIServer, ToolCall
from .helpers import add_light, assist_tool_name

pytestmark = pytest.mark.isolated


async def test_setup_and_turns_do_not_block(
    hass: HomeAssistant,
    config_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    disable_block_async_io: None,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With Home Assistant's detector on, setup, a text turn and a tool turn run clean."""
    # Under pytest the detector skips file, import and SSL checks; we want all of them.
    monkeypatch.setattr(block_async_io, "_IN_TESTS", False)
    block_async_io.enable()
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

    reports = [r.getMessage() for r in caplog.records if "Detected blocking call" in r.getMessage()]
    assert reports == []
