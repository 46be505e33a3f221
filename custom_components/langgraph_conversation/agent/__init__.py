"""The LangGraph agent. Knows nothing about Home Assistant entities.

LiteLLM reads its environment switches at import time, and this package is imported
before any module that imports LiteLLM, so the switches are set here: no network fetch of
the model price map, no `.env` loading, no Anthropic beta-header fetch, and strict
msgpack revival for checkpoints. `setdefault` keeps a user's explicit override.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
import gc
import logging
import os
import threading
from typing import Any

from . import redaction

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")


def freeze_long_lived_objects() -> None:
    """Take every object alive now out of the cyclic garbage collector's reach.

    LiteLLM and the OpenAI SDK bring about 2,000 modules (a few hundred megabytes of
    objects: modules, classes, functions, pydantic schemas) that live as long as the
    process. Each full collection walks all of them: 200-400 ms holding the GIL, so Home
    Assistant's event loop stands still, during the import (in the executor) and later,
    every few turns, on the loop itself. `gc.freeze()` moves the objects that exist now
    to the permanent generation, which collections skip; objects created later are
    collected as always. Nothing in the library stack offers this; it is the standard
    library's own remedy for large long-lived heaps.
    """
    gc.freeze()


# No collection while LiteLLM loads (it would walk a heap that is still growing, holding
# the GIL); the objects are frozen once it has loaded, so none later either.
_COLLECTING = gc.isenabled()
gc.disable()
try:
    import litellm
finally:
    freeze_long_lived_objects()
    if _COLLECTING:
        gc.enable()

litellm.suppress_debug_info = True
litellm.telemetry = False
# LiteLLM's default aiohttp transport treats a connection that drops mid-stream as a
# normal end of the answer, so a cut-off sentence would be spoken as if complete. httpx's
# own transport raises instead, which the runtime turns into a clear error.
litellm.disable_aiohttp_transport = True
# LiteLLM attaches its own stderr handlers; Home Assistant's logging is the only sink.
for _name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
    logging.getLogger(_name).handlers.clear()
# ...and never with an API key in it (LiteLLM logs every call's arguments at DEBUG).
redaction.install()


class LoggingPool(Executor):
    """LiteLLM's success-logging thread pool, owned by us so it can stop with Home Assistant.

    LiteLLM hands the logging of every streamed answer to a module-level pool of up to 100
    non-daemon threads that never exit; Home Assistant then waits its full thread timeout
    at every shutdown. This pool is small, starts threads on demand, and is shut down when
    the last entry unloads or Home Assistant stops (and starts again if used later).
    """

    def __init__(self, max_workers: int = 2) -> None:
        self._max_workers = max_workers
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._max_workers, "litellm_logging")
            return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=wait, cancel_futures=cancel_futures)


LOGGING_POOL = LoggingPool()


def _install_logging_pool() -> None:
    # Both modules bound LiteLLM's pool by name at import; point them at ours.
    from litellm import utils as litellm_utils
    from litellm.litellm_core_utils import streaming_handler

    streaming_handler.executor = litellm_utils.executor = LOGGING_POOL


_install_logging_pool()
