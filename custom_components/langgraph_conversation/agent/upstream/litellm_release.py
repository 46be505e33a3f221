"""What LiteLLM keeps running between calls, owned and released by us.

Behaviour worked around (checked on LiteLLM 1.83.0):

- Logging threads. LiteLLM hands the logging of every streamed answer, and of every
  answer not streamed (a web search's), to a module-level pool of up to 100 non-daemon
  threads that never exit (`executor` of `litellm.litellm_core_utils.thread_pool_executor`,
  bound by name at import as `litellm.utils.executor`,
  `litellm.litellm_core_utils.streaming_handler.executor` and
  `litellm.litellm_core_utils.litellm_logging.executor`);
  Home Assistant then waits its full thread timeout at every shutdown. Both names are
  pointed at LoggingPool, a small pool that starts threads on demand and is shut down when
  the last entry unloads or Home Assistant stops (and starts again if used later).
- A logging worker task (`litellm_core_utils.logging_worker.GLOBAL_LOGGING_WORKER`),
  started on the loop of the first call and never stopped: its `stop()` is awaited.
- Cached HTTP clients (`litellm.in_memory_llm_clients_cache`). LiteLLM's own closing
  helper (`llms.custom_httpx.async_client_cleanup.close_litellm_async_clients`) closes its
  httpx handlers but skips the OpenAI SDK's clients (AsyncOpenAI and friends), whose
  sessions would be dropped unclosed; those are closed here, then the cache is emptied
  (`cache_dict`, `flush_cache()`) so a closed client is never handed out again.

LiteLLM offers no public way to do any of this. On another version nothing is replaced
or closed (one log line says so): LiteLLM's own pool stays (shutdown waits for it) and its
clients stay open until the process ends. That is slower to stop, never unsafe: no closed
client can be handed out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
import inspect
import logging
import threading
from typing import Any

import litellm
from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER
from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

from .versions import matches

_LOGGER = logging.getLogger(__name__)

CHECKED_VERSIONS = frozenset({"1.83.0"})
ACTIVE = matches(
    "litellm",
    CHECKED_VERSIONS,
    "the release of LiteLLM's logging threads and cached clients",
    "LiteLLM's own logging pool stays (Home Assistant may wait for it at shutdown) and "
    "its clients stay open until Home Assistant stops",
)


class LoggingPool(Executor):
    """LiteLLM's success-logging thread pool, owned by us so it can stop with Home Assistant."""

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
    # The modules bound LiteLLM's pool by name at import; point them at ours.
    from litellm import utils as litellm_utils
    from litellm.litellm_core_utils import litellm_logging, streaming_handler

    streaming_handler.executor = litellm_utils.executor = LOGGING_POOL
    # Answers not streamed log through this one (Logging's sync success callbacks).
    litellm_logging.executor = LOGGING_POOL


if ACTIVE:
    _install_logging_pool()


async def close_shared_clients() -> None:
    """Stop LiteLLM's logging worker and threads and close its cached clients.

    Only on the checked version (otherwise nothing, see the module); the caller makes sure
    no call is using the clients meanwhile (agent/models/client_users.py).
    """
    if not ACTIVE:
        return
    await GLOBAL_LOGGING_WORKER.stop()
    await asyncio.to_thread(LOGGING_POOL.shutdown)
    await close_litellm_async_clients()
    cached = getattr(litellm.in_memory_llm_clients_cache, "cache_dict", {})
    for client in list(cached.values()):
        close = getattr(client, "close", None)
        if inspect.iscoroutinefunction(close):
            try:
                await close()
            except Exception as err:  # noqa: BLE001  closing is best effort, never fatal
                _LOGGER.debug("Closing a LiteLLM client failed: %s", err)
    litellm.in_memory_llm_clients_cache.flush_cache()
