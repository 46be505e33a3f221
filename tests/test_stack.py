"""The entry's stack (the agent's libraries, LiteLLM's first-call warm-up, the storage and
the runtime) is built in the background once Home Assistant has started; a turn that
arrives earlier starts that same build and waits for it (stack.py)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.config_flow import DEFAULT_AI_TASK_OPTIONS
from custom_components.langgraph_conversation.const import (
    CONF_CHECKPOINTS_KEPT,
    DOMAIN,
    SUBENTRY_AI_TASK,
)
from custom_components.langgraph_conversation.persistence import DATA_STORAGE
from fakes import FakeOpenAIServer
from homeassistant.components import ai_task, conversation
from homeassistant.config_entries import ConfigEntryState, ConfigSubentryData
from homeassistant.const import EVENT_HOMEASSISTANT_STARTED
from homeassistant.core import Context, CoreState, HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import entity_registry as er, intent
from homeassistant.setup import async_setup_component

from .conftest import TEST_KEY, _test_entry, add_test_entry, agent_entity_id


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
    stack = config_entry.runtime_data
    assert not stack.started
    assert not stack.built
    # Nothing opened yet: the storage is the stack's.
    assert DATA_STORAGE not in hass.data

    hass.set_state(CoreState.running)
    hass.bus.async_fire(EVENT_HOMEASSISTANT_STARTED)
    await hass.async_block_till_done()
    assert stack.started
    assert stack.built
    assert DATA_STORAGE in hass.data
    task = stack.start()
    assert task.done()
    assert task.result() is stack.runtime
    assert stack.start() is task  # one build, never a second


async def test_a_turn_before_the_start_waits_for_the_warm_up_and_answers(
    hass: HomeAssistant, config_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The turn starts the build itself, waits for it, and is answered; Home Assistant's
    start later runs no second one."""
    await _set_up_while_starting(hass, config_entry)
    stack = config_entry.runtime_data
    assert not stack.started
    openai_server.add_text("Early but answered.")

    result = await conversation.async_converse(
        hass, "Are you there?", None, Context(), agent_id=agent_entity_id(hass, config_entry)
    )

    assert result.response.response_type == intent.IntentResponseType.ACTION_DONE
    assert result.response.speech["plain"]["speech"] == "Early but answered."
    assert openai_server.request_count == 1
    assert stack.built
    task = stack.start()
    hass.set_state(CoreState.running)
    hass.bus.async_fire(EVENT_HOMEASSISTANT_STARTED)
    await hass.async_block_till_done()
    assert stack.start() is task


async def test_unload_during_the_warm_up_leaves_no_task(
    hass: HomeAssistant, config_entry: MockConfigEntry
) -> None:
    """An entry unloaded while its build runs takes the build's task along, and whatever
    the build had opened is closed."""
    await _set_up_while_starting(hass, config_entry)
    stack = config_entry.runtime_data
    task = stack.start()

    assert await hass.config_entries.async_unload(config_entry.entry_id)
    await hass.async_block_till_done()

    assert task.done()
    assert not stack.built
    # The only entry: the shared storage it may have opened is closed and forgotten.
    assert DATA_STORAGE not in hass.data
    # Home Assistant's start after the unload builds nothing for the unloaded entry.
    hass.set_state(CoreState.running)
    hass.bus.async_fire(EVENT_HOMEASSISTANT_STARTED)
    await hass.async_block_till_done()
    assert not stack.built
    assert DATA_STORAGE not in hass.data


async def test_a_stop_during_the_build_waits_for_its_imports_to_end(
    hass: HomeAssistant, config_entry: MockConfigEntry
) -> None:
    """Home Assistant stopped right after its start, with the build started: the stop
    ends cleanly with nothing built or left open, and no thread left running (the test's
    teardown checks). Home Assistant's stop cancels the executor futures it tracks, so
    the stack waits for the loading thread through an event the thread sets itself; here
    the load (its modules long imported) may well end before the stop reaches it, so this
    does not reproduce that race, only the stop path around it."""
    await _set_up_while_starting(hass, config_entry)
    stack = config_entry.runtime_data
    hass.set_state(CoreState.running)
    hass.bus.async_fire(EVENT_HOMEASSISTANT_STARTED)
    await asyncio.sleep(0)
    assert stack.started
    assert not stack.built

    await hass.async_stop()

    assert not stack.built
    # On a busy machine the build may have opened the shared storage before the stop
    # reached it: then the stop closed it (Home Assistant unloads no entry at its stop,
    # so the closed storage stays registered).
    shared = hass.data.get(DATA_STORAGE)
    assert shared is None or (shared.backend is None and shared.healing is None)


# What a turn hears when the entry's stack could not be built (Home Assistant's English
# message drops the final full stop).
STACK_FAILED = (
    "LangGraph Conversation could not start. See the log for the cause, or reload the integration"
)


async def test_a_task_of_a_failed_build_hears_the_same_sentence(
    hass: HomeAssistant, openai_server: FakeOpenAIServer
) -> None:
    """An AI task of an entry whose build failed is refused with the sentence a turn
    hears, which names the integration (a task is no conversation agent); no model call."""
    task = ConfigSubentryData(
        data=DEFAULT_AI_TASK_OPTIONS,
        subentry_type=SUBENTRY_AI_TASK,
        title="Broken task",
        unique_id=None,
    )
    entry = _test_entry(openai_server.api_base, [task], {CONF_CHECKPOINTS_KEPT: "lots"})
    entry.add_to_hass(hass)
    for domain in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, domain, {})
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    entity_id = er.async_get(hass).async_get_entity_id(
        "ai_task", DOMAIN, next(iter(entry.subentries))
    )
    assert entity_id is not None

    with pytest.raises(HomeAssistantError) as caught:
        await ai_task.async_generate_data(
            hass, task_name="Test task", entity_id=entity_id, instructions="Do the task."
        )
    assert caught.value.translation_key == "stack_failed"
    assert str(caught.value) == STACK_FAILED
    assert openai_server.request_count == 0


def _build_failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("Building the agent for")]


async def test_a_failed_build_is_said_as_such_and_the_next_turn_tries_again(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    agent_options: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An entry whose stored options a hand edit broke (no number of checkpoints): the
    entry loads, its build fails for real (the shared storage cannot take its settings),
    and a turn is told the agent could not start, in a sentence of its own; the log says
    why, without the key. Each turn tries the build again; reloading with good options
    answers."""
    entry = add_test_entry(
        hass, openai_server.api_base, agent_options, options={CONF_CHECKPOINTS_KEPT: "lots"}
    )
    for domain in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, domain, {})
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    assert entry.state is ConfigEntryState.LOADED
    stack = entry.runtime_data
    # Home Assistant runs: the build ran at once, and failed.
    assert stack.started
    assert not stack.built
    assert len(_build_failures(caplog)) == 1
    agent = agent_entity_id(hass, entry)

    for attempt in (2, 3):
        result = await conversation.async_converse(
            hass, "Are you there?", None, Context(), agent_id=agent
        )
        assert result.response.response_type == intent.IntentResponseType.ERROR
        assert result.response.speech["plain"]["speech"] == STACK_FAILED
        # The turn built again (and logged again): a failed build is not kept.
        assert len(_build_failures(caplog)) == attempt
    assert openai_server.request_count == 0
    failure = _build_failures(caplog)[-1]
    assert failure.exc_info is not None
    assert "lots" in caplog.text
    assert TEST_KEY not in caplog.text

    # The sentence's advice: with the options mended, the reloaded entry answers.
    openai_server.add_text("Up again.")
    hass.config_entries.async_update_entry(entry, options={CONF_CHECKPOINTS_KEPT: 5})
    await hass.async_block_till_done()
    result = await conversation.async_converse(
        hass, "Are you there?", None, Context(), agent_id=agent
    )
    assert result.response.speech["plain"]["speech"] == "Up again."
    assert entry.runtime_data.built
