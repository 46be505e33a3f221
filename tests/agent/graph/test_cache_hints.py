"""Provider cache hints: Anthropic gets a cache_control breakpoint after the stable prefix
(tools and system message), and LiteLLM's own Anthropic transformation carries it into
the request body; other providers get a plain system message (their prefix caching is
automatic)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from langchain_litellm.chat_models.litellm import _convert_message_to_dict
from litellm import AnthropicConfig

from custom_components.langgraph_conversation.agent.graph import PromptLayers, TurnContext
from custom_components.langgraph_conversation.agent.graph.graph import _system_prompt


def _context(model: str) -> TurnContext:
    return TurnContext(
        prompt=PromptLayers(base="BASE", instructions="Be kind."),
        model=SimpleNamespace(),  # type: ignore[arg-type]
        chat_model=SimpleNamespace(model=model),  # type: ignore[arg-type]
    )


def test_anthropic_system_message_carries_a_breakpoint_to_the_wire() -> None:
    """The breakpoint survives langchain-litellm's conversion and LiteLLM's transform."""
    system = _system_prompt(_context("anthropic/claude-sonnet-4-5"))
    messages: list[Any] = [
        _convert_message_to_dict(system),
        {"role": "user", "content": "Hello"},
    ]
    body = AnthropicConfig().transform_request(
        "claude-sonnet-4-5", messages, {"max_tokens": 10}, {}, {}
    )
    assert body["system"] == [
        {"type": "text", "text": "BASE\n\nBe kind.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]


def test_other_providers_get_a_plain_system_message() -> None:
    """OpenAI, Gemini and local servers cache prefixes themselves: a plain string."""
    for model in ("openai/gpt-4o", "gemini/gemini-2.5-flash", "ollama_chat/qwen3"):
        assert _system_prompt(_context(model)).content == "BASE\n\nBe kind."
