"""ChatModel's lean Ollama stream: the same answers as langchain-litellm's own path, cheaper;
and LiteLLM's token counting (tiktoken) only once some model needs it.

Both paths run against the fake Ollama server through LiteLLM's real client; the lean
one must give LangGraph the same content, tool calls and extra fields, add the token
usage Ollama reports, keep to plain data (checkpoints are strict msgpack), and fail
the same way when the stream breaks.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessageChunk, HumanMessage, SystemMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
import litellm
from litellm import main as litellm_main
from litellm._lazy_imports import _get_default_encoding
import pytest

from custom_components.langgraph_conversation.agent.errors import ModelErrorKind
from custom_components.langgraph_conversation.agent.models import (
    ModelAccess,
    ModelSettings,
    classify_error,
    warm_up,
)
from custom_components.langgraph_conversation.agent.models.chat import (
    NO_TOKEN_COUNTING,
    ChatModel,
    build_chat_model,
)
from fakes import FakeOllamaServer, ToolCall

PROMPT = [SystemMessage("You control a home."), HumanMessage("Turn on the kitchen light.")]


async def _never_called(**_arguments: Any) -> None:
    """Binding a tool never runs it."""


TOOLS = [
    StructuredTool(
        name=name,
        description=f"{name} for tests",
        args_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        coroutine=_never_called,
    )
    for name in ("HassTurnOn", "HassTurnOff")
]


class WrappedStreamModel(ChatModel):
    """The reference: the same model on langchain-litellm's path through LiteLLM's wrapper."""

    @property
    def _provider(self) -> str:
        return "reference"


def _models(server: FakeOllamaServer, timeout: float = 60) -> tuple[ChatModel, ChatModel]:
    access = ModelAccess(model="ollama_chat/llama3.2", api_base=server.base_url)
    lean = build_chat_model(access, ModelSettings(request_timeout=timeout))
    assert isinstance(lean, ChatModel)
    reference = WrappedStreamModel(
        model=access.model,
        api_base=access.api_base,
        request_timeout=timeout,
        streaming=True,
        max_retries=0,
        model_kwargs={"max_retries": 0},
    )
    return lean, reference


async def _stream(model: ChatModel) -> tuple[AIMessageChunk, int]:
    total: AIMessageChunk | None = None
    count = 0
    async for chunk in model.bind_tools(TOOLS).astream(PROMPT):
        assert isinstance(chunk, AIMessageChunk)
        count += 1
        total = chunk if total is None else total + chunk
    assert total is not None
    return total, count


def _comparable(message: AIMessageChunk) -> dict[str, Any]:
    """What LangGraph keeps of an answer, without the per-call random ids."""
    calls = message.additional_kwargs.get("tool_calls", [])
    return {
        "content": message.content,
        "tool_calls": [(c["name"], c["args"]) for c in message.tool_calls],
        "invalid_tool_calls": message.invalid_tool_calls,
        "extra_keys": sorted(message.additional_kwargs),
        "raw_calls": [{**c, "id": bool(c["id"])} for c in calls],
    }


@pytest.mark.parametrize(
    "script",
    [
        pytest.param(lambda s: s.add_text("It is 21 degrees in the kitchen."), id="text"),
        pytest.param(
            lambda s: s.add_text("<think>Which room?</think>The kitchen.", chunk_size=40),
            id="think_tags",
        ),
        pytest.param(
            lambda s: s.add_tool_calls(
                [ToolCall("HassTurnOn", {"name": "Kitchen"}), ToolCall("HassTurnOff", {})]
            ),
            id="two_tool_calls",
        ),
        pytest.param(
            lambda s: s.add_text("Sure, turning it on.", tool_calls=(ToolCall("HassTurnOn"),)),
            id="text_and_tool_call",
        ),
        pytest.param(lambda s: s.add_invalid_json_chunk("Half"), id="invalid_json_line"),
    ],
)
async def test_lean_stream_matches_langchain_litellm(
    ollama_server: FakeOllamaServer, script: Any
) -> None:
    lean, reference = _models(ollama_server)
    script(ollama_server)
    expected, _ = await _stream(reference)
    script(ollama_server)
    actual, _ = await _stream(lean)

    assert _comparable(actual) == _comparable(expected)
    assert len({c["id"] for c in actual.tool_calls}) == len(actual.tool_calls)
    # Both requests were the same request.
    first, second = ollama_server.requests[-2:]
    assert first == second


async def test_lean_stream_reports_usage_and_stays_plain(
    ollama_server: FakeOllamaServer,
) -> None:
    lean, _ = _models(ollama_server)
    ollama_server.add_text(
        "Done.", tool_calls=(ToolCall("HassTurnOn", {"name": "Kitchen"}),), prompt_tokens=42
    )
    ollama_server.add_text("Done.", completion_tokens=3, prompt_tokens=40)
    message, count = await _stream(lean)

    assert count >= 3
    assert message.usage_metadata is not None
    assert message.usage_metadata["input_tokens"] == 42
    assert message.usage_metadata["total_tokens"] == 42 + message.usage_metadata["output_tokens"]
    # Strict msgpack revives plain data only: the extra fields must survive a round trip.
    serde = JsonPlusSerializer()
    assert serde.loads_typed(serde.dumps_typed(message.additional_kwargs)) == (
        message.additional_kwargs
    )
    message, _ = await _stream(lean)
    assert message.usage_metadata == {"input_tokens": 40, "output_tokens": 3, "total_tokens": 43}


@pytest.mark.parametrize(
    ("script", "kind"),
    [
        (lambda s: s.add_broken_stream("Partial ans"), ModelErrorKind.CONNECTION),
        (lambda s: s.add_error(500, "scripted failure"), ModelErrorKind.SERVER),
        (lambda s: s.add_error(404, "no such model"), ModelErrorKind.MODEL_NOT_FOUND),
    ],
)
async def test_lean_stream_fails_like_langchain_litellm(
    ollama_server: FakeOllamaServer, script: Any, kind: ModelErrorKind
) -> None:
    lean, reference = _models(ollama_server)
    errors = []
    for model in (reference, lean):
        script(ollama_server)
        with pytest.raises(Exception) as caught:  # noqa: PT011  classified below
            await _stream(model)
        errors.append(caught.value)

    assert [classify_error(err) for err in errors] == [kind, kind]
    assert type(errors[1]) is type(errors[0])


async def test_lean_stream_times_out_like_langchain_litellm(
    ollama_server: FakeOllamaServer,
) -> None:
    """A model that stops sending mid-answer runs into the read timeout on both paths."""
    lean, reference = _models(ollama_server, timeout=0.3)
    errors = []
    for model in (reference, lean):
        ollama_server.add_text("Slow words here", chunk_size=5, chunk_delay=1.0)
        with pytest.raises(Exception) as caught:  # noqa: PT011  classified below
            await _stream(model)
        errors.append(caught.value)

    assert [classify_error(err) for err in errors] == [ModelErrorKind.TIMEOUT] * 2
    assert type(errors[1]) is type(errors[0])


def test_token_counting_is_paused_only_inside_lean_calls() -> None:
    assert litellm.token_counter(model="gpt-4o", text="one two three") == 3
    with NO_TOKEN_COUNTING:
        with NO_TOKEN_COUNTING:  # turns overlap
            assert litellm.token_counter(model="gpt-4o", text="one two three") == 0
        assert litellm.token_counter(model="gpt-4o", text="one two three") == 0
    assert litellm.token_counter(model="gpt-4o", text="one two three") == 3


async def test_a_lean_turn_leaves_token_counting_on(ollama_server: FakeOllamaServer) -> None:
    lean, _ = _models(ollama_server)
    ollama_server.add_text("Done.")
    await _stream(lean)

    assert litellm.disable_token_counter is False
    assert litellm.token_counter(model="gpt-4o", text="one two three") == 3


def test_encoding_on_demand_is_litellm_default_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(litellm_main, "_encoding_cache", None)
    warm_up(ModelAccess(model="ollama_chat/llama3.2", api_base="http://127.0.0.1:9"))

    stand_in = litellm_main._get_encoding()  # what LiteLLM hands its calls
    text = "Turn on the kitchen light, please."
    assert stand_in.encode(text) == _get_default_encoding().encode(text)
    assert stand_in.name == "cl100k_base"
