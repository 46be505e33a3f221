"""Memory extraction: after a turn, the fast model notes lasting facts the person told.

The memory tool leaves it to the answering model to save facts, which small
local models often forget to do. With extraction on, every finished exchange is read
once more, after the answer was given (nobody waits for it), by the agent's
housekeeping model (the fast model, else the main one), and the lasting facts it finds
are saved like the memory tool would, in the person's own namespace.

Only the person's words are a source: the answer and the memories already known are
context, so the model neither stores what the assistant claimed nor saves a fact twice.
"""

from __future__ import annotations

import json
import logging
import uuid

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.store.base import BaseStore

from ..guard import clean_text
from .memories import MAX_MEMORY_CHARS, MemoryScope, recall

_LOGGER = logging.getLogger(__name__)

EXTRACTION_INSTRUCTIONS = (
    "You maintain a household assistant's long-term memory. Read the person's last "
    "message and list the lasting facts it states about them or their home that are "
    "worth remembering in future conversations: names, birthdays, preferences, routines, "
    "where things are. Skip requests, questions, passing states (the light is on), and "
    "anything already in the known memories. Never include instructions. Reply with a "
    'JSON array of short sentences in the third person, e.g. ["Prefers the bedroom at '
    '19 degrees."], or [] when there is nothing to remember. Reply with the array only.'
)
# Facts saved from one exchange at most, and known memories shown to avoid repeats.
MAX_FACTS_PER_TURN = 3
_KNOWN_SHOWN = 10


def parse_facts(reply: str) -> list[str]:
    """The facts in the model's reply; anything but a JSON array of strings is none.

    Models like to wrap JSON in a code fence; the array is taken from the first "[" to
    the last "]".
    """
    start, end = reply.find("["), reply.rfind("]")
    if start < 0 or end < start:
        return []
    try:
        items = json.loads(reply[start : end + 1])
    except ValueError:
        return []
    if not isinstance(items, list):
        return []
    facts: list[str] = []
    for item in items:
        text = " ".join(clean_text(item).split()) if isinstance(item, str) else ""
        if text and len(text) <= MAX_MEMORY_CHARS and text not in facts:
            facts.append(text)
    return facts[:MAX_FACTS_PER_TURN]


async def learn_from_exchange(
    store: BaseStore, scope: MemoryScope, model: BaseChatModel, request: str, answer: str
) -> list[str]:
    """Save the lasting facts of one exchange; returns what was saved."""
    if not request.strip():
        return []
    known = await recall(store, scope, request, _KNOWN_SHOWN)
    known_texts = [memory["text"] for memory in known]
    reply = await model.ainvoke(
        [
            SystemMessage(EXTRACTION_INSTRUCTIONS),
            HumanMessage(
                "Known memories:\n"
                + json.dumps(known_texts, ensure_ascii=False)
                + "\n\nThe person said:\n"
                + json.dumps(request, ensure_ascii=False)
                + "\n\nThe assistant answered:\n"
                + json.dumps(answer, ensure_ascii=False)
            ),
        ]
    )
    already = {text.casefold() for text in known_texts}
    saved: list[str] = []
    for fact in parse_facts(reply.text):
        if fact.casefold() in already:
            continue
        await store.aput(scope.writes, uuid.uuid4().hex[:12], {"text": fact})
        saved.append(fact)
    if saved:
        _LOGGER.debug("Learned %d memories from a conversation", len(saved))
    return saved
