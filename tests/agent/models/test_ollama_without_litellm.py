"""An Ollama agent runs whole turns without LiteLLM or the OpenAI SDK ever imported.

In a fresh interpreter (the test process itself has long imported both): the stack's
load for an Ollama entry, the warm-up, a turn that calls a tool and answers, a failed
answer heard as its kind, a task's capability lookup, and the shared clients closed.
"""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = "custom_components.langgraph_conversation"

SCRIPT = f"""
import asyncio, json, sys

from {PACKAGE}.stack import _import_modules

_import_modules(litellm=False)

from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver

from {PACKAGE}.agent.errors import TurnError
from {PACKAGE}.agent.events import TextDelta
from {PACKAGE}.agent.models import (
    ModelAccess, ModelSettings, async_release_shared_clients, model_capabilities, warm_up,
)
from {PACKAGE}.agent.runtime import AgentRuntime, AgentSettings, Turn
from fakes import FakeOllamaServer, ToolCall

AGENT = AgentSettings(settings=ModelSettings(), max_tool_rounds=2)
asked = []


async def clock() -> str:
    asked.append("clock")
    return "noon"


TOOL = StructuredTool.from_function(coroutine=clock, name="clock", description="The time.")


async def main() -> dict:
    async with FakeOllamaServer() as server:
        access = ModelAccess("ollama_chat/llama3.2", None, server.base_url)
        await asyncio.to_thread(warm_up, access)
        runtime = AgentRuntime(access, InMemorySaver())
        server.add_tool_calls([ToolCall("clock", {{}})])
        server.add_text("It is noon.")
        turn = Turn(thread_id="t", text="time?", system_prompt="You are a test.", tools=[TOOL])
        events = [event async for event in runtime.run_turn(AGENT, turn)]
        server.add_error(500, "runner crashed")
        try:
            [event async for event in runtime.run_turn(AGENT, turn)]
            kind = None
        except TurnError as err:
            kind = err.kind
        capabilities = await asyncio.to_thread(model_capabilities, access.model)
        await runtime.aclose()
        await async_release_shared_clients()
        return {{
            "text": "".join(e.text for e in events if isinstance(e, TextDelta)),
            "asked": asked,
            "failure": kind,
            "json_mode": capabilities.json_mode,
            "requests": len(server.requests),
        }}


found = asyncio.run(main())
found["loaded"] = sorted(
    m for m in ("litellm", "openai", "langchain_litellm", "tiktoken") if m in sys.modules
)
print(json.dumps(found))
"""


def test_an_ollama_agent_never_imports_litellm(socket_enabled: None) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])

    assert found == {
        "text": "It is noon.",
        "asked": ["clock"],
        "failure": "server",
        "json_mode": True,
        "requests": 3,  # the tool call, the answer, the failed call (no retries set)
        "loaded": [],
    }
