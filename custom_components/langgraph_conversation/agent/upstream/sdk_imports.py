"""The modules a first embedding request imports, by their private names.

Behaviour worked around (checked on the OpenAI SDK 2.15.0, 3.10.0 and 3.26.0 and anyio
4.10.0, 4.14.2 and 4.15.1: the releases Home Assistant 2026.2, 2026.10 and 2026.11 pin):
LiteLLM's first `aembedding` call imports about 470 modules on the event loop, most of
the OpenAI SDK's resources, among them private ones: the SDK's embedding response parser
(`openai.lib._parsing._embeddings`), anyio's asyncio backend (`anyio._backends._asyncio`,
imported when the SDK first runs a function in a thread) and LiteLLM's service logger
(`litellm._service_logger`). The warm-up imports them in the executor instead; the 3.x
SDK imports each resource lazily, on a client's first use of it, so its embedding
resource is named too.

The OpenAI SDK and anyio are pinned by Home Assistant itself (package_constraints.txt),
to a different release in each; the manifest cannot pin them without conflicting. On a
release not listed here (one log line says so) only the public module names are imported
ahead; a private module that moved is then imported by the first request, on the loop
(slower once, never wrong).
"""

from __future__ import annotations

from .versions import matches

CHECKED_OPENAI = frozenset({"2.15.0", "3.10.0", "3.26.0"})
CHECKED_ANYIO = frozenset({"4.10.0", "4.14.2", "4.15.1"})
CHECKED_LITELLM = frozenset({"1.83.0"})

PUBLIC_MODULES = ("openai.resources", "openai.resources.embeddings")
OPENAI_PRIVATE = ("openai.lib._parsing._embeddings",)
ANYIO_PRIVATE = ("anyio._backends._asyncio",)
LITELLM_PRIVATE = ("litellm._service_logger",)

_INSTEAD = "the first embedding request imports it on the event loop"
FIRST_EMBEDDING_MODULES: tuple[str, ...] = (
    *PUBLIC_MODULES,
    *(
        OPENAI_PRIVATE
        if matches("openai", CHECKED_OPENAI, "importing the SDK's embedding parser", _INSTEAD)
        else ()
    ),
    *(
        ANYIO_PRIVATE
        if matches("anyio", CHECKED_ANYIO, "importing anyio's asyncio backend", _INSTEAD)
        else ()
    ),
    *(
        LITELLM_PRIVATE
        if matches("litellm", CHECKED_LITELLM, "importing LiteLLM's service logger", _INSTEAD)
        else ()
    ),
)
