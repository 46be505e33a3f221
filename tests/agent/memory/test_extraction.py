"""Memory extraction: after the answer, lasting facts the person told are saved."""

from __future__ import annotations

import logging

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.agent.memory.extraction import (
    EXTRACTION_INSTRUCTIONS,
    MAX_FACTS_PER_TURN,
    parse_facts,
)
from custom_components.langgraph_conversation.agent.memory.memories import MAX_MEMORY_CHARS
from custom_components.langgraph_conversation.const import CONF_LEARN_MEMORIES
from fakes import FakeOpenAIServer
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant

from ...conftest import agent_entity_id
from ...helpers import messages_of, prompt_text, text_of

LEARN = {CONF_LEARN_MEMORIES: True}


async def _ask(
    hass: HomeAssistant, entry: MockConfigEntry, text: str, user_id: str | None
) -> conversation.ConversationResult:
    result = await conversation.async_converse(
        hass, text, None, Context(user_id=user_id), agent_id=agent_entity_id(hass, entry)
    )
    # Extraction runs after the answer, in the background.
    await entry.runtime_data.runtime.wait_background()
    return result


def _system(request: dict) -> str:
    return prompt_text(request)


def test_parse_facts_takes_a_json_array_of_sentences_only() -> None:
    """Fenced arrays are read; anything else, too long or repeated is dropped."""
    assert parse_facts('```json\n["Likes tea.", "Has a cat named Io."]\n```') == [
        "Likes tea.",
        "Has a cat named Io.",
    ]
    assert parse_facts("[]") == []
    assert parse_facts("Nothing to remember.") == []
    assert parse_facts('{"facts": "no array"}') == []
    assert parse_facts("[not json]") == []
    assert parse_facts('["  spaced   out  ", 3, null, "spaced out"]') == ["spaced out"]
    assert parse_facts(f'["{"x" * (MAX_MEMORY_CHARS + 1)}"]') == []
    many = [f"Fact {n}." for n in range(10)]
    assert parse_facts(str(many).replace("'", '"')) == many[:MAX_FACTS_PER_TURN]


@pytest.mark.parametrize("agent_overrides", [LEARN])
async def test_facts_the_person_told_are_learned_and_recalled(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The answer comes first; then one extra call saves the fact in the person's memory."""
    ada = (await hass.auth.async_create_user("Ada")).id
    bob = (await hass.auth.async_create_user("Bob")).id
    openai_server.add_text("Noted, black it is.")
    openai_server.add_text('["Ada takes her coffee black."]')
    result = await _ask(hass, setup_integration, "I always take my coffee black.", ada)
    assert result.response.speech["plain"]["speech"] == "Noted, black it is."

    assert openai_server.request_count == 2
    extraction = openai_server.requests[1]
    assert _system(extraction) == EXTRACTION_INSTRUCTIONS
    assert "tools" not in extraction
    said = text_of(messages_of(extraction, "user")[0])
    assert '"I always take my coffee black."' in said
    assert '"Noted, black it is."' in said

    openai_server.add_text("Black.")
    openai_server.add_text("[]")
    await _ask(hass, setup_integration, "How do I take my coffee?", ada)
    assert "Ada takes her coffee black." in _system(openai_server.requests[2])
    # Known memories are shown to the extraction, so it does not save them twice.
    assert "Ada takes her coffee black." in text_of(
        messages_of(openai_server.requests[3], "user")[0]
    )

    # Learned memories are the person's own: Bob's turn never sees them.
    openai_server.add_text("I don't know.")
    openai_server.add_text("[]")
    await _ask(hass, setup_integration, "How do I take my coffee?", bob)
    assert "coffee black" not in _system(openai_server.requests[4])

    listed = await hass.services.async_call(
        "langgraph_conversation",
        "list_memories",
        {},
        blocking=True,
        return_response=True,
        context=Context(user_id=ada),
    )
    assert [m["text"] for m in listed["memories"]] == ["Ada takes her coffee black."]


async def test_nothing_is_learned_unless_the_agent_enables_it(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Off by default: one model call per turn, as before."""
    openai_server.add_text("Noted.")
    await _ask(hass, setup_integration, "My name is Ada.", None)
    assert openai_server.request_count == 1


@pytest.mark.parametrize("agent_overrides", [LEARN])
async def test_a_failing_extraction_costs_nothing_but_the_memory(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A provider error after the answer is one warning; the next turn works normally."""
    openai_server.add_text("Noted.")
    openai_server.add_error(500, "extraction exploded")
    with caplog.at_level(logging.WARNING):
        result = await _ask(hass, setup_integration, "My name is Ada.", None)
    assert result.response.speech["plain"]["speech"] == "Noted."
    warnings = [r for r in caplog.records if "Could not learn memories" in r.getMessage()]
    assert len(warnings) == 1
    assert "extraction exploded" not in warnings[0].getMessage()

    openai_server.add_text("Hello again.")
    openai_server.add_text("[]")
    again = await _ask(hass, setup_integration, "Hello", None)
    assert again.response.speech["plain"]["speech"] == "Hello again."
    assert "Facts you saved earlier" not in _system(openai_server.requests[-2])
