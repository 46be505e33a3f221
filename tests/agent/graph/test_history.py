"""Long threads: older turns are summarised by the model, the summary rides along."""

from __future__ import annotations

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.agent.graph.history import SUMMARY_INSTRUCTIONS
from custom_components.langgraph_conversation.const import CONF_HISTORY_BUDGET
from fakes import ErrorReply, FakeOpenAIServer, Reply
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant

from ...conftest import agent_entity_id
from ...helpers import messages_of, open_chat_session, text_of


@pytest.mark.parametrize("agent_overrides", [{CONF_HISTORY_BUDGET: 120}])
async def test_old_turns_become_a_summary(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Over the budget, the oldest turns are summarised and only recent ones stay."""
    agent_id = agent_entity_id(hass, setup_integration)
    # Every request, turns and summaries alike, gets this answer.
    openai_server.default_reply = Reply(text="An answer with quite a few words in it. " * 4)
    conversation_id = None
    for n in range(4):
        result = await conversation.async_converse(
            hass,
            f"Question number {n} " + "padded with words " * 5,
            conversation_id,
            Context(),
            agent_id=agent_id,
        )
        conversation_id = result.conversation_id
    # Summaries are made between turns, in the background.
    await setup_integration.runtime_data.runtime.wait_background()
    summaries = [
        r
        for r in openai_server.requests
        if SUMMARY_INSTRUCTIONS in text_of(messages_of(r, "system")[0])
    ]
    assert summaries, "the thread never went over budget"
    assert not summaries[0].get("tools")  # a housekeeping call, no tools bound
    assert "Question number 0" in text_of(messages_of(summaries[0], "user")[0])

    await conversation.async_converse(
        hass, "And now?", conversation_id, Context(), agent_id=agent_id
    )
    last = openai_server.requests[-1]
    # Right after the system message and the tools, not inside the system message (a
    # change there would make the model read every tool again).
    assert "<conversation_summary>" not in text_of(messages_of(last, "system")[0])
    summary = text_of(last["messages"][1])
    assert summary.startswith("<conversation_summary>")
    # Quoted as data, after the line that says so.
    assert '"An answer with quite a few words' in summary.split("<conversation_summary>\n")[1]
    users = [text_of(m) for m in messages_of(last, "user")]
    assert not any(u.startswith("Question number 0") for u in users)
    assert users[-1] == "And now?"
    # No assistant tool call was cut from its result.
    assert [m["role"] for m in last["messages"]][2] == "user"


def test_summaries_leave_room_for_many_turns() -> None:
    """After a cut the rest fits half the budget, so summaries do not come every turn."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.messages.utils import count_tokens_approximately

    from custom_components.langgraph_conversation.agent.graph import split_for_summary

    messages = []
    for n in range(30):
        messages += [HumanMessage(f"question {n} " * 10), AIMessage(f"answer {n} " * 10)]
    budget = 400
    cut = split_for_summary(messages, budget)
    assert cut > 0
    assert isinstance(messages[cut], HumanMessage)
    assert count_tokens_approximately(messages[cut:]) <= budget // 2
    assert split_for_summary(messages[:4], budget) == 0


def _is_summary(request: dict) -> bool:
    return SUMMARY_INSTRUCTIONS in text_of(messages_of(request, "system")[0])


@pytest.mark.parametrize("agent_overrides", [{CONF_HISTORY_BUDGET: 120}])
async def test_summaries_never_come_before_the_first_word(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Events in order: for every turn, no summary request reaches the model between the
    turn's start and its first streamed word; summaries happen after answers."""
    agent_id = agent_entity_id(hass, setup_integration)
    openai_server.default_reply = Reply(text="An answer with quite a few words in it. " * 4)
    events: list[tuple[str, int]] = []

    def listener(_chat_log: conversation.ChatLog, delta: dict) -> None:
        if delta.get("content"):
            events.append(("word", openai_server.request_count))

    conversation_id = None
    for n in range(6):
        with open_chat_session(hass, conversation_id) as session:
            conversation_id = session.conversation_id
            with conversation.async_get_chat_log(hass, session, chat_log_delta_listener=listener):
                events.append(("start", openai_server.request_count))
                await conversation.async_converse(
                    hass,
                    f"Question number {n} " + "padded with words " * 5,
                    conversation_id,
                    Context(),
                    agent_id=agent_id,
                )
        await setup_integration.runtime_data.runtime.wait_background()
    assert any(_is_summary(r) for r in openai_server.requests), "never over budget"
    starts = [count for kind, count in events if kind == "start"]
    for start in starts:
        first_word = next(count for kind, count in events if kind == "word" and count > start)
        before_first_word = openai_server.requests[start:first_word]
        assert before_first_word
        assert not any(_is_summary(r) for r in before_first_word)


@pytest.mark.parametrize("agent_overrides", [{CONF_HISTORY_BUDGET: 120}])
async def test_a_failing_summary_leaves_the_thread_whole(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The summary model fails every time: turns go on, and the thread keeps every turn."""
    agent_id = agent_entity_id(hass, setup_integration)

    def respond(request: dict) -> Reply | ErrorReply:
        if _is_summary(request):
            return ErrorReply(status=500, message="summary model down")
        return Reply(text="An answer with quite a few words in it. " * 4)

    openai_server.responder = respond
    conversation_id = None
    for n in range(5):
        result = await conversation.async_converse(
            hass, f"Question {n} " + "padded " * 10, conversation_id, Context(), agent_id=agent_id
        )
        assert result.response.speech["plain"]["speech"].startswith("An answer")
        conversation_id = result.conversation_id
        await setup_integration.runtime_data.runtime.wait_background()
    assert any(_is_summary(r) for r in openai_server.requests), "never tried to summarise"
    last = [r for r in openai_server.requests if not _is_summary(r)][-1]
    users = [text_of(m) for m in messages_of(last, "user")]
    assert [u.split()[1] for u in users] == ["0", "1", "2", "3", "4"]
    assert "<conversation_summary>" not in text_of(messages_of(last, "system")[0])
