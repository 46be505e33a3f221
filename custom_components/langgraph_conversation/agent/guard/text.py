"""Text hygiene: invalid Unicode made valid wherever text enters a turn.

A Python string may hold lone surrogates (U+D800-U+DFFF on their own), which no UTF-8
encoder accepts: the HTTP client cannot send them to the model, SQLite cannot store them
and Home Assistant's JSON cannot write them into a trace. They arrive through JSON escapes
(`"\\ud800"`) in a request, a model's tool arguments, an entity's name or a service call.
Each entrance cleans its text with `clean_text`, so one odd character never turns into a
"server error" or a "broken memory file" further in.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """`text` with surrogate pairs joined into their character and lone ones replaced by
    U+FFFD (the replacement character); valid text is returned as it is.

    Encoding as UTF-16 with `surrogatepass` keeps the code units as they are, and decoding
    them again pairs what belongs together; only what cannot pair is replaced.
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def storable_key(key: str) -> str:
    """An identifier (a conversation id) that SQLite can store, unchanged if valid.

    Unlike `clean_text`, distinct invalid ids stay distinct: each surrogate is written as
    its escape (`\\ud800`); only an id spelling that escape out literally would meet it.
    """
    if key.isascii() or _SURROGATE.search(key) is None:
        return key
    return key.encode("utf-8", "backslashreplace").decode("utf-8")


def clean_value(value: Any) -> Any:
    """A JSON-like value (tool arguments, tool results) with every string cleaned.

    Keys too; other values are returned unchanged, containers are copied only when
    something in them changed.
    """
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        cleaned = {clean_value(k): clean_value(v) for k, v in value.items()}
        unchanged = all(
            a is b and c is d
            for (a, c), (b, d) in zip(value.items(), cleaned.items(), strict=False)
        )
        return value if unchanged and len(cleaned) == len(value) else cleaned
    if isinstance(value, (list, tuple)):
        items = [clean_value(item) for item in value]
        if all(a is b for a, b in zip(value, items, strict=True)):
            return value
        return type(value)(items) if isinstance(value, list) else tuple(items)
    return value


def has_invalid_text(text: str) -> bool:
    """Whether `text` holds a surrogate code point (valid UTF-8 text never does)."""
    return _SURROGATE.search(text) is not None
