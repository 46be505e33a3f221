"""Recalled memories inside stored context notes: what a later request may still send.

Each turn's context note is stored in the thread with the memories recalled for it
(prompts.py), so the next request starts byte-identically. Two things follow, both fixed
here on the request as it is sent (the stored thread is left as it is, so every later
request is made the same way and a prompt cache stays warm after the one change):

- a memory forgotten since then must not reach the model again from an old note: its
  line goes from every note of the request;
- a memory an earlier note of the same request already shows is not shown again: the
  same facts would otherwise be re-sent with every turn that recalls them.

A note's memory lines are those `memory_block` writes: "- [id] text", one per line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
import logging
import re

from langchain_core.messages import AnyMessage, HumanMessage

from .prompts import NOTE_HEADER, is_note

_LOGGER = logging.getLogger(__name__)

_BLOCK = re.compile(r"<memories>\n.*?</memories>", re.DOTALL)
_LINE = re.compile(r"^- \[([^\]\n]+)\] ", re.MULTILINE)

# Which of these memory ids still exist (the store's answer).
type MemoriesExist = Callable[[set[str]], Awaitable[set[str]]]


def _ids(text: str) -> set[str]:
    block = _BLOCK.search(text)
    return set(_LINE.findall(block.group())) if block else set()


def _kept(text: str, keep: Callable[[str, str], bool]) -> str:
    """The note with only the memory lines `keep(id, line)` accepts; without a memory
    section when none is left, and "" when nothing but the header is left."""
    block = _BLOCK.search(text)
    if block is None:
        return text
    lines = block.group().split("\n")
    # "<memories>", the line saying they are data, the memories, "</memories>".
    head, memories, tail = lines[:2], lines[2:-1], lines[-1:]
    kept = [
        line for line in memories if (found := _LINE.match(line)) and keep(found.group(1), line)
    ]
    if len(kept) == len(memories):
        return text
    section = "\n".join([*head, *kept, *tail]) if kept else ""
    rest = (text[: block.start()] + section + text[block.end() :]).strip()
    return "" if rest == NOTE_HEADER else rest


async def without_stale_memories(
    messages: Iterable[AnyMessage], exist: MemoriesExist
) -> list[AnyMessage]:
    """The request with forgotten and repeated memories taken out of its context notes
    (a note left with nothing to say is left out)."""
    messages = list(messages)
    notes = [m for m in messages if is_note(m) and isinstance(m.content, str)]
    note_ids = {id(m) for m in notes}
    shown = set().union(*(_ids(str(m.content)) for m in notes)) if notes else set()
    if not shown:
        return messages
    try:
        existing = await exist(shown)
    except Exception:  # noqa: BLE001  the memory file failing must not fail the answer
        _LOGGER.warning("Could not check the memories in context notes; sent as stored")
        existing = shown
    seen: set[str] = set()

    def keep(memory_id: str, line: str) -> bool:
        if memory_id not in existing or line in seen:
            return False
        seen.add(line)
        return True

    result: list[AnyMessage] = []
    for message in messages:
        if id(message) in note_ids:
            text = _kept(str(message.content), keep)
            if not text:
                continue
            if text != message.content:
                message = HumanMessage(text, id=message.id)
        result.append(message)
    return result
