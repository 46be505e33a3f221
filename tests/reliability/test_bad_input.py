"""Bad input: empty and huge requests, control characters, any script, odd conversation ids.

Whatever comes in, the user hears a clear sentence, the thread stays consistent and
nothing is written outside the integration's own files.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from fakes import FakeOpenAIServer, ToolCall
from homeassistant.core import HomeAssistant
from homeassistant.helpers import intent

from ..helpers import assist_tool_name, messages_of, text_of
from .conftest import (
    ask,
    assert_responsive,
    assert_sentence,
    assert_thread_consistent,
    pairs,
    speech,
    thread_messages,
)


@pytest.mark.parametrize(
    "text", ["", "   ", " \n\t \r\n ", "\x00\x07\x1b"], ids=["empty", "spaces", "blank", "control"]
)
async def test_nothing_to_answer(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    text: str,
) -> None:
    """A request without words is answered with a sentence; the model is not bothered."""
    openai_server.add_text("Hi!")
    first = await ask(hass, setup_integration, "Hello")
    result = await ask(hass, setup_integration, text, first.conversation_id)
    assert_sentence(result, "empty_request")
    assert openai_server.request_count == 1
    messages = await thread_messages(setup_integration, first.conversation_id)
    assert pairs(messages) == [("human", "Hello"), ("ai", "Hi!")]
    await assert_responsive(hass)


async def test_long_and_noisy_requests(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """50,000 characters are cut to the limit with the user told; control characters go."""
    openai_server.add_text("That is a lot of text.")
    result = await ask(hass, setup_integration, "Summarise:\x00\x1b " + "word " * 10_000)
    assert speech(result) == (
        "Your message was very long, so I only read its first 8,000 characters. "
        "That is a lot of text."
    )
    sent = text_of(messages_of(openai_server.requests[0], "user")[-1])
    assert len(sent) == 8000
    assert sent.startswith("Summarise: word")
    assert_thread_consistent(await thread_messages(setup_integration, result.conversation_id))


NOTICE = "Your message was very long, so I only read its first 8,000 characters."


@pytest.mark.parametrize("rounds", [1, 2, 3])
@pytest.mark.parametrize("text_before_calls", ["", "Let me look."], ids=["calls", "text+calls"])
async def test_the_notice_is_in_the_final_answer_after_tool_calls(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    rounds: int,
    text_before_calls: str,
) -> None:
    """The model calls tools (1-3 rounds, with or without words first) before it answers:
    the final answer (speech, intent-end) still opens with the notice, once."""
    tool = await assist_tool_name(hass, "GetDateTime")
    for _ in range(rounds):
        openai_server.add_tool_calls([ToolCall(tool, {})], text=text_before_calls)
    openai_server.add_text("It is noon.")
    result = await ask(hass, setup_integration, "What time is it? " + "padding " * 3_000)
    assert speech(result) == f"{NOTICE} It is noon."
    assert openai_server.request_count == rounds + 1
    assert_thread_consistent(await thread_messages(setup_integration, result.conversation_id))


async def test_any_script_and_an_unknown_language(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Mixed scripts, emoji and right-to-left text pass unchanged, whatever the language."""
    openai_server.add_text("Bonjour ! 👋")
    text = "Salut 👋 Привет مرحبا 你好 👨‍👩‍👧 e\u0301"
    result = await ask(hass, setup_integration, text, language="xx-unknown")
    assert speech(result) == "Bonjour ! 👋"
    assert text_of(messages_of(openai_server.requests[0], "user")[-1]) == text
    messages = await thread_messages(setup_integration, result.conversation_id)
    assert pairs(messages) == [("human", text), ("ai", "Bonjour ! 👋")]


@pytest.mark.parametrize(
    "conversation_id",
    ["c" * 10_000, "../../../../etc/passwd", "a/b/c", "nul\x00byte", "..\\..\\windows"],
    ids=["10000-chars", "dot-dot", "slashes", "nul", "backslashes"],
)
async def test_odd_conversation_ids(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    tmp_path: Path,
    conversation_id: str,
) -> None:
    """Any conversation id names a thread of its own, and never a file."""
    openai_server.add_text("Noted.")
    first = await ask(hass, setup_integration, "My name is Ada.", conversation_id)
    assert first.response.response_type == intent.IntentResponseType.ACTION_DONE
    assert first.conversation_id == conversation_id
    openai_server.add_text("Ada.")
    second = await ask(hass, setup_integration, "Who am I?", conversation_id)
    assert speech(second) == "Ada."
    seen = [text_of(m) for m in openai_server.requests[-1]["messages"][1:]]
    assert seen == ["My name is Ada.", "Noted.", "Who am I?"]
    messages = await thread_messages(setup_integration, conversation_id)
    assert_thread_consistent(messages)
    assert len(messages) == 4

    # Only the integration's own files exist, all inside its directory.
    files = await hass.async_add_executor_job(
        lambda: sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    )
    assert all(f.startswith("config/") for f in files), files
    ours = [f for f in files if f.startswith("config/langgraph_conversation/")]
    assert {Path(f).name.split("-")[0] for f in ours} <= {"threads.db", "memory.db"}, ours
