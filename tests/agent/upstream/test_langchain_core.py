"""Contract of agent/upstream/langchain_core.py: merge_dicts merges as chunk addition does."""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import random
from typing import Any

from langchain_core.messages import AIMessageChunk
from langchain_core.tools import StructuredTool
from langchain_core.utils import _merge
from pydantic import BaseModel, ValidationError
import pytest

from custom_components.langgraph_conversation.agent.upstream import langchain_core, versions

# Metadata as providers stream it: a model name repeated, a finish reason at the end, a
# nested mapping filled in over several chunks.
_SEQUENCE = [
    {"model_name": "llama3.2"},
    {"model_name": "llama3.2", "system_fingerprint": "fp"},
    {"finish_reason": "stop", "usage": {"prompt": 3}},
    {"usage": {"completion": 5}},
]


def _by_chunks() -> dict:
    total = AIMessageChunk(content="")
    for metadata in _SEQUENCE:
        total += AIMessageChunk(content="", response_metadata=metadata)
    return dict(total.response_metadata)


def test_the_installed_langchain_core_is_the_checked_one() -> None:
    """An upgrade lands here first: review agent/upstream/langchain_core.py for it."""
    assert versions.installed("langchain-core") in langchain_core.CHECKED_VERSIONS
    assert langchain_core.ACTIVE
    assert langchain_core.merge_metadata is _merge.merge_dicts


def test_merge_dicts_keeps_its_signature() -> None:
    assert list(inspect.signature(_merge.merge_dicts).parameters) == ["left", "others"]


@pytest.mark.parametrize(
    "merge", [_merge.merge_dicts, langchain_core._merged_by_chunks], ids=["private", "public"]
)
def test_both_paths_merge_as_adding_chunks_does(merge) -> None:
    merged: dict = {}
    for metadata in _SEQUENCE:
        merged = merge(merged, metadata)
    assert merged == _by_chunks()
    assert merged["usage"] == {"prompt": 3, "completion": 5}


def test_another_version_uses_the_public_path(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert not versions.matches(
            "langchain-core",
            langchain_core.CHECKED_VERSIONS,
            "merging",
            "chunks",
            version="9.9.9",
        )
    assert "langchain-core 9.9.9 is installed" in caplog.text


# --- running a JSON-schema tool ---------------------------------------------------------

_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


class _Refused(Exception):
    """What a tool raises for the model to read."""


def _recording_tool(seen: list[tuple[dict, asyncio.Task | None]]) -> StructuredTool:
    """A JSON-schema tool as Home Assistant's and ours are made: a keywords-only coroutine."""

    async def call(**arguments: Any) -> Any:
        seen.append((arguments, asyncio.current_task()))
        if "refuse" in arguments:
            raise _Refused(arguments["refuse"])
        arguments["changed"] = True  # a tool changing its own copy reaches nobody
        return {"got": dict(arguments)}

    return StructuredTool(name="t", description="d", args_schema=_SCHEMA, coroutine=call)


def _arguments(rng: random.Random) -> dict[str, Any]:
    """Arguments as an untrusted model sends them: any keys, any JSON values."""
    leaves = [None, True, 0, -3, 2.5, "", "Küche", "x" * 50, "\u202e", "'; DROP"]

    def value(depth: int) -> Any:
        kind = rng.randrange(4 if depth < 3 else 1)
        if kind == 0:
            return rng.choice(leaves)
        if kind == 1:
            return [value(depth + 1) for _ in range(rng.randrange(3))]
        return {f"k{i}": value(depth + 1) for i in range(rng.randrange(3))}

    names = ["name", "area", "domain", "brightness", "type", "args", "id", "ünïcode", "a b"]
    return {rng.choice(names): value(0) for _ in range(rng.randrange(5))}


@pytest.mark.parametrize("seed", range(40))
async def test_a_json_schema_tool_runs_as_ainvoke_would_run_it(seed: int) -> None:
    """The behaviour run_tool relies on, and that it keeps: ainvoke awaits the coroutine
    with the arguments as keywords, unvalidated, a copy of them; so does run_tool, in the
    caller's own task. Generated arguments; a "type": "tool_call" pair is left out here
    (ainvoke unwraps it, see the next test)."""
    arguments = _arguments(random.Random(seed))
    if arguments.get("type") == "tool_call":
        del arguments["type"]
    sent = copy.deepcopy(arguments)
    via_langchain: list = []
    via_ours: list = []

    expected = await _recording_tool(via_langchain).ainvoke(arguments)
    got = await langchain_core.run_tool(_recording_tool(via_ours), arguments)

    assert got == expected == {"got": {**sent, "changed": True}}
    assert arguments == sent
    assert via_langchain[0][0] == via_ours[0][0] == {**sent, "changed": True}
    assert via_ours[0][1] is asyncio.current_task()
    assert via_langchain[0][1] is not asyncio.current_task()


async def test_a_tool_s_error_comes_out_unchanged() -> None:
    for run in (lambda tool, args: tool.ainvoke(args), langchain_core.run_tool):
        with pytest.raises(_Refused, match="not now"):
            await run(_recording_tool([]), {"refuse": "not now"})


async def test_arguments_shaped_like_a_tool_call_are_passed_as_they_are() -> None:
    """ainvoke takes such arguments for a whole tool call and runs the tool on the inner
    ones; run_tool hands the model's arguments on as they came (the tool validates)."""
    shaped = {"type": "tool_call", "args": {"name": "Hall"}, "id": "call-1", "name": "t"}
    seen: list = []
    await langchain_core.run_tool(_recording_tool(seen), shaped)
    assert seen[0][0] == {**shaped, "changed": True}

    unwrapped: list = []
    await _recording_tool(unwrapped).ainvoke(shaped)
    assert unwrapped[0][0] == {"name": "Hall", "changed": True}


async def test_other_tools_run_through_ainvoke() -> None:
    """A tool with a Pydantic schema is validated by langchain; a coroutine that takes
    callbacks, or named parameters, gets them filled in by ainvoke: both keep its path."""

    class Args(BaseModel):
        count: int

    async def count(count: int) -> int:
        return count * 2

    typed = StructuredTool(name="c", description="d", args_schema=Args, coroutine=count)
    assert await langchain_core.run_tool(typed, {"count": "21"}) == 42
    with pytest.raises(ValidationError):
        await langchain_core.run_tool(typed, {"count": "many"})

    tasks: list = []

    async def with_callbacks(callbacks: Any = None, **arguments: Any) -> bool:
        tasks.append(asyncio.current_task())
        return callbacks is not None

    told = StructuredTool(name="w", description="d", args_schema=_SCHEMA, coroutine=with_callbacks)
    assert await langchain_core.run_tool(told, {"name": "x"}) is True
    assert tasks[0] is not asyncio.current_task()
