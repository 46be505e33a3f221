"""What a model's warm-up imports that its calls never use (issue #29: less memory).

In a fresh interpreter, the warm-up of an Ollama model and then its real calls (the
access check, streamed turns with tools, against a fake Ollama server) never import the
OpenAI SDK's API resources (on openai 3.10 the package imports all of them: 460 modules,
16 MiB). A model that LiteLLM calls through the SDK still has them imported by its
warm-up, off the event loop. Neither model's calls, nor their failures, resolve a lazy
attribute of LiteLLM that the warm-up left (each would be an import on the event loop),
though it leaves out the other providers' config classes.
"""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys

import pytest

# Run by `python -c` in the repository; argv[1] "ollama" or "openai", argv[2] a seed.
# Prints what the calls returned and whether the SDK's resources were imported, and when.
_WARM_UP_AND_CALL = """
import asyncio, json, random, sys
from typing import Any

# The integration first, as in Home Assistant (on 2026.11 httpx must be aliased first).
from custom_components.langgraph_conversation.agent.models import (
    ModelAccess, ModelSettings, async_check_access, classify_error, warm_up,
)
from custom_components.langgraph_conversation.agent.models.chat import build_chat_model
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import StructuredTool
import litellm
from litellm._lazy_imports import _get_lazy_import_registry
from litellm._lazy_imports_registry import LLM_CONFIG_NAMES
from fakes import FakeOllamaServer, FakeOpenAIServer, ToolCall

kind, rng = sys.argv[1], random.Random(int(sys.argv[2]))
registry = _get_lazy_import_registry()
ROOMS = ["kitchen", "hall", "attic", "garage", "study"]

async def _never_called(**_arguments: Any) -> None:
    pass

TOOLS = [
    StructuredTool(
        name="HassTurnOn",
        description="Turns a light on",
        args_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        coroutine=_never_called,
    )
]

async def main():
    server_class = FakeOllamaServer if kind == "ollama" else FakeOpenAIServer
    async with server_class() as server:
        if kind == "ollama":
            access = ModelAccess("ollama_chat/llama3.2", None, server.base_url)
        else:
            access = ModelAccess("openai/gpt-test", "sk-test", server.api_base)
        warm_up(access)
        after_warm_up = "openai.resources" in sys.modules
        resolved = {name for name in registry if name in vars(litellm)}
        modules = set(sys.modules)
        server.add_text("OK")
        await async_check_access(access, 30)
        model = build_chat_model(access, ModelSettings()).bind_tools(TOOLS)
        # A turn's first streamed call, as the graph makes it: nothing left to import.
        server.add_text("Ready.")
        before_first = set(sys.modules)
        async for _chunk in model.astream([HumanMessage("Are you there?")]):
            pass
        imported_by_first_turn_call = sorted(set(sys.modules) - before_first)
        rooms, texts = [], []
        for _ in range(3):
            room = rng.choice(ROOMS)
            server.add_tool_calls([ToolCall("HassTurnOn", {"name": room})])
            server.add_text(f"The {room} light is on.")
            for _answer in range(2):
                total = None
                async for chunk in model.astream(
                    [SystemMessage("You control a home."), HumanMessage(f"Light the {room}.")]
                ):
                    total = chunk if total is None else total + chunk
                rooms += [call["args"]["name"] for call in total.tool_calls]
                if total.content:
                    texts.append(total.content)
            rooms.append(room)
        kinds = []
        for status in rng.sample([400, 401, 404, 429, 500, 503], 3):
            server.add_error(status)
            try:
                async for _chunk in model.astream([HumanMessage("Light the hall.")]):
                    pass
            except Exception as err:
                kinds.append(str(classify_error(err)))
        print(json.dumps({
            "kinds": kinds,
            "resolved_by_calls": sorted(
                {name for name in registry if name in vars(litellm)} - resolved
            ),
            "provider_modules_imported_by_calls": sorted(
                name for name in set(sys.modules) - modules if name.startswith("litellm.llms")
            ),
            "imported_by_first_turn_call": imported_by_first_turn_call,
            "configs_resolved": len(resolved & set(LLM_CONFIG_NAMES)),
            "configs": len(LLM_CONFIG_NAMES),
            "after_warm_up": after_warm_up,
            "after_calls": "openai.resources" in sys.modules,
            "rooms": rooms,
            "texts": texts,
        }))

asyncio.run(main())
"""


def _run(kind: str, seed: int) -> dict:
    repository = Path(__file__).parents[3]
    finished = subprocess.run(
        [sys.executable, "-c", _WARM_UP_AND_CALL, kind, str(seed)],
        cwd=repository,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    return json.loads(finished.stdout.strip().splitlines()[-1])


def _nothing_left_for_the_calls(result: dict) -> None:
    """Three scripted failures, each classified; no lazy attribute resolved by the calls;
    most providers' configs never resolved."""
    assert len(result["kinds"]) == 3
    assert all(result["kinds"])
    assert result["resolved_by_calls"] == []
    # Nor any module at all on a turn's first call (langchain-core's tracers, LiteLLM's
    # service logger, anyio's backend: imported by the warm-up, upstream/sdk_imports.py).
    assert result["imported_by_first_turn_call"] == [], result["imported_by_first_turn_call"]
    # No provider module either (where the config classes live).
    assert result["provider_modules_imported_by_calls"] == []
    assert 0 < result["configs_resolved"] < result["configs"] / 4


def _expected_rooms(rooms: list[str]) -> None:
    """Each turn's tool call named the room the turn was about (the list ends each turn
    with the room the script picked)."""
    assert len(rooms) == 6
    for called, picked in zip(rooms[0::2], rooms[1::2], strict=True):
        assert called == picked


@pytest.mark.parametrize("seed", [29, 1029])
def test_an_ollama_model_never_imports_the_openai_sdk_resources(seed: int) -> None:
    result = _run("ollama", seed)
    _expected_rooms(result["rooms"])
    assert result["texts"] == [f"The {room} light is on." for room in result["rooms"][1::2]]
    assert result["after_warm_up"] is False
    assert result["after_calls"] is False
    _nothing_left_for_the_calls(result)


def test_a_model_called_through_the_sdk_has_them_from_its_warm_up() -> None:
    result = _run("openai", 7)
    _expected_rooms(result["rooms"])
    assert result["after_warm_up"] is True
    _nothing_left_for_the_calls(result)
