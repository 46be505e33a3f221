"""LangChain tools built once, bound to each turn by a copy.

A StructuredTool is a pydantic model: building one validates and stores every field, and
a turn offers a dozen tools, each bound to that turn (its coroutine closes over the turn's
context). Between turns only the coroutine changes: the same name, description, schema
and metadata come back. So a tool is built once per such description, and each turn gets
a copy with its own coroutine (pydantic's `model_copy`, which validates nothing: the
template was validated when built). The copies share the template's schema and metadata;
nothing changes a tool after it is made (schemas are narrowed into new dicts).

A template is found by a key the caller builds, which may name an object by its identity
(an `anchor`: our tool's spec, or Home Assistant's converted schema). The entry holds that
object, so its id is not reused while the entry is kept, and a hit requires the very same
object.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from langchain_core.tools import StructuredTool

# Templates kept (least recently used go first): a home's turns use a few dozen.
TEMPLATES_KEPT = 256


async def unbound(**_arguments: Any) -> Any:
    """A template's coroutine: templates are only copied, never called (and hold no turn:
    a turn's coroutine would keep its context alive as long as the template)."""
    raise RuntimeError("a tool template was called")


class ToolTemplates:
    """Built tools by what describes them, copied per turn with the turn's coroutine."""

    def __init__(self, kept: int = TEMPLATES_KEPT) -> None:
        self._kept = kept
        self._templates: OrderedDict[Hashable, tuple[object, StructuredTool]] = OrderedDict()

    def bound(
        self,
        key: Hashable,
        anchor: object,
        build: Callable[[], StructuredTool],
        coroutine: Callable[..., Any],
    ) -> StructuredTool:
        """The tool `build` makes for `key` (and the object `anchor`, by identity), with
        `coroutine` as its own. `build` makes the tool with `unbound` as its coroutine."""
        known = self._templates.get(key)
        if known is not None and known[0] is anchor:
            self._templates.move_to_end(key)
            template = known[1]
        else:
            template = build()
            self._templates[key] = (anchor, template)
            while len(self._templates) > self._kept:
                self._templates.popitem(last=False)
        return template.model_copy(update={"coroutine": coroutine})

    def __len__(self) -> int:
        return len(self._templates)
