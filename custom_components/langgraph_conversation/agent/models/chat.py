"""Chat models: construction (Ollama's native, ollama_chat.py; every other provider's
through LiteLLM), and the answer's stream, closed when cut short."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from contextvars import ContextVar
import logging
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.runnables import Runnable, RunnableBinding
from langchain_litellm import ChatLiteLLM

from ..upstream import openai_stream
from ..upstream.langchain_litellm import PerCallCredentials
from .access import ModelAccess, ModelSettings, provider_of
from .ollama_chat import OllamaChatModel

_LOGGER = logging.getLogger(__name__)


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


def answer_stream(model: Runnable, messages: list[BaseMessage]) -> AsyncIterator[AIMessageChunk]:
    """Stream `model`'s answer: a ChatModel (bound to tools or not) directly, else astream."""
    bound, kwargs = (
        (model.bound, model.kwargs) if isinstance(model, RunnableBinding) else (model, {})
    )
    if isinstance(bound, (ChatModel, OllamaChatModel)):
        return bound.answer_chunks(messages, **kwargs)
    return model.astream(messages)


def build_chat_model(access: ModelAccess, settings: ModelSettings) -> ChatLiteLLM | OllamaChatModel:
    """Create the LangChain chat model for one agent (done once per configuration):
    Ollama's natively (ollama_chat.py), every other provider's through LiteLLM."""
    if provider_of(access.model) == "ollama_chat":
        return OllamaChatModel(
            model=access.model,
            api_key=access.api_key,
            api_base=access.api_base,
            request_timeout=settings.request_timeout,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            context_window=settings.context_window,
            keep_alive=settings.keep_alive,
            think=settings.think,
        )
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
