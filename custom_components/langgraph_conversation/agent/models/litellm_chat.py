"""Chat through LiteLLM, for every provider but Ollama's native API: the chat model,
its warm-up, the access check a config flow makes, and closing LiteLLM's shared clients.

Imported only when a configured model needs LiteLLM (stack.py loads it then, in the
executor; a config flow loads it for its checks): an Ollama setup never imports LiteLLM
or the OpenAI SDK (issue #29).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from contextvars import ContextVar
import importlib
import logging
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk

from ..upstream import litellm_lazy, litellm_release, litellm_tokenizer_json, openai_stream
from ..upstream.langchain_litellm import PerCallCredentials
from ..upstream.sdk_imports import FIRST_LITELLM_CHAT_MODULES, import_present
from .access import ModelAccess, ModelSettings, provider_of
from .library import litellm

_LOGGER = logging.getLogger(__name__)

_LOCAL_PROVIDERS = ("ollama", "ollama_chat")


class ChatModel(PerCallCredentials):
    """ChatLiteLLM that keeps its credentials to its own calls (upstream/langchain_litellm.py)
    and closes the streams it opens."""

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        """langchain-litellm's stream, every generator closed by its reader (aclosing):
        an answer cut short would otherwise leave it suspended, for the loop to close."""
        async with aclosing(super()._astream(messages, stop, run_manager, **kwargs)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def answer_chunks(
        self, messages: list[BaseMessage], **kwargs: Any
    ) -> AsyncIterator[AIMessageChunk]:
        """The chunks of one answer, without langchain's per-chunk callback machinery.

        BaseChatModel.astream wraps every chunk for callbacks and tracing (a run manager,
        an event per chunk, a merge of the whole answer for on_llm_end); nothing in this
        integration listens to them, and the graph merges the answer itself once.
        """
        opened: list[Any] = []
        _OPEN_STREAMS.set(opened)
        try:
            async with aclosing(self._astream(messages, **kwargs)) as generations:
                async for generation in generations:
                    message = generation.message
                    if generation.generation_info:
                        message.response_metadata = {
                            **generation.generation_info,
                            **message.response_metadata,
                        }
                    yield message
        finally:
            _OPEN_STREAMS.set(None)
            for stream in opened:
                await _close_stream(stream)

    async def acompletion_with_retry(
        self, run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any
    ) -> Any:
        """LiteLLM's answer, remembered so `answer_chunks` can close its stream, and read
        so that closing it closes the OpenAI SDK's generators too (upstream/openai_stream.py)."""
        stream = await super().acompletion_with_retry(run_manager=run_manager, **kwargs)
        openai_stream.own(stream)
        if (opened := _OPEN_STREAMS.get()) is not None:
            opened.append(stream)
        return stream


# The streams LiteLLM opened for the answer being read in this task. langchain-litellm's
# `_astream` never closes LiteLLM's stream wrapper, so an answer cut short (too long, past
# its deadline) would keep its HTTP response open, and the server generating, until the
# wrapper was garbage collected.
_OPEN_STREAMS: ContextVar[list[Any] | None] = ContextVar("langgraph_open_streams", default=None)


async def _close_stream(stream: Any) -> None:
    """Close a LiteLLM stream wrapper's HTTP response (a finished one: nothing to do)."""
    close = getattr(stream, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except Exception as err:  # noqa: BLE001  closing is best effort, never fatal
        _LOGGER.debug("Closing a model's stream failed: %s", err)


def build_litellm_chat_model(access: ModelAccess, settings: ModelSettings) -> ChatModel:
    """The LangChain chat model of a provider LiteLLM reaches (every one but Ollama's
    native API)."""
    extra: dict[str, Any] = {}
    if settings.temperature is not None:
        extra["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        extra["max_tokens"] = settings.max_tokens
    return ChatModel(
        model=access.model,
        api_key=access.request_key,
        api_base=access.api_base,
        request_timeout=settings.request_timeout,
        streaming=True,
        # Retries are the runtime's decision, not a hidden loop inside a client: 0 for
        # langchain-litellm's tenacity loop, and (via model_kwargs) 0 for the provider
        # SDK's own retries, which would otherwise repeat a failed call twice.
        max_retries=0,
        model_kwargs={"max_retries": 0},
        # Token counts for the turn's record come from the stream's usage chunk.
        # langchain-litellm 0.6 asks every provider for it, 0.5 only OpenAI's own
        # models; ask always (LiteLLM never rejects this option).
        stream_options={"include_usage": True},
        **extra,
    )


def register_local_model(access: ModelAccess) -> None:
    """Tell LiteLLM what a local Ollama model is, so it never asks Ollama at call time.

    LiteLLM looks up every model in its price map; for an Ollama model missing there it
    POSTs to `<ollama>/api/show` with a synchronous HTTP client, from the event loop, at
    every call (and to localhost:11434 whatever the configured base URL). A local model
    costs nothing and, on the chat API, takes tools natively.
    """
    provider, _, name = access.model.partition("/")
    if provider not in _LOCAL_PROVIDERS or not name:
        return
    entry = {
        "litellm_provider": provider,
        "mode": "chat",
        "supports_function_calling": True,
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
    }
    # The bare name first: registering a new key looks it up, and for an Ollama key that
    # LiteLLM does not know yet the lookup POSTs to localhost:11434/api/show (whatever the
    # configured server). Once the bare name is known, the prefixed one is found without.
    litellm.register_model({name: entry})
    litellm.register_model({access.model: entry})


def warm_up_litellm(access: ModelAccess) -> None:
    """A mock streamed completion through LiteLLM, and what its first real call builds
    (blocking: run it in the executor)."""
    register_local_model(access)
    stream = litellm.completion(
        model=access.model,
        messages=[{"role": "user", "content": "hi"}],
        mock_response="ok",
        stream=True,
    )
    for _chunk in stream:
        pass
    # LiteLLM's stream wrapper counts the answer's tokens when a stream ends without
    # usage, with the model's own encoding (o200k for OpenAI's): built here, off the
    # loop (0.7 s, ~70 MB).
    litellm.token_counter(model="gpt-4o", text="warm up")
    # LiteLLM's lazy module attributes, resolved here once instead of on the loop at the
    # first failure (upstream/litellm_lazy.py).
    litellm_lazy.resolve_lazy_attributes()
    if provider_of(access.model) not in _LOCAL_PROVIDERS:
        resolve_openai_chat_resources()
    # What the first real call would still import on the loop: LiteLLM's service logger
    # and its MCP handler (upstream/sdk_imports.py).
    import_present(FIRST_LITELLM_CHAT_MODULES)
    # LiteLLM's parsed tokenizer JSON, never read again (upstream/litellm_tokenizer_json.py).
    litellm_tokenizer_json.drop_parsed_tokenizer()


def resolve_openai_chat_resources() -> None:
    """Import the OpenAI SDK's chat resources now (blocking: run it in the executor).

    openai 3.26 (Home Assistant 2026.11's pin) imports its API resources lazily: the
    client's first request resolves `from .resources.chat import AsyncChat` through the
    package's __getattr__ and a relative import_module, on the event loop. Resolving the
    packages' exports here caches them; earlier versions import them eagerly. Not for
    Ollama, whose calls LiteLLM makes with its own HTTP handler: on openai 3.10 (Home
    Assistant 2026.10's pin) the resources package imports every API of the SDK, 460
    modules and 16 MiB that an Ollama setup never uses (issue #29).
    """
    for package in ("openai.resources.chat", "openai.resources.chat.completions"):
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            getattr(module, name)


async def async_check_litellm_access(access: ModelAccess, timeout: float) -> None:
    """One minimal real request through LiteLLM (its exceptions pass on)."""
    await litellm.acompletion(
        **access.litellm_kwargs(),
        messages=[{"role": "user", "content": "Reply with OK."}],
        max_tokens=5,
        timeout=timeout,
        num_retries=0,
    )


def lacks_key(access: ModelAccess) -> bool:
    """Whether the provider needs a key that neither the call nor the environment has.

    LiteLLM's own check of a model's environment (names of variables it would read a key
    from); names that are not keys (OLLAMA_API_BASE) do not count. Run off the event
    loop: it may import a provider's module on first use.
    """
    try:
        found = litellm.validate_environment(model=access.model, api_base=access.api_base)
    except Exception as err:  # noqa: BLE001  an unknown provider: no verdict on its key
        _LOGGER.debug("LiteLLM cannot tell which key %s needs: %s", access.model, err)
        return False
    missing = found.get("missing_keys") or []
    return any("KEY" in name or "TOKEN" in name for name in missing)


async def async_close_litellm_clients() -> None:
    """Close LiteLLM's cached clients, logging worker and threads (upstream/litellm_release.py)."""
    await litellm_release.close_shared_clients()
