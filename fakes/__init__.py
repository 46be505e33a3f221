"""Stand-ins for the servers the integration talks to, on 127.0.0.1, for development only.

Fake model servers that speak the real wire protocols, scripted per test: OpenAI chat
completions (and embeddings, and image generation) and Ollama's /api/chat, and Gemini's
image generation (gemini_server.py), and five providers' web search with their own
citation formats (search_servers.py), reached through LiteLLM's real client.
The tests (tests/), the benchmarks (scripts/bench) and the offline stand-in model
(offline_model.py, run by `scripts/develop --offline-model`, scripts/e2e and
tests/test_install.py) all use them. Besides those fakes, one real server:
postgres_server.py starts a throwaway PostgreSQL (Debian's build, fixed roles, fsync off)
on 127.0.0.1 and a Unix socket, for the tests and bench figure 5 alike.

The Python that several development tools share lives here, never under tests/ (scripts/
never imports the tests) nor under one tool's scripts/<tool>_lib/. A development package at
the repository root, never shipped: HACS and an install copy
custom_components/langgraph_conversation only, and the integration never imports it; it
imports neither the integration, nor the tests, nor Home Assistant (tests/test_layering.py).

async with FakeOpenAIServer() as server:
    server.add_tool_calls([ToolCall("HassTurnOn", {"name": "Kitchen"})])
    server.add_text("Done.")
    ...  # LiteLLM with model="openai/x", api_base=server.api_base
    assert server.requests[1]["messages"][-1]["role"] == "tool"
"""

from .gemini_server import FakeGeminiServer
from .image_script import ImageReply, ImageScript, RawReply, png_image
from .network import FakeResolver, NetworkMode
from .ollama_server import FakeOllamaServer
from .openai_server import FakeOpenAIServer
from .script import AnyReply, ErrorReply, Reply, StreamFault, ToolCall
from .search_servers import FakeSearchServer, search_asked
from .server import FakeModelServer, ReplyTiming

__all__ = [
    "AnyReply",
    "ErrorReply",
    "FakeGeminiServer",
    "FakeModelServer",
    "FakeOllamaServer",
    "FakeOpenAIServer",
    "FakeResolver",
    "FakeSearchServer",
    "ImageReply",
    "ImageScript",
    "NetworkMode",
    "RawReply",
    "Reply",
    "ReplyTiming",
    "StreamFault",
    "ToolCall",
    "png_image",
    "search_asked",
]
