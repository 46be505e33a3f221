"""Concurrency: turns racing on one conversation, many conversations at once, unload mid-turn."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.const import DOMAIN
from fakes import FakeOpenAIServer, Reply
from homeassistant.config_entries import ConfigEntryState
from homeassistant.core import HomeAssistant
from homeassistant.helpers import intent, issue_registry as ir

from ..helpers import BUSY_CONVERSATION_ANSWERED, text_of
from .conftest import (
    SENTENCES,
    ask,
    assert_responsive,
    assert_thread_consistent,
    pairs,
    speech,
    thread_messages,
)

STORY = ("A long answer. " * 20).strip()
CONVERSATIONS = 50
TURNS = 20


def _echo(request: Mapping[str, Any]) -> Reply:
    """Answer each request with its last user message, so every answer is traceable."""
    users = [m for m in request["messages"] if m["role"] == "user"]
    return Reply(text=f"Answer to {text_of(users[-1])}", chunk_size=8)


async def _reload(hass: HomeAssistant, entry: MockConfigEntry) -> None:
    """Close threads.db and open it again, so what follows reads the file."""
    assert await hass.config_entries.async_unload(entry.entry_id)
    await hass.async_block_till_done()
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()


async def test_two_turns_on_one_conversation_are_serialised(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Two messages sent at once on one conversation. Before 2026.11 the second waits its
    turn: one turn after the other, neither lost nor interleaved. From 2026.11 Home
    Assistant answers the second itself, clearly ("busy"), before the agent sees it; the
    first turn and the thread are untouched."""
    openai_server.add_text("Hi!")
    cid = (await ask(hass, setup_integration, "Hello")).conversation_id
    openai_server.responder = _echo
    # The first answer streams slowly, so the second message arrives in the middle of it.
    openai_server.add_text("A slow first answer.", chunk_size=2, chunk_delay=0.02)
    first = asyncio.create_task(ask(hass, setup_integration, "Question A", cid))
    await openai_server.wait_for_requests(2)
    second = asyncio.create_task(ask(hass, setup_integration, "Question B", cid))
    results = await asyncio.gather(first, second)

    if BUSY_CONVERSATION_ANSWERED:
        assert speech(results[0]) == "A slow first answer."
        busy = results[1].response
        assert busy.response_type is intent.IntentResponseType.ERROR
        assert "busy" in speech(results[1]).lower()
        assert results[1].conversation_id == cid
        # The second message never reached the model nor the thread.
        assert openai_server.request_count == 2
        messages = await thread_messages(setup_integration, cid)
        assert_thread_consistent(messages)
        assert pairs(messages) == [
            ("human", "Hello"),
            ("ai", "Hi!"),
            ("human", "Question A"),
            ("ai", "A slow first answer."),
        ]
        # The conversation is free again: the next message is answered as usual.
        after = await ask(hass, setup_integration, "Question B", cid)
        assert speech(after) == "Answer to Question B"
        return

    assert [speech(r) for r in results] == ["A slow first answer.", "Answer to Question B"]
    # The second turn's model call saw the whole first turn.
    seen = [text_of(m) for m in openai_server.requests[-1]["messages"][1:]]
    assert seen == ["Hello", "Hi!", "Question A", "A slow first answer.", "Question B"]
    messages = await thread_messages(setup_integration, cid)
    assert_thread_consistent(messages)
    assert pairs(messages) == [
        ("human", "Hello"),
        ("ai", "Hi!"),
        ("human", "Question A"),
        ("ai", "A slow first answer."),
        ("human", "Question B"),
        ("ai", "Answer to Question B"),
    ]


async def test_fifty_conversations_in_parallel(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    quiet_logs: None,
) -> None:
    """50 conversations x 20 turns at once: no error, every message in threads.db."""
    openai_server.responder = _echo

    async def talk(index: int) -> list[str]:
        problems = []
        for turn in range(TURNS):
            text = f"conversation {index} turn {turn}"
            result = await ask(hass, setup_integration, text, f"load-{index}")
            if speech(result) != f"Answer to {text}":
                problems.append(speech(result))
        return problems

    problems = await asyncio.gather(*(talk(i) for i in range(CONVERSATIONS)))
    assert [p for p in problems if p] == []
    assert openai_server.request_count == CONVERSATIONS * TURNS
    await assert_responsive(hass)

    await _reload(hass, setup_integration)
    for index in range(CONVERSATIONS):
        messages = await thread_messages(setup_integration, f"load-{index}")
        assert_thread_consistent(messages)
        expected = []
        for turn in range(TURNS):
            text = f"conversation {index} turn {turn}"
            expected += [("human", text), ("ai", f"Answer to {text}")]
        assert pairs(messages) == expected


async def test_unload_while_turns_run(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Unloading mid-turn lets turns finish or cancels them; threads hold whole turns."""
    entry = setup_integration
    streaming = 4
    # Four answers stream for about a second; one model never starts answering.
    openai_server.add_text("never", first_byte_delay=60)
    for _ in range(streaming):
        openai_server.add_text(STORY, chunk_size=5, chunk_delay=0.02)
    turns = [asyncio.create_task(ask(hass, entry, "Tell me a story 0", "unload-0"))]
    await openai_server.wait_for_requests(1)
    turns += [
        asyncio.create_task(ask(hass, entry, f"Tell me a story {i}", f"unload-{i}"))
        for i in range(1, streaming + 1)
    ]
    await openai_server.wait_for_requests(streaming + 1)
    assert await hass.config_entries.async_unload(entry.entry_id)
    assert entry.state is ConfigEntryState.NOT_LOADED
    results = await asyncio.gather(*turns, return_exceptions=True)
    await hass.async_block_till_done()

    assert not [r for r in results if isinstance(r, BaseException)], results
    # The hanging turn was cancelled and its user told; the others finished.
    assert results[0].response.response_type == intent.IntentResponseType.ERROR
    assert speech(results[0]) == SENTENCES["unloading"].rstrip(".")
    assert [speech(r) for r in results[1:]] == [STORY] * streaming
    # Unloading is not a broken file.
    assert ir.async_get(hass).async_get_issue(DOMAIN, "threads_unavailable") is None
    await assert_responsive(hass)

    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    for i in range(streaming + 1):
        messages = await thread_messages(entry, f"unload-{i}")
        assert_thread_consistent(messages)
        expected = [] if i == 0 else [("human", f"Tell me a story {i}"), ("ai", STORY)]
        assert pairs(messages) == expected
    openai_server.add_text("Still here.")
    again = await ask(hass, entry, "Are you there?", "unload-0")
    assert speech(again) == "Still here."
