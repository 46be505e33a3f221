"""Odd text: invalid Unicode at every entrance, and user ids that cannot own memories.

A lone surrogate (U+D800-U+DFFF on its own) can arrive in a request, a model's tool
arguments, an entity's name or a service call; no UTF-8 encoder accepts it, so it used to
turn into a "server error" after a pointless retry, or a "broken memory file". Each
entrance now cleans it: pairs are joined, lone ones become U+FFFD. The generated strings
below carry their expected cleaned form, built piece by piece (not by the code under test).
"""

from __future__ import annotations

import json
import random

from langchain_core.messages import HumanMessage
import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.const import CONF_LLM_HASS_API, DOMAIN
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import ServiceValidationError
from homeassistant.helpers import intent

from ..helpers import messages_of, prompt_text, text_of
from .conftest import ask, assert_responsive, assert_thread_consistent, speech, thread_messages

REPLACEMENT = "\ufffd"
# (raw piece, what it becomes); lone high surrogates are never followed directly by a
# low one (they would pair), except in the deliberate pair.
_LONE_HIGH = [("\ud800", REPLACEMENT), ("\udbff", REPLACEMENT), ("\ud83d", REPLACEMENT)]
_LONE_LOW = [("\udc00", REPLACEMENT), ("\udfff", REPLACEMENT), ("\ude00", REPLACEMENT)]
_PAIR = [("\ud83d\ude00", "😀"), ("\ud83c\udfe0", "🏠")]
_PLAIN = [("hello", "hello"), (" ", " "), ("Küche", "Küche"), ("🔥", "🔥"), ("light", "light")]


def odd_strings(count: int, seed: int) -> list[tuple[str, str]]:
    """`count` strings with at least one lone surrogate each, and their cleaned form."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        raw, clean = [], []
        for position in range(rng.randint(2, 7)):
            kind = rng.choice(
                [_LONE_HIGH, _LONE_LOW, _PAIR, _PLAIN, _PLAIN] if position else [_LONE_HIGH]
            )
            piece, expected = rng.choice(kind)
            if raw and raw[-1] in {p for p, _ in _LONE_HIGH} and kind is _LONE_LOW:
                raw.append("-")
                clean.append("-")
            raw.append(piece)
            clean.append(expected)
        cases.append(("".join(raw) + " hello", "".join(clean) + " hello"))
    return cases


REQUESTS = odd_strings(8, seed=1)
FACTS = odd_strings(6, seed=2)
NAMES = odd_strings(4, seed=3)


def _assert_valid_unicode(text: str) -> None:
    text.encode("utf-8")  # raises on a lone surrogate


@pytest.mark.parametrize(("text", "cleaned"), REQUESTS)
async def test_request_with_lone_surrogates(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    text: str,
    cleaned: str,
) -> None:
    """The model gets the cleaned request at the first attempt; the answer is spoken."""
    openai_server.add_text("Hi!")
    result = await ask(hass, setup_integration, text)
    assert speech(result) == "Hi!"
    assert openai_server.request_count == 1
    assert text_of(messages_of(openai_server.requests[0], "user")[-1]) == cleaned
    openai_server.add_text("Yes.")
    second = await ask(hass, setup_integration, "Still there?", result.conversation_id)
    assert speech(second) == "Yes."
    messages = await thread_messages(setup_integration, result.conversation_id)
    assert_thread_consistent(messages)
    assert [m.text for m in messages if isinstance(m, HumanMessage)] == [cleaned, "Still there?"]


@pytest.mark.parametrize(("fact", "cleaned"), FACTS)
async def test_memory_with_lone_surrogates(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user,
    fact: str,
    cleaned: str,
) -> None:
    """The memory tool saves the cleaned fact (it used to report a broken memory file), and
    add_memory does the same for an automation's text."""
    user = hass_admin_user.id
    openai_server.add_tool_calls([ToolCall("memory", {"action": "remember", "text": fact})])
    openai_server.add_text("Saved.")
    result = await ask(hass, setup_integration, "Remember this", user_id=user)
    assert speech(result) == "Saved."
    (saved,) = [json.loads(text_of(m)) for m in messages_of(openai_server.requests[1], "tool")]
    cleaned = " ".join(cleaned.split())  # a memory is one line
    assert saved["text"] == cleaned, saved

    await hass.services.async_call(
        DOMAIN, "add_memory", {"text": fact[::-1], "user_id": user}, blocking=True
    )
    listed = await hass.services.async_call(
        DOMAIN, "list_memories", {"user_id": user}, blocking=True, return_response=True
    )
    texts = sorted(m["text"] for m in listed["memories"])
    for text in texts:
        _assert_valid_unicode(text)
    assert cleaned in texts
    assert len(texts) == 2
    # The next turn recalls what was saved.
    openai_server.add_text("I remember.")
    await ask(hass, setup_integration, "Say hello?", result.conversation_id, user_id=user)
    system = prompt_text(openai_server.requests[-1])
    assert json.dumps(cleaned, ensure_ascii=False)[1:-1] in system


# Home Assistant's own Assist API cannot list such a name in its prompt (its YAML dump
# raises before any agent runs): the names reach the model through our tools only.
@pytest.mark.parametrize("agent_overrides", [{CONF_LLM_HASS_API: []}])
@pytest.mark.parametrize(("name", "cleaned"), NAMES)
async def test_entity_names_with_lone_surrogates(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    name: str,
    cleaned: str,
) -> None:
    """An exposed entity with an odd name (in the Assist prompt and in tool results)."""
    hass.states.async_set("sensor.odd", "21", {"friendly_name": name})
    async_expose_entity(hass, conversation.DOMAIN, "sensor.odd", True)
    openai_server.add_tool_calls([ToolCall("home_find_entities", {"query": ""})])
    openai_server.add_text("Found it.")
    result = await ask(hass, setup_integration, "What sensors are there?")
    assert speech(result) == "Found it."
    assert openai_server.request_count == 2
    (found,) = [json.loads(text_of(m)) for m in messages_of(openai_server.requests[1], "tool")]
    assert [e["name"] for e in found["entities"]] == [cleaned]
    for request in openai_server.requests:
        _assert_valid_unicode(json.dumps(request, ensure_ascii=False))
    await assert_responsive(hass)


@pytest.mark.parametrize("user_id", ["a.b", "x\x00y", "\ud800", "."])
async def test_odd_user_id_in_a_turn(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    user_id: str,
) -> None:
    """A context whose user id cannot own memories: the turn is answered, and what it
    remembers is the household's, like any turn without a person."""
    openai_server.add_tool_calls(
        [ToolCall("memory", {"action": "remember", "text": "The door code is 1234"})]
    )
    openai_server.add_text("Saved.")
    result = await ask(hass, setup_integration, "Remember the door code", user_id=user_id)
    assert result.response.response_type == intent.IntentResponseType.ACTION_DONE
    assert speech(result) == "Saved."
    (saved,) = [json.loads(text_of(m)) for m in messages_of(openai_server.requests[1], "tool")]
    assert saved.get("text") == "The door code is 1234", saved
    household = await hass.services.async_call(
        DOMAIN, "list_memories", {"household": True}, blocking=True, return_response=True
    )
    assert [m["text"] for m in household["memories"]] == ["The door code is 1234"]


@pytest.mark.parametrize("service", ["list_memories", "add_memory", "delete_memory"])
@pytest.mark.parametrize("user_id", ["a.b", "x\x00y", "\ud800bad", "no-such-user", "household"])
async def test_odd_user_id_in_a_service_call(
    hass: HomeAssistant, setup_integration: MockConfigEntry, service: str, user_id: str
) -> None:
    """An automation naming no Home Assistant user hears so, in words."""
    data = {"user_id": user_id}
    if service == "add_memory":
        data["text"] = "Likes tea"
    if service == "delete_memory":
        data["memory_id"] = "abc"
    with pytest.raises(ServiceValidationError) as raised:
        await hass.services.async_call(
            DOMAIN, service, data, blocking=True, return_response=service == "list_memories"
        )
    assert raised.value.translation_key == "unknown_user"
    message = str(raised.value)
    _assert_valid_unicode(message)
    assert "is not a Home Assistant user" in message
    # Nothing was saved anywhere by the refused call.
    household = await hass.services.async_call(
        DOMAIN, "list_memories", {"household": True}, blocking=True, return_response=True
    )
    assert household["memories"] == []


@pytest.mark.parametrize(("conversation_id", "_cleaned"), odd_strings(3, seed=4))
async def test_conversation_id_with_lone_surrogates(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    conversation_id: str,
    _cleaned: str,
) -> None:
    """A conversation id with invalid Unicode names a thread of its own, kept in the
    conversations file (not a storage failure that sends every conversation to memory)."""
    openai_server.add_text("Noted.")
    first = await ask(hass, setup_integration, "My name is Ada.", conversation_id)
    assert speech(first) == "Noted."
    openai_server.add_text("Ada.")
    second = await ask(hass, setup_integration, "Who am I?", first.conversation_id)
    assert speech(second) == "Ada."
    seen = [text_of(m) for m in openai_server.requests[-1]["messages"][1:]]
    assert seen == ["My name is Ada.", "Noted.", "Who am I?"]
    assert not setup_integration.runtime_data.runtime.storage_failed
