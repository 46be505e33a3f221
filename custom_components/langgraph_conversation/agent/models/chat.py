"""Chat models through LiteLLM: construction, and the answer's stream (lean for Ollama,
closed when cut short), with LiteLLM's token counting paused where nobody reads it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from contextvars import ContextVar
import logging
import threading
from typing import Any

import httpx
from langchain_core import messages as lc_messages
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.runnables import Runnable, RunnableBinding
from langchain_litellm import ChatLiteLLM
from litellm.types.utils import ModelResponseStream

# Imported for its effect: on the LiteLLM version it was written for, Ollama requests
# carry the tool-call history again (see the module).
from ..upstream import litellm_ollama, litellm_stream, openai_stream  # noqa: F401
from ..upstream.langchain_litellm import PerCallCredentials
from .access import LEAN_STREAM_PROVIDERS, ModelAccess, ModelSettings, ollama_options, provider_of
from .library import litellm

_LOGGER = logging.getLogger(__name__)


class ChatModel(PerCallCredentials):
    """ChatLiteLLM that keeps its credentials to its own calls (upstream/langchain_litellm.py)
    and streams cheaply."""

    @property
    def _provider(self) -> str:
        return self.custom_llm_provider or provider_of(self.model_name or self.model)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        """Stream an answer; Ollama's straight from the lines LiteLLM's request returned.

        LiteLLM's stream wrapper (CustomStreamWrapper) re-creates every chunk several times
        over as pydantic objects, rebuilds the whole answer at the end for its logging and
        cost machinery, and langchain-litellm then dumps each chunk back to a dict: about
        8 ms of CPU per answer on the event loop, more than Home Assistant's own Ollama
        agent spends on a whole turn. Neither library has a switch for a lean stream. For
        `ollama_chat` LiteLLM's Ollama parser inside the wrapper is read directly
        (upstream/litellm_stream.py), and plain text lines (nearly all of them)
        become chunks without the parser's four pydantic objects per line. Everything else
        (the request and its transformation, credentials, the HTTP client, tool calls,
        reasoning, the final line with usage, error lines) stays LiteLLM's, and a failure
        mid-stream is mapped by the wrapper's own error handling, so `classify_error` sees
        what it saw before. Other providers take langchain-litellm's path unchanged.
        """
        # Every generator read here is closed by its reader (aclosing): an answer cut
        # short would otherwise leave it suspended, for the event loop to close later.
        if self._provider not in LEAN_STREAM_PROVIDERS:
            async with aclosing(super()._astream(messages, stop, run_manager, **kwargs)) as chunks:
                async for chunk in chunks:
                    yield chunk
            return
        async with aclosing(self._lean_messages(messages, stop, **kwargs)) as lean:
            async for message in lean:
                generation = ChatGenerationChunk(message=message)
                if run_manager:
                    await run_manager.on_llm_new_token(message.text, chunk=generation)
                yield generation

    async def _lean_messages(
        self, messages: list[BaseMessage], stop: list[str] | None, **kwargs: Any
    ) -> AsyncIterator[AIMessageChunk]:
        """The lean stream of `_astream`, as message chunks."""
        message_dicts, params = self.request(messages, stop)
        params = {**params, **kwargs, "stream": True}
        if self.stream_options is not None:
            params["stream_options"] = self.stream_options
        with NO_TOKEN_COUNTING:
            # Straight to LiteLLM (langchain-litellm's client is the litellm module): its
            # tenacity wrapper would add nothing, retries are the graph's (max_retries=0).
            wrapper = await litellm.acompletion(messages=message_dicts, **params)
        raw = litellm_stream.lean_source(wrapper)
        if raw is None:
            openai_stream.own(wrapper)
        try:
            chunks = _wrapped_chunks(wrapper) if raw is None else _ollama_chunks(raw)
            async with aclosing(chunks):
                async for message in chunks:
                    yield message
        except httpx.TimeoutException:
            raise  # the wrapper passes timeouts on unchanged too
        except Exception as err:
            if raw is None:
                raise
            litellm_stream.raise_mapped(wrapper, err)
        finally:
            # An answer cut short must not leave its HTTP response open.
            if raw is not None:
                await litellm_stream.close_response(raw)
            await _close_stream(wrapper)

    async def answer_chunks(
        self, messages: list[BaseMessage], **kwargs: Any
    ) -> AsyncIterator[AIMessageChunk]:
        """The chunks of one answer, without langchain's per-chunk callback machinery.

        BaseChatModel.astream wraps every chunk for callbacks and tracing (a run manager,
        an event per chunk, a merge of the whole answer for on_llm_end); nothing in this
        integration listens to them, and the graph merges the answer itself once.
        """
        if self._provider in LEAN_STREAM_PROVIDERS:
            async with aclosing(self._lean_messages(messages, None, **kwargs)) as lean:
                async for message in lean:
                    yield message
            return
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
    if isinstance(bound, ChatModel):
        return bound.answer_chunks(messages, **kwargs)
    return model.astream(messages)


async def _wrapped_chunks(wrapper: Any) -> AsyncIterator[AIMessageChunk]:
    async for chunk in wrapper:
        if (message := _message_chunk(chunk)) is not None:
            yield message


async def _ollama_chunks(raw: Any) -> AsyncIterator[AIMessageChunk]:
    """Chunks of an Ollama /api/chat stream, as LiteLLM's parser would produce them."""
    async with aclosing(litellm_stream.ollama_stream(raw)) as items:
        async for item in items:
            if isinstance(item, str):
                yield AIMessageChunk(content=item)
            elif (message := _message_chunk(item)) is not None:
                yield message


def _message_chunk(chunk: Any) -> AIMessageChunk | None:
    """One LiteLLM stream chunk as a LangChain chunk (None for keep-alive lines).

    Plain dicts and strings only, as langchain-litellm's own conversion leaves them, so
    checkpoints stay revivable under strict msgpack.
    """
    if not isinstance(chunk, ModelResponseStream) or not chunk.choices:
        return None
    choice = chunk.choices[0]
    delta = choice.delta
    additional: dict[str, Any] = {}
    if reasoning := getattr(delta, "reasoning_content", None):
        additional["reasoning_content"] = reasoning
    calls = []
    if delta.tool_calls:
        additional["tool_calls"] = [
            {
                "id": call.id,
                "function": {"arguments": call.function.arguments, "name": call.function.name},
                "type": call.type or "function",
                "index": call.index,
            }
            for call in delta.tool_calls
        ]
        calls = [
            tool_call_chunk(
                name=call["function"]["name"],
                args=call["function"]["arguments"],
                id=call["id"],
                index=call["index"],
            )
            for call in additional["tool_calls"]
        ]
    message = AIMessageChunk(
        content=delta.content or "", additional_kwargs=additional, tool_call_chunks=calls
    )
    usage = getattr(chunk, "usage", None)
    if choice.finish_reason and usage is not None and usage.total_tokens:
        message.usage_metadata = lc_messages.UsageMetadata(
            input_tokens=usage.prompt_tokens or 0,
            output_tokens=usage.completion_tokens or 0,
            total_tokens=(usage.prompt_tokens or 0) + (usage.completion_tokens or 0),
        )
    return message


def build_chat_model(access: ModelAccess, settings: ModelSettings) -> ChatLiteLLM:
    """Create the LangChain chat model for one agent (done once per configuration)."""
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
        model_kwargs={"max_retries": 0, **ollama_options(access, settings)},
        **extra,
    )


class _TokenCountingPause:
    """LiteLLM's token counting, off while lean-stream calls are being set up.

    For every streamed call LiteLLM estimates a cost by counting the prompt's tokens
    with tiktoken, on the event loop: work nobody reads for a local model, and the only
    reason the default encoding would be built. `litellm.disable_token_counter` is
    LiteLLM's documented switch for it, but a process-wide one; so it is on only while
    a lean call is inside `litellm.acompletion` (where the estimate happens), and
    restored when the last such call is through. Re-entrant and thread-safe: turns
    overlap on the loop, and the warm-up runs in the executor.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._previous = False

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._previous = litellm.disable_token_counter
                litellm.disable_token_counter = True
            self._depth += 1

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                litellm.disable_token_counter = self._previous


NO_TOKEN_COUNTING = _TokenCountingPause()
