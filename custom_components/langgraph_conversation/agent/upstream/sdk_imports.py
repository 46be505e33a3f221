"""The modules a first embedding request, or a first chat call, imports, by their private
names.

Behaviour worked around (checked on the OpenAI SDK 2.15.0, 3.10.0 and 3.26.0 and anyio
4.10.0, 4.14.2 and 4.15.1: the releases Home Assistant 2026.2, 2026.10 and 2026.11 pin;
LiteLLM 1.83.0): LiteLLM's first `aembedding` call imports about 470 modules on the event
loop, most of the OpenAI SDK's resources, among them private ones: the 3.x SDK's
embedding response parser (`openai.lib._parsing._embeddings`; 2.15.0 has none), anyio's
asyncio backend (`anyio._backends._asyncio`, imported when the SDK first runs a function
in a thread) and LiteLLM's service logger (`litellm._service_logger`). The warm-up imports
them in the executor instead; the 3.x SDK imports each resource lazily, on a client's
first use of it, so its embedding resource is named too.
A first streamed chat call through langchain-litellm (checked on LiteLLM 1.83.0 and
langchain-core 1.3) imports anyio's backend and LiteLLM's service logger too, with its
Prometheus services integration, its MCP tool handler for chat completions (a call with
tools checks them for MCP tools; it imports `litellm.proxy._experimental.mcp_server`), and
langchain-core's tracers (its callback manager sets them up on the first run): about 20 ms
on the event loop, on the first turn after a start. An Ollama model's first call
(agent/models/ollama_chat.py) imports the tracers and anyio's backend only.
The warm-up imports them in the executor instead (FIRST_CHAT_MODULES, and
FIRST_LITELLM_CHAT_MODULES for a model LiteLLM serves).

The OpenAI SDK and anyio are pinned by Home Assistant itself (package_constraints.txt),
to a different release in each; the manifest cannot pin them without conflicting. On a
release not listed here (one log line says so) its private modules are left out and only
the public names are imported ahead; what moved is then imported by the first request,
on the loop (slower once, never wrong).
"""

from __future__ import annotations

import importlib
import logging

from .versions import installed, matches

_LOGGER = logging.getLogger(__name__)

# The OpenAI SDK's private modules its embedding resource imports, per checked release.
OPENAI_PRIVATE: dict[str, tuple[str, ...]] = {
    "2.15.0": (),  # parses an embedding response inside the resource itself
    "3.10.0": ("openai.lib._parsing._embeddings",),
    "3.26.0": ("openai.lib._parsing._embeddings",),
}
CHECKED_OPENAI = frozenset(OPENAI_PRIVATE)
CHECKED_ANYIO = frozenset({"4.10.0", "4.14.2", "4.15.1"})
CHECKED_LITELLM = frozenset({"1.83.0"})

PUBLIC_MODULES = ("openai.resources", "openai.resources.embeddings")
ANYIO_PRIVATE = ("anyio._backends._asyncio",)
LITELLM_PRIVATE = ("litellm._service_logger",)


def _first_call_modules(
    call: str, public: tuple[str, ...], litellm_private: tuple[str, ...], *, sdk_parser: bool
) -> tuple[str, ...]:
    """`public`, then each library's private modules where its release is a checked one
    (the SDK's embedding parser only for `sdk_parser`)."""
    instead = f"the first {call} imports its private modules on the event loop"
    modules = list(public)
    if sdk_parser and matches(
        "openai", CHECKED_OPENAI, "importing the SDK's embedding modules", instead
    ):
        modules += OPENAI_PRIVATE[installed("openai")]
    if matches("anyio", CHECKED_ANYIO, "importing anyio's asyncio backend", instead):
        modules += ANYIO_PRIVATE
    if matches("litellm", CHECKED_LITELLM, "importing LiteLLM's service logger", instead):
        modules += litellm_private
    return tuple(modules)


FIRST_EMBEDDING_MODULES = _first_call_modules(
    "embedding request", PUBLIC_MODULES, LITELLM_PRIVATE, sdk_parser=True
)


# A first streamed chat call's modules besides the provider's (which LiteLLM's own warm-up
# call imports): public ones first, imported when present, then the checked private ones.
CHAT_PUBLIC_MODULES = (
    "langchain_core.env",
    "langchain_core.tracers.context",
    "langchain_core.tracers.langchain",
    "langchain_core.tracers.run_collector",
    "langchain_core.tracers.stdout",
    "langchain_core.messages.block_translators.langchain_v0",
    "langsmith.run_helpers",
)
FIRST_CHAT_MODULES = _first_call_modules("chat call", CHAT_PUBLIC_MODULES, (), sdk_parser=False)
# A first chat call through LiteLLM also imports its Prometheus services, its service
# logger, and its MCP handler with the private server utilities that imports.
LITELLM_CHAT_PUBLIC_MODULES = ("litellm.integrations.prometheus_services",)
LITELLM_CHAT_PRIVATE = (*LITELLM_PRIVATE, "litellm.responses.mcp.chat_completions_handler")
FIRST_LITELLM_CHAT_MODULES = _first_call_modules(
    "chat call through LiteLLM", LITELLM_CHAT_PUBLIC_MODULES, LITELLM_CHAT_PRIVATE, sdk_parser=False
)


def import_present(names: tuple[str, ...]) -> None:
    """Import each module that this install has (blocking: the executor). A public module
    may move in a release: then the first call imports what replaced it, once, as before."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            _LOGGER.debug("No module %s to import ahead", name)
