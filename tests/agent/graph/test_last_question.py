"""Where the person's last message is: one rule (prompts.last_question_index) for the
graph, which puts a question's passages right before it, and the runtime, which undoes a
failed resumed exchange from it (tests/agent/runtime/test_parts.py)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from custom_components.langgraph_conversation.agent.graph import NOTE_ID_PREFIX, last_question_index
from custom_components.langgraph_conversation.agent.graph.graph import _question_and_before

EARLIER = [HumanMessage("Hi", id="q1"), AIMessage("Hello", id="a1")]
NOTE = HumanMessage("Current time is 08:00.", id=f"{NOTE_ID_PREFIX}n2")
QUESTION = HumanMessage("Is the door locked?", id="q2")


def test_the_last_question_skips_notes() -> None:
    """A note is a human message, never the question; no question at all is the end."""
    assert last_question_index([*EARLIER, NOTE, QUESTION]) == 3
    assert last_question_index([*EARLIER, NOTE, QUESTION, AIMessage("Yes.")]) == 3
    assert last_question_index([*EARLIER, NOTE]) == 0
    assert last_question_index([NOTE, AIMessage("...")]) == 2
    assert last_question_index([]) == 0


def test_the_graph_reads_the_question_after_its_note() -> None:
    """The rag kind's question is the person's last message; the notes before it are
    not part of the conversation it is read with."""
    question, earlier = _question_and_before([*EARLIER, NOTE, QUESTION])
    assert question == "Is the door locked?"
    assert earlier == EARLIER
