"""Contract of agent/upstream/litellm_release.py: LiteLLM's logging pool names, its logging
worker and its client cache, and that closing them leaves nothing open."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
import inspect

import litellm
from litellm import utils as litellm_utils
from litellm.litellm_core_utils import litellm_logging, streaming_handler, thread_pool_executor
from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER
from litellm.llms.custom_httpx import async_client_cleanup
import openai

from custom_components.langgraph_conversation.agent.upstream import (
    litellm_release,
    openai_stream,
    versions,
)
from custom_components.langgraph_conversation.agent.upstream.litellm_release import (
    LOGGING_POOL,
)
from fakes import FakeOpenAIServer

from ...conftest import TEST_KEY


def test_the_installed_litellm_is_the_checked_one() -> None:
    """An upgrade lands here first: review agent/upstream/litellm_release.py for it."""
    assert versions.installed("litellm") in litellm_release.CHECKED_VERSIONS
    assert litellm_release.ACTIVE


def test_litellms_logging_pool_is_replaced_under_every_name() -> None:
    # LiteLLM's own pool still exists where the modules took it from...
    assert isinstance(thread_pool_executor.executor, ThreadPoolExecutor)
    # ...and every name it was bound to is ours.
    assert streaming_handler.executor is LOGGING_POOL
    assert litellm_utils.executor is LOGGING_POOL
    assert litellm_logging.executor is LOGGING_POOL


async def test_an_answer_not_streamed_logs_on_our_pool() -> None:
    """A non-streamed call (the web search's) hands its success logging to a pool too.

    LiteLLM hands it over only while a synchronous success callback is registered (which
    depends on what else ran in the process): one is registered here, so the hand-over
    happens and must reach our pool."""
    LOGGING_POOL.shutdown()

    def callback(*_args: object, **_kwargs: object) -> None:
        """A synchronous success callback: its presence makes LiteLLM hand over."""

    litellm.success_callback.append(callback)
    try:
        response = await litellm.acompletion(
            model="gpt-4o", messages=[{"role": "user", "content": "Hi"}], mock_response="Hello."
        )
        assert response.choices[0].message.content == "Hello."
        assert LOGGING_POOL._pool is not None
        LOGGING_POOL.shutdown()
    finally:
        litellm.success_callback.remove(callback)
    assert LOGGING_POOL._pool is None


def test_a_streamed_answer_logs_on_our_pool() -> None:
    LOGGING_POOL.shutdown()
    stream = litellm.completion(
        model="gpt-4o",
        messages=[{"role": "user", "content": "Hi"}],
        mock_response="Hello.",
        stream=True,
    )
    for _chunk in stream:
        pass
    assert LOGGING_POOL._pool is not None  # started on demand by LiteLLM's success logging
    LOGGING_POOL.shutdown()
    assert LOGGING_POOL._pool is None


def test_the_members_closed_keep_their_shape() -> None:
    assert inspect.iscoroutinefunction(GLOBAL_LOGGING_WORKER.stop)
    assert hasattr(GLOBAL_LOGGING_WORKER, "_worker_task")
    assert inspect.iscoroutinefunction(async_client_cleanup.close_litellm_async_clients)
    cache = litellm.in_memory_llm_clients_cache
    assert isinstance(cache.cache_dict, dict)
    assert callable(cache.flush_cache)


async def test_closing_leaves_no_client_open_and_none_cached(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.add_text("Hello.")
    stream = await litellm.acompletion(
        model="openai/gpt-test",
        api_key=TEST_KEY,
        api_base=openai_server.api_base,
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
    )
    # Read and closed as the agent reads and closes every answer (models/chat.py): read
    # plainly, the SDK's stream leaves its generators for the event loop to close in tasks
    # of their own, later (upstream/openai_stream.py), which outlived this test on a busy
    # machine.
    openai_stream.own(stream)
    async for _chunk in stream:
        pass
    await stream.aclose()
    cached = list(litellm.in_memory_llm_clients_cache.cache_dict.values())
    sdk_clients = [c for c in cached if isinstance(c, openai.AsyncOpenAI)]
    assert sdk_clients  # LiteLLM caches the SDK's client, which its own helper skips
    GLOBAL_LOGGING_WORKER.start()  # as LiteLLM's logging does on the loop's first use
    assert GLOBAL_LOGGING_WORKER._worker_task is not None

    await litellm_release.close_shared_clients()

    assert all(client.is_closed() for client in sdk_clients)
    assert not litellm.in_memory_llm_clients_cache.cache_dict
    assert GLOBAL_LOGGING_WORKER._worker_task is None
    assert LOGGING_POOL._pool is None
