"""Fake model servers on 127.0.0.1 that speak the real wire protocols, scripted per test.

OpenAI chat completions (and embeddings) and Ollama's /api/chat, reached through LiteLLM's
real client: the tests (tests/), the benchmarks (scripts/bench) and the offline stand-in
model (offline_model.py, run by `scripts/develop --offline-model`, scripts/e2e and
tests/test_install.py) all use them. A development package at the repository root, never
shipped: HACS and an install copy custom_components/langgraph_conversation only, and the
integration never imports it (tests/test_layering.py).

async with FakeOpenAIServer() as server:
    server.add_tool_calls([ToolCall("HassTurnOn", {"name": "Kitchen"})])
    server.add_text("Done.")
    ...  # LiteLLM with model="openai/x", api_base=server.api_base
    assert server.requests[1]["messages"][-1]["role"] == "tool"
"""

from .network import FakeResolver, NetworkMode
from .ollama_server import FakeOllamaServer
from .openai_server import FakeOpenAIServer
from .script import AnyReply, ErrorReply, Reply, StreamFault, ToolCall
from .server import FakeModelServer, ReplyTiming

__all__ = [
    "AnyReply",
    "ErrorReply",
    "FakeModelServer",
    "FakeOllamaServer",
    "FakeOpenAIServer",
    "FakeResolver",
    "NetworkMode",
    "Reply",
    "ReplyTiming",
    "StreamFault",
    "ToolCall",
]
