"""Tools built once and copied per turn: each copy runs its own turn's coroutine, a
template is rebuilt when what it was built from is another object, and no template keeps
a turn alive."""

from __future__ import annotations

import gc
from typing import Any
import weakref

from langchain_core.tools import StructuredTool
import pytest

from custom_components.langgraph_conversation.agent.tool_templates import (
    ToolTemplates,
    unbound,
)

_SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


class _Turn:
    """A turn's context: what a tool's coroutine closes over."""

    def __init__(self, name: str) -> None:
        self.name = name

    def coroutine(self) -> Any:
        async def call(**arguments: Any) -> Any:
            return (self.name, arguments)

        return call


def _builder(built: list[int], schema: dict[str, Any] = _SCHEMA):
    def build() -> StructuredTool:
        built.append(1)
        return StructuredTool(
            name="tool", description="A tool.", args_schema=schema, coroutine=unbound
        )

    return build


async def test_each_copy_runs_its_own_turn_and_the_tool_is_built_once() -> None:
    templates = ToolTemplates()
    built: list[int] = []
    tools = [
        templates.bound("tool", None, _builder(built), _Turn(name).coroutine())
        for name in ("first", "second", "third")
    ]
    assert len(built) == 1
    assert [await tool.coroutine(x=n) for n, tool in enumerate(tools)] == [
        ("first", {"x": 0}),
        ("second", {"x": 1}),
        ("third", {"x": 2}),
    ]
    # Through LangChain's own entry point too, with its validation of the arguments.
    assert await tools[1].ainvoke({"x": 5}) == ("second", {"x": 5})
    assert {tool.name for tool in tools} == {"tool"}
    assert all(tool.args_schema is _SCHEMA for tool in tools)


async def test_a_template_is_never_called() -> None:
    with pytest.raises(RuntimeError):
        await unbound(x=1)


def test_another_anchor_builds_again_and_the_newest_stays() -> None:
    templates = ToolTemplates()
    built: list[int] = []
    first, second = dict(_SCHEMA), dict(_SCHEMA)
    templates.bound(("tool", id(first)), first, _builder(built, first), _Turn("a").coroutine())
    # The same key (an id can be reused once its object is gone) with another object.
    made = templates.bound(
        ("tool", id(first)), second, _builder(built, second), _Turn("b").coroutine()
    )
    assert len(built) == 2
    assert made.args_schema is second
    templates.bound(("tool", id(first)), second, _builder(built, second), _Turn("c").coroutine())
    assert len(built) == 2


def test_templates_are_bounded_least_recently_used_first() -> None:
    templates = ToolTemplates(kept=3)
    built: list[int] = []
    for key in ("a", "b", "c"):
        templates.bound(key, None, _builder(built), _Turn(key).coroutine())
    templates.bound("a", None, _builder(built), _Turn("a").coroutine())  # used again
    templates.bound("d", None, _builder(built), _Turn("d").coroutine())  # "b" goes
    assert len(templates) == 3
    assert len(built) == 4
    templates.bound("a", None, _builder(built), _Turn("a").coroutine())
    assert len(built) == 4
    templates.bound("b", None, _builder(built), _Turn("b").coroutine())
    assert len(built) == 5


def test_no_template_keeps_a_turn_alive() -> None:
    templates = ToolTemplates()
    turn = _Turn("gone")
    tool = templates.bound("tool", None, _builder([]), turn.coroutine())
    alive = weakref.ref(turn)
    del turn, tool
    gc.collect()
    assert alive() is None
