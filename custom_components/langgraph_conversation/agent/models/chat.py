"""Chat models: one per provider's way (Ollama's native API, ollama_chat.py; every
other provider through LiteLLM, litellm_chat.py), and reading an answer's stream."""

from __future__ import annotations

from collections.abc import AsyncIterator

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.runnables import Runnable, RunnableBinding

from .access import ModelAccess, ModelSettings, provider_of
from .ollama_chat import OllamaChatModel


def needs_litellm(model: str) -> bool:
    """Whether a model is reached through LiteLLM (every provider but Ollama's native API)."""
    return provider_of(model) != "ollama_chat"


def answer_stream(model: Runnable, messages: list[BaseMessage]) -> AsyncIterator[AIMessageChunk]:
    """Stream `model`'s answer: one of ours (bound to tools or not) directly, without
    langchain's per-chunk callbacks, else through astream."""
    bound, kwargs = (
        (model.bound, model.kwargs) if isinstance(model, RunnableBinding) else (model, {})
    )
    answer_chunks = getattr(bound, "answer_chunks", None)
    if answer_chunks is not None:
        return answer_chunks(messages, **kwargs)
    return model.astream(messages)


def build_chat_model(access: ModelAccess, settings: ModelSettings) -> BaseChatModel:
    """Create the LangChain chat model for one agent (done once per configuration)."""
    if not needs_litellm(access.model):
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
    # Loaded with the stack whenever one of its models needs LiteLLM (stack.py).
    from .litellm_chat import build_litellm_chat_model

    return build_litellm_chat_model(access, settings)
