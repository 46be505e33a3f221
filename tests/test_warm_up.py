"""LiteLLM's first-call warm-up runs in the background once Home Assistant has started; a
turn that arrives earlier starts that same warm-up and waits for it (warm_up.py)."""

from __future__ import annotations

from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.warm_up import warm_up_of
from fakes import FakeOpenAIServer
from homeassistant.components import conversation
from homeassistant.config_entries import ConfigEntryState
from homeassistant.const import EVENT_HOMEASSISTANT_STARTED
from homeassistant.core import Context, CoreState, HomeAssistant
from homeassistant.helpers import intent
from homeassistant.setup import async_setup_component

from .conftest import agent_entity_id


async def _set_up_while_starting(hass: HomeAssistant, entry: MockConfigEntry) -> None:
    """Our entry set up as at Home Assistant's start: before it has started."""
    hass.set_state(CoreState.starting)
    for domain in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, domain, {})
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()


async def test_setup_leaves_the_warm_up_until_home_assistant_has_started(
    hass: HomeAssistant, config_entry: MockConfigEntry
) -> None:
    """The entry is loaded (its agent exists) with no warm-up run; the start runs it once."""
    await _set_up_while_starting(hass, config_entry)
    assert config_entry.state is ConfigEntryState.LOADED
    assert hass.states.get(agent_entity_id(hass, config_entry)) is not None
    stack = warm_up_of(hass, config_entry)
    assert stack is not None
    assert not stack.started

    hass.set_state(CoreState.running)
    hass.bus.async_fire(EVENT_HOMEASSISTANT_STARTED)
    await hass.async_block_till_done()
    assert stack.started
    task = stack.start()
    await stack.wait()
    assert stack.done
    assert task.exception() is None
    assert stack.start() is task  # one warm-up, never a second


async def test_a_turn_before_the_start_waits_for_the_warm_up_and_answers(
    hass: HomeAssistant, config_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The turn starts the warm-up itself, waits for it, and is answered; Home Assistant's
    start later runs no second one."""
    await _set_up_while_starting(hass, config_entry)
    stack = warm_up_of(hass, config_entry)
    assert stack is not None
    assert not stack.started
    openai_server.add_text("Early but answered.")

    result = await conversation.async_converse(
        hass, "Are you there?", None, Context(), agent_id=agent_entity_id(hass, config_entry)
    )

    assert result.response.response_type == intent.IntentResponseType.ACTION_DONE
    assert result.response.speech["plain"]["speech"] == "Early but answered."
    assert openai_server.request_count == 1
    assert stack.done
    task = stack.start()
    hass.set_state(CoreState.running)
    hass.bus.async_fire(EVENT_HOMEASSISTANT_STARTED)
    await hass.async_block_till_done()
    assert stack.start() is task


async def test_unload_during_the_warm_up_leaves_no_task(
    hass: HomeAssistant, config_entry: MockConfigEntry
) -> None:
    """An entry unloaded while its warm-up runs takes the warm-up's task along."""
    await _set_up_while_starting(hass, config_entry)
    stack = warm_up_of(hass, config_entry)
    assert stack is not None
    task = stack.start()

    assert await hass.config_entries.async_unload(config_entry.entry_id)
    await hass.async_block_till_done()

    assert task.done()
    assert warm_up_of(hass, config_entry) is None
    # Home Assistant's start after the unload starts nothing for the unloaded entry.
    hass.set_state(CoreState.running)
    hass.bus.async_fire(EVENT_HOMEASSISTANT_STARTED)
    await hass.async_block_till_done()
    assert stack.start() is task
