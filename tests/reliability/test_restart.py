"""Restarts: Home Assistant stops in the middle of a turn and a new instance takes over.

The second Home Assistant runs on the same configuration directory (so the same
threads.db) with the same agent; the interrupted turn must be fully there or fully
gone, and the conversation must go on.
"""

from __future__ import annotations

import asyncio

import pytest
from pytest_homeassistant_custom_component.common import (
    MockConfigEntry,
    async_test_home_assistant,
)

from custom_components.langgraph_conversation.const import DOMAIN, SUBENTRY_CONVERSATION
from fakes import FakeOpenAIServer
from homeassistant import loader
from homeassistant.config_entries import ConfigSubentryData
from homeassistant.core import HomeAssistant
from homeassistant.setup import async_setup_component

from ..helpers import text_of
from .conftest import ask, assert_thread_consistent, pairs, speech, thread_messages

STORY = ("Once upon a time. " * 20).strip()
CONVERSATION = "kitchen-chat"


async def _second_instance_entry(hass: HomeAssistant, first: MockConfigEntry) -> MockConfigEntry:
    """The same entry and agent (same ids) in another Home Assistant."""
    hass.data.pop(loader.DATA_CUSTOM_COMPONENTS, None)  # find our integration again
    for component in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, component, {})
    subentry = next(iter(first.subentries.values()))
    entry = MockConfigEntry(
        domain=DOMAIN,
        entry_id=first.entry_id,
        title=first.title,
        data=dict(first.data),
        subentries_data=[
            ConfigSubentryData(
                data=dict(subentry.data),
                subentry_id=subentry.subentry_id,
                subentry_type=SUBENTRY_CONVERSATION,
                title=subentry.title,
                unique_id=None,
            )
        ],
    )
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    return entry


# The turn that Home Assistant's stop lets finish schedules Home Assistant's own chat
# session cleanup after the stopped instance cancelled its timers: that one timer stays.
@pytest.mark.parametrize("expected_lingering_timers", [True])
async def test_stopped_mid_turn_and_started_again(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The interrupted turn is whole or absent after the restart, and the talk goes on."""
    openai_server.add_text("Hi!")
    await ask(hass, setup_integration, "Hello", CONVERSATION)
    # About 1.8 s of streaming, within the 5 s that stopping gives running turns.
    openai_server.add_text(STORY, chunk_size=4, chunk_delay=0.02)
    turn = asyncio.create_task(ask(hass, setup_integration, "Tell me a story", CONVERSATION))
    await openai_server.wait_for_requests(2)
    await hass.async_stop()
    interrupted = await asyncio.gather(turn, return_exceptions=True)
    assert not isinstance(interrupted[0], BaseException), interrupted
    # One shutdown path: the answer streamed to its end before the model clients were
    # closed, in the one request it was given (no retry after a cut connection).
    assert speech(interrupted[0]) == STORY
    assert openai_server.request_count == 2

    async with async_test_home_assistant(config_dir=hass.config.config_dir) as restarted:
        entry = await _second_instance_entry(restarted, setup_integration)
        messages = await thread_messages(entry, CONVERSATION)
        assert_thread_consistent(messages)
        before = [("human", "Hello"), ("ai", "Hi!")]
        whole = [*before, ("human", "Tell me a story"), ("ai", STORY)]
        assert pairs(messages) in (before, whole)

        openai_server.add_text("Welcome back.")
        result = await ask(restarted, entry, "Are you there?", CONVERSATION)
        assert speech(result) == "Welcome back."
        seen = [text_of(m) for m in openai_server.requests[-1]["messages"][1:]]
        assert seen == [text for _, text in pairs(messages)] + ["Are you there?"]
        assert_thread_consistent(await thread_messages(entry, CONVERSATION))
        await restarted.async_stop()
