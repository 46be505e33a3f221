"""Confirmation of critical actions: which calls need it, and what counts as a yes.

A tool that can do something hard to undo (unlock a door, open a garage) carries a check
in its metadata. Before the tools node runs a message's calls it asks each check; if any
call needs confirmation, the graph pauses with a LangGraph `interrupt` (the pause lives in
the checkpoint), the user is asked, and their next message resumes the graph.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
import re
from typing import Any
import unicodedata

from langchain_core.tools import BaseTool

from .events import ToolCall

# Tool metadata key: an async check returning a description of the critical action the
# call would perform ("unlock Front Door"), or None when it needs no confirmation.
CONFIRMATION_CHECK = "confirmation_check"
INTERRUPT_KIND = "confirm"

type ConfirmationCheck = Callable[[dict[str, Any]], Awaitable[str | None]]

# Replies that confirm, in the languages people most often use with Assist. Anything else
# cancels: a missed "yes" costs a repeat, a misread "no" would open a door.
_YES = {
    "yes",
    "y",
    "yeah",
    "yep",
    "yup",
    "sure",
    "ok",
    "okay",
    "confirm",
    "confirmed",
    "do it",
    "go ahead",
    "please do",
    "yes please",
    "of course",
    "affirmative",
    "ja",
    "jawohl",
    "oui",
    "si",
    "sí",
    "sim",
    "da",
    "tak",
    "igen",
    "ano",
    "evet",
    "hai",
    "はい",
    "是",
    "好",
}


_NEGATIONS = {
    "no",
    "not",
    "don't",
    "dont",
    "never",
    "cancel",
    "stop",
    "wait",
    "nope",
    "but",
    "nein",
    "nicht",
    "non",
    "pas",
    "nee",
    "nie",
    "ne",
}


def is_affirmative(reply: Any) -> bool:
    """True only for a clear yes: "Yes, please." and "sure, go ahead" count; "yes but
    wait", "no" and "what's the weather?" do not."""
    if not isinstance(reply, str):
        return False
    text = unicodedata.normalize("NFKC", reply).casefold().replace("\u2019", "'")
    words = re.sub(r"[^\w\s']", " ", text).split()
    if not words or _NEGATIONS.intersection(words):
        return False
    return " ".join(words[:2]) in _YES or words[0] in _YES


async def calls_needing_confirmation(
    calls: tuple[ToolCall, ...], tools: Mapping[str, BaseTool]
) -> dict[str, str]:
    """Call id → description of the critical action, for every call that needs a yes."""
    needed: dict[str, str] = {}
    for call in calls:
        tool = tools.get(call.name)
        check: ConfirmationCheck | None = (
            (tool.metadata or {}).get(CONFIRMATION_CHECK) if tool else None
        )
        if check is not None and (description := await check(call.args)):
            needed[call.id] = description
    return needed
