"""Diagnostics never contain the API key or the instructions' text."""

from __future__ import annotations

import json
import re

from pytest_homeassistant_custom_component.common import MockConfigEntry
from pytest_homeassistant_custom_component.components.diagnostics import (
    get_diagnostics_for_config_entry,
)
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

from homeassistant.core import HomeAssistant
from homeassistant.setup import async_setup_component

from .conftest import TEST_KEY


async def test_diagnostics_are_redacted(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    hass_client: ClientSessionGenerator,
) -> None:
    """The key is redacted, the prompt reduced to its length, versions reported."""
    assert await async_setup_component(hass, "diagnostics", {})
    diagnostics = await get_diagnostics_for_config_entry(hass, hass_client, setup_integration)
    dumped = json.dumps(diagnostics)
    assert TEST_KEY not in dumped
    assert diagnostics["entry"]["data"]["api_key"] == "**REDACTED**"
    assert diagnostics["packages"]["litellm"] == "1.83.0"
    prompt = diagnostics["agents"][0]["options"]["prompt"]
    assert re.fullmatch(r"<\d+ characters>", prompt)
    storage = diagnostics["storage"]
    assert storage["threads"]["schema_version"] == 2
    assert storage["memory"]["schema_version"] == 2
    assert {"threads", "checkpoints"} <= set(storage["threads"])
    assert "items" in storage["memory"]
