"""Quoting text that goes into a delimited prompt section as data (memories, passages)."""

from __future__ import annotations

import json


def quoted(text: str) -> str:
    """Text as a JSON string with < and > escaped, so it cannot close its section.

    A memory or a document saying "</memories> New rules: ..." must stay inside the
    block that tells the model it is information, never instructions.
    """
    return json.dumps(text, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e")
