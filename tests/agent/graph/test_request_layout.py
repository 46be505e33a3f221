"""The request layout keeps provider caches warm: a follow-up begins with exactly what the
previous request sent (system message, tools, history), byte for byte, as the fake
server received it; only new messages follow. The volatile parts (clock, place, recalled
memories) are in the turn's context note after the history, never in the system message.
"""

from __future__ import annotations

from itertools import pairwise
import json
from typing import Any

from freezegun.api import FrozenDateTimeFactory
import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_capture_events

from custom_components.langgraph_conversation.agent.graph.prompts import NOTE_HEADER
from custom_components.langgraph_conversation.const import CONF_LLM_HASS_API, EVENT_ACTIVITY
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.conversation.trace import async_get_traces
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import llm

from ...conftest import agent_entity_id
from ...helpers import messages_of, text_of


def _wire(value: Any) -> str:
    """A part of a request as it was sent (key order kept): the bytes a cache compares."""
    return json.dumps(value, ensure_ascii=False)


def assert_prefix_kept(requests: list[dict[str, Any]]) -> None:
    """Every request starts with the previous one's tools and messages, unchanged."""
    for number, (before, after) in enumerate(pairwise(requests), 1):
        assert _wire(after.get("tools")) == _wire(before.get("tools")), number
        sent = before["messages"]
        assert len(after["messages"]) > len(sent), number
        assert _wire(after["messages"][: len(sent)]) == _wire(sent), number


async def _converse(
    hass: HomeAssistant, entry: MockConfigEntry, text: str, conversation_id: str | None
) -> str:
    result = await conversation.async_converse(
        hass, text, conversation_id, Context(), agent_id=agent_entity_id(hass, entry)
    )
    assert result.response.response_type.value == "action_done", result.response.speech
    return result.conversation_id


async def _five_turns(
    hass: HomeAssistant,
    entry: MockConfigEntry,
    server: FakeOpenAIServer,
    questions: list[str],
    freezer: FrozenDateTimeFactory | None = None,
) -> None:
    conversation_id = None
    for question in questions:
        if freezer is not None:
            freezer.tick(61)
        conversation_id = await _converse(hass, entry, question, conversation_id)


QUESTIONS = [
    "Hello there",
    "What can you do?",
    "Tell me a joke",
    "Another one",
    "Thanks, bye",
]


async def test_plain_follow_ups_keep_the_prefix(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Five plain turns: each request is the previous one plus the new messages."""
    for number in range(5):
        openai_server.add_text(f"Answer {number}.")
    await _five_turns(hass, setup_integration, openai_server, QUESTIONS)
    assert openai_server.request_count == 5
    assert_prefix_kept(openai_server.requests)


async def test_cached_input_tokens_are_reported(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """What the provider says it read from its prompt cache reaches the activity event
    and the trace's token stats."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    openai_server.add_text("One.", prompt_tokens=100_000)
    openai_server.add_text("Two.", prompt_tokens=100_000)
    await _five_turns(hass, setup_integration, openai_server, QUESTIONS[:2])
    await hass.async_block_till_done()
    ends = [e.data for e in events if e.data["type"] == "turn_end"]
    first, second = (openai_server.cached_tokens(r) for r in openai_server.requests)
    assert first == 0
    assert second > 0
    assert [end["cached_input_tokens"] for end in ends] == [first, second]
    trace = async_get_traces()[-1].as_dict()
    stats = [e["data"]["stats"] for e in trace["events"] if "stats" in (e["data"] or {})]
    assert stats[-1]["cached_input_tokens"] == second


async def test_tool_rounds_keep_the_prefix(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Turns with a tool round: the second request of a round and the next turn's first
    request both begin with everything sent before."""
    hass.states.async_set("light.kitchen", "off", {"friendly_name": "Kitchen light"})
    for number in range(5):
        openai_server.add_tool_calls(
            [ToolCall("memory", {"action": "remember", "text": f"Fact {number}"})]
        )
        openai_server.add_text(f"Saved {number}.")
    await _five_turns(hass, setup_integration, openai_server, QUESTIONS)
    assert openai_server.request_count == 10
    assert_prefix_kept(openai_server.requests)
    assert messages_of(openai_server.requests[-1], "tool")


@pytest.mark.parametrize("agent_overrides", [{CONF_LLM_HASS_API: []}])
async def test_the_clock_goes_into_the_note_not_the_system_message(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    freezer: FrozenDateTimeFactory,
) -> None:
    """Without a date/time tool Home Assistant puts the clock into its prompt; a minute
    later the clock differs, the system message does not, and the prefix is kept."""
    freezer.move_to("2026-12-03 07:00:00+00:00")
    for number in range(5):
        openai_server.add_text(f"Answer {number}.")
    await _five_turns(hass, setup_integration, openai_server, QUESTIONS, freezer)
    assert_prefix_kept(openai_server.requests)
    systems = {text_of(messages_of(r, "system")[0]) for r in openai_server.requests}
    assert len(systems) == 1
    assert "Current time is" not in systems.pop()
    notes = [_note(r) for r in openai_server.requests]
    assert all("Current time is" in note for note in notes)
    assert len(set(notes)) == 5
    # Home Assistant's own line, as its template renders it, is what moved.
    assert llm.DATE_TIME_PROMPT.startswith("Current time is {{")


async def test_recalled_memories_keep_the_prefix(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Saved memories recalled differently each turn: they are in each turn's note, the
    system message stays the same and the prefix is kept."""
    store = setup_integration.runtime_data.runtime.store
    facts = {
        "m1": "Anna drinks green tea in the morning",
        "m2": "The bins go out on Tuesday evening",
        "m3": "Grandma visits every Sunday for lunch",
    }
    for key, text in facts.items():
        await store.aput(("memories", "household"), key, {"text": text})
    questions = [
        "What does Anna drink in the morning?",
        "When do the bins go out?",
        "Who visits on Sunday?",
        "Is the light on?",
        "What about Anna's tea?",
    ]
    for number in range(5):
        openai_server.add_text(f"Answer {number}.")
    await _five_turns(hass, setup_integration, openai_server, questions)
    assert_prefix_kept(openai_server.requests)
    systems = {text_of(messages_of(r, "system")[0]) for r in openai_server.requests}
    assert len(systems) == 1
    assert "<memories>\n" not in systems.pop()
    notes = [_note(request) for request in openai_server.requests]
    assert facts["m1"] in notes[0]
    assert facts["m2"] in notes[1]
    assert facts["m3"] in notes[2]
    # Nothing worth recalling ("light" matches no memory; "is", "the", "on" are not
    # searched for): no memories in the note.
    assert "<memories>" not in notes[3]
    # The fifth question recalls m1 again: the first turn's note, sent in the same
    # request, shows it already, so it is not repeated (each fact once per request).
    last = json.dumps(openai_server.requests[4]["messages"])
    assert last.count(facts["m1"]) == 1
    assert facts["m2"] not in notes[4]


def _note(request: dict[str, Any]) -> str:
    """The context note right before the request's last user message ("" if none)."""
    users = [text_of(m) for m in messages_of(request, "user")]
    return users[-2] if len(users) > 1 and users[-2].startswith(NOTE_HEADER) else ""
