"""Long threads: older turns are summarised by the model, the summary rides along."""

from __future__ import annotations

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.agent.history import SUMMARY_INSTRUCTIONS
from custom_components.langgraph_conversation.const import CONF_HISTORY_BUDGET
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant

from .conftest import agent_entity_id
from .fakes import FakeOpenAIServer, Reply
from .helpers import messages_of, text_of


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
    system = text_of(messages_of(last, "system")[0])
    assert "<conversation_summary>" in system
    # Quoted as data, after the line that says so.
    assert '"An answer with quite a few words' in system.split("<conversation_summary>\n")[1]
    users = [text_of(m) for m in messages_of(last, "user")]
    assert not any(u.startswith("Question number 0") for u in users)
    assert users[-1] == "And now?"
    # No assistant tool call was cut from its result.
    assert [m["role"] for m in last["messages"]][1] == "user"


def test_summaries_leave_room_for_many_turns() -> None:
    """After a cut the rest fits half the budget, so summaries do not come every turn."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.messages.utils import count_tokens_approximately

    from custom_components.langgraph_conversation.agent.history import split_for_summary

    messages = []
    for n in range(30):
        messages += [HumanMessage(f"question {n} " * 10), AIMessage(f"answer {n} " * 10)]
    budget = 400
    cut = split_for_summary(messages, budget)
    assert cut > 0
    assert isinstance(messages[cut], HumanMessage)
    assert count_tokens_approximately(messages[cut:]) <= budget // 2
    assert split_for_summary(messages[:4], budget) == 0
