"""Ollama's native chat model (agent/models/ollama_chat.py) against LiteLLM's path.

Both run against the fake Ollama server; LiteLLM's `ollama_chat` provider through
langchain-litellm (the path every Ollama answer took before) is the reference. The
native model must send the same request, give LangGraph the same content, tool calls
and extra fields, add the token usage Ollama reports, keep to plain data (checkpoints
are strict msgpack), and fail with the same kind of error when the stream breaks; and
where LiteLLM 1.83.0 lost a tool round's history on the wire, keep it.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import replace
import json
import random
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
import pytest

from custom_components.langgraph_conversation.agent.errors import ModelErrorKind
from custom_components.langgraph_conversation.agent.models import (
    ModelAccess,
    ModelSettings,
    classify_error,
)
from custom_components.langgraph_conversation.agent.models.chat import build_chat_model
from custom_components.langgraph_conversation.agent.models.litellm_chat import ChatModel
from custom_components.langgraph_conversation.agent.models.ollama_chat import OllamaChatModel
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


def _models(server: FakeOllamaServer, timeout: float = 60) -> tuple[OllamaChatModel, ChatModel]:
    access = ModelAccess(model="ollama_chat/llama3.2", api_base=server.base_url)
    native = build_chat_model(access, ModelSettings(request_timeout=timeout))
    assert isinstance(native, OllamaChatModel)
    reference = ChatModel(
        model=access.model,
        api_base=access.api_base,
        request_timeout=timeout,
        streaming=True,
        max_retries=0,
        model_kwargs={"max_retries": 0},
    )
    return native, reference


async def _stream(model: Any, prompt: list[Any] = PROMPT) -> tuple[AIMessageChunk, int]:
    total: AIMessageChunk | None = None
    count = 0
    async for chunk in model.bind_tools(TOOLS).astream(prompt):
        assert isinstance(chunk, AIMessageChunk)
        count += 1
        total = chunk if total is None else total + chunk
    assert total is not None
    return total, count


def _comparable(message: AIMessageChunk) -> dict[str, Any]:
    """What LangGraph keeps of an answer, without the calls' ids (random; LiteLLM gives
    a call that comes with text none at all, the native model always one)."""
    calls = message.additional_kwargs.get("tool_calls", [])
    return {
        "content": message.content,
        "tool_calls": [(c["name"], c["args"]) for c in message.tool_calls],
        "invalid_tool_calls": message.invalid_tool_calls,
        "extra_keys": sorted(message.additional_kwargs),
        "raw_calls": [{k: v for k, v in c.items() if k != "id"} for c in calls],
    }


def _request(body: dict[str, Any]) -> dict[str, Any]:
    """A request without the empty image lists LiteLLM adds to every message."""
    messages = [{k: v for k, v in m.items() if v != [] or k != "images"} for m in body["messages"]]
    return {**body, "messages": messages}


@pytest.mark.parametrize(
    "script",
    [
        pytest.param(lambda s: s.add_text("It is 21 degrees in the kitchen."), id="text"),
        pytest.param(
            lambda s: s.add_text("Sure, turning it on.", tool_calls=(ToolCall("HassTurnOn"),)),
            id="text_and_tool_call",
        ),
        pytest.param(lambda s: s.add_invalid_json_chunk("Half"), id="invalid_json_line"),
    ],
)
async def test_answers_match_litellms(ollama_server: FakeOllamaServer, script: Any) -> None:
    native, reference = _models(ollama_server)
    script(ollama_server)
    expected, _ = await _stream(reference)
    script(ollama_server)
    actual, _ = await _stream(native)

    assert _comparable(actual) == _comparable(expected)
    assert all(call["id"] for call in actual.tool_calls)
    # Both requests were the same request.
    first, second = ollama_server.requests[-2:]
    assert _request(second) == _request(first)


async def test_answers_report_usage_and_stay_plain(
    ollama_server: FakeOllamaServer,
) -> None:
    native, _ = _models(ollama_server)
    ollama_server.add_text(
        "Done.", tool_calls=(ToolCall("HassTurnOn", {"name": "Kitchen"}),), prompt_tokens=42
    )
    ollama_server.add_text("Done.", completion_tokens=3, prompt_tokens=40)
    message, count = await _stream(native)

    assert count >= 3
    assert message.usage_metadata is not None
    assert message.usage_metadata["input_tokens"] == 42
    assert message.usage_metadata["total_tokens"] == 42 + message.usage_metadata["output_tokens"]
    # Strict msgpack revives plain data only: the extra fields must survive a round trip.
    serde = JsonPlusSerializer()
    assert serde.loads_typed(serde.dumps_typed(message.additional_kwargs)) == (
        message.additional_kwargs
    )
    message, _ = await _stream(native)
    assert message.usage_metadata == {"input_tokens": 40, "output_tokens": 3, "total_tokens": 43}


@pytest.mark.parametrize(
    ("script", "kind"),
    [
        (lambda s: s.add_broken_stream("Partial ans"), ModelErrorKind.CONNECTION),
        (lambda s: s.add_error(500, "scripted failure"), ModelErrorKind.SERVER),
        (lambda s: s.add_error(404, "no such model"), ModelErrorKind.MODEL_NOT_FOUND),
    ],
)
async def test_failures_are_litellms_kinds(
    ollama_server: FakeOllamaServer, script: Any, kind: ModelErrorKind
) -> None:
    native, reference = _models(ollama_server)
    errors = []
    for model in (reference, native):
        script(ollama_server)
        with pytest.raises(Exception) as caught:  # noqa: PT011  classified below
            await _stream(model)
        errors.append(caught.value)

    assert [classify_error(err) for err in errors] == [kind, kind]


async def test_a_stalled_answer_times_out_as_through_litellm(
    ollama_server: FakeOllamaServer,
) -> None:
    """A model that stops sending mid-answer runs into the read timeout on both paths."""
    native, reference = _models(ollama_server, timeout=0.3)
    errors = []
    for model in (reference, native):
        ollama_server.add_text("Slow words here", chunk_size=5, chunk_delay=1.0)
        with pytest.raises(Exception) as caught:  # noqa: PT011  classified below
            await _stream(model)
        errors.append(caught.value)

    assert [classify_error(err) for err in errors] == [ModelErrorKind.TIMEOUT] * 2


def _value(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON value, as an untrusted model may put in a tool call's arguments."""
    kinds = ["str", "int", "float", "bool", "null"] + (["list", "dict"] if depth < 2 else [])
    kind = rng.choice(kinds)
    if kind == "str":
        return "".join(rng.choice('aé "\\{}[]:,ü\n') for _ in range(rng.randint(0, 8)))
    if kind == "int":
        return rng.randint(-(10**12), 10**12)
    if kind == "float":
        return rng.uniform(-1e6, 1e6)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {f"k{i}": _value(rng, depth + 1) for i in range(rng.randint(0, 3))}


@pytest.mark.parametrize("seed", range(6))
async def test_a_tool_rounds_history_reaches_ollama_whole(
    ollama_server: FakeOllamaServer, seed: int
) -> None:
    """Each call with its arguments as an object and its id; each result with the id of the
    call it answers and the tool's name (LiteLLM 1.83.0 sent neither)."""
    rng = random.Random(seed)
    native, _ = _models(ollama_server)
    history: list[Any] = list(PROMPT)
    expected: list[tuple[str, str, Any]] = []
    for round_ in range(rng.randint(1, 3)):
        calls = [
            {
                "name": rng.choice(["HassTurnOn", "HassTurnOff", "GetLiveContext"]),
                "args": {f"a{i}": _value(rng) for i in range(rng.randint(0, 3))},
                "id": f"call_{round_}_{index}",
            }
            for index in range(rng.randint(1, 3))
        ]
        history.append(AIMessage(content=rng.choice(["", "Let me check."]), tool_calls=calls))
        for call in calls:
            # A result names its tool, or only its call's id (then the name comes from the call).
            named = rng.random() < 0.5
            history.append(
                ToolMessage(
                    content=json.dumps({"ok": _value(rng)}),
                    tool_call_id=call["id"],
                    **({"name": call["name"]} if named else {}),
                )
            )
            expected.append((call["id"], call["name"], call["args"]))
    ollama_server.add_text("All done.")

    answer, _ = await _stream(native, history)

    assert answer.content == "All done."
    sent = ollama_server.requests[-1]["messages"]
    sent_calls = [c for m in sent if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    results = [m for m in sent if m["role"] == "tool"]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in sent_calls] == [
        (call_id, name, args) for call_id, name, args in expected
    ]
    assert [(m["tool_call_id"], m["tool_name"]) for m in results] == [
        (call_id, name) for call_id, name, _ in expected
    ]


@pytest.mark.parametrize("seed", range(8))
async def test_any_arguments_a_model_sends_become_calls_or_invalid_calls(
    ollama_server: FakeOllamaServer, seed: int
) -> None:
    """Ollama's arguments are an object; an untrusted model may send any JSON value, and
    several calls in one answer (each on its own line, as Ollama streams them). Each
    becomes a call of its own with an id (an object; nothing at all: no arguments) or an
    invalid call (anything else), never a failure or two calls run together (as
    LiteLLM 1.83.0 ran parallel Ollama calls together)."""
    rng = random.Random(seed)
    native, _ = _models(ollama_server)
    arguments = [rng.choice([_value(rng), "", "on"]) for _ in range(3)] + [{"name": _value(rng)}]
    rng.shuffle(arguments)
    names = [f"Tool{index}" for index in range(len(arguments))]
    ollama_server.add_tool_calls(
        [ToolCall(name, value) for name, value in zip(names, arguments, strict=True)]
    )

    answer, _ = await _stream(native)

    calls = [(n, {} if v == "" else v) for n, v in zip(names, arguments, strict=True)]
    expected = [(n, v) for n, v in calls if isinstance(v, dict)]
    assert [(call["name"], call["args"]) for call in answer.tool_calls] == expected
    assert sorted(call["name"] for call in answer.invalid_tool_calls) == sorted(
        n for n, v in calls if not isinstance(v, dict)
    )
    assert len({call["id"] for call in answer.tool_calls}) == len(answer.tool_calls)
    assert all(call["id"] for call in answer.tool_calls)


@pytest.mark.parametrize("seed", range(6))
async def test_thinking_in_tags_is_never_spoken(ollama_server: FakeOllamaServer, seed: int) -> None:
    """Text inside <think> tags is reasoning, however the stream cuts the tags."""
    native, _ = _models(ollama_server)
    rng = random.Random(seed)
    ollama_server.add_text(
        "<think>Which room? The kitchen.</think>The kitchen light is on; 3 < 4.",
        chunk_size=rng.randint(1, 9),
    )

    answer, _ = await _stream(native)

    assert answer.content == "The kitchen light is on; 3 < 4."
    assert answer.additional_kwargs["reasoning_content"] == "Which room? The kitchen."


async def test_tool_schemas_are_sent_as_built(ollama_server: FakeOllamaServer) -> None:
    """The JSON schema keywords Ollama's own client would drop (anyOf, bounds, nested
    objects' properties) reach the server, exactly as LiteLLM sent them."""
    schema = {
        "type": "object",
        "properties": {
            "brightness": {"type": "integer", "minimum": 0, "maximum": 100},
            "color": {
                "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]
            },
            "when": {
                "type": "object",
                "properties": {"at": {"type": "string", "format": "time"}},
                "required": ["at"],
            },
        },
        "required": ["brightness"],
    }
    tool = StructuredTool(
        name="SetLight", description="Set a light", args_schema=schema, coroutine=_never_called
    )
    native, reference = _models(ollama_server)
    for model in (reference, native):
        ollama_server.add_text("Ok.")
        async for _chunk in model.bind_tools([tool]).astream(PROMPT):
            pass
    litellms, ours = ollama_server.requests[-2:]
    assert ours["tools"] == litellms["tools"]
    assert ours["tools"][0]["function"]["parameters"] == schema


async def test_images_go_as_data_and_urls_never_leave(ollama_server: FakeOllamaServer) -> None:
    """An image reaches Ollama as the base64 of its data URL (as LiteLLM sent it); one named
    by a URL or a path is refused before anything is sent (nothing is fetched or read)."""
    native, reference = _models(ollama_server)
    data = base64.b64encode(b"\xff\xd8\xff jpeg bytes").decode()
    content = [
        {"type": "text", "text": "What is "},
        {"type": "text", "text": "in this picture?"},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{data}"}},
    ]
    for model in (reference, native):
        ollama_server.add_text("A cat.")
        answer = await model.ainvoke([HumanMessage(content=content)])
        assert answer.content == "A cat."
    litellms, ours = ollama_server.requests[-2:]
    assert _request(ours)["messages"] == _request(litellms)["messages"]
    assert ours["messages"][0]["images"] == [data]

    sent = len(ollama_server.requests)
    for url in ("http://127.0.0.1:9/cat.jpg", "/etc/hostname", "file:///etc/hostname"):
        with pytest.raises(ValueError, match="data URLs only"):
            await native.ainvoke([HumanMessage(content=[{"type": "image_url", "image_url": url}])])
    assert len(ollama_server.requests) == sent


async def test_a_line_of_any_length_reads_whole(ollama_server: FakeOllamaServer) -> None:
    """A tool call's arguments far over aiohttp's 128 KiB line limit (a long note, a
    drafted automation) and an answer split at any byte arrive whole, as through LiteLLM."""
    note = "ü" + "x" * 300_000 + "é"
    native, reference = _models(ollama_server)
    answers = []
    for model in (reference, native):
        ollama_server.add_text("Noted.", tool_calls=(ToolCall("HassTurnOn", {"name": note}),))
        answer, _count = await _stream(model)
        answers.append(answer)
    assert [(c["name"], c["args"]) for c in answers[1].tool_calls] == [
        ("HassTurnOn", {"name": note})
    ]
    assert _comparable(answers[1]) == _comparable(answers[0])


async def test_an_answer_cut_short_leaves_nothing_open(ollama_server: FakeOllamaServer) -> None:
    """A reader that stops after the first words closes the response and every generator
    under it before it goes on: nothing is left for the loop to close."""
    native, _ = _models(ollama_server)
    ollama_server.add_text("One two three four five six seven.", chunk_size=4, chunk_delay=0.05)
    chunks = native.answer_chunks(list(PROMPT))
    first = await anext(chunks)
    await chunks.aclose()

    assert first.content
    current = asyncio.current_task()
    await asyncio.sleep(0)
    assert [t for t in asyncio.all_tasks() if t is not current and "athrow" in repr(t)] == []


async def test_the_key_goes_only_in_the_header(ollama_server: FakeOllamaServer) -> None:
    """A key (Ollama behind a proxy, Ollama's cloud) is sent as a bearer token and kept out
    of the model's repr and serialization; a wrong one is an authentication failure."""
    key = "sk-ollama-proxy-0123456789"
    ollama_server.api_key = key
    access = ModelAccess(model="ollama_chat/llama3.2", api_key=key, api_base=ollama_server.base_url)
    native = build_chat_model(access, ModelSettings())
    ollama_server.add_text("Hi.")

    assert (await native.ainvoke(PROMPT)).content == "Hi."
    assert key not in repr(native)
    assert key not in json.dumps(native.model_dump(), default=str)

    wrong = build_chat_model(replace(access, api_key="sk-wrong"), ModelSettings())
    with pytest.raises(Exception) as caught:  # noqa: PT011  classified below
        await wrong.ainvoke(PROMPT)
    assert classify_error(caught.value) is ModelErrorKind.AUTH


async def test_a_blocking_invoke_reads_the_same_answer(ollama_server: FakeOllamaServer) -> None:
    """LangChain's blocking `invoke` (in a worker thread: never on the loop) asks Ollama
    for the answer whole and reads it as the stream is read: text, calls with ids, usage,
    and a failure of the same kind."""
    native, _ = _models(ollama_server)
    ollama_server.add_text(
        "Sure.", tool_calls=(ToolCall("HassTurnOn", {"name": "Kitchen"}),), prompt_tokens=12
    )

    answer = await asyncio.to_thread(native.bind_tools(TOOLS).invoke, PROMPT)

    assert answer.content == "Sure."
    assert [(call["name"], call["args"]) for call in answer.tool_calls] == [
        ("HassTurnOn", {"name": "Kitchen"})
    ]
    assert all(call["id"] for call in answer.tool_calls)
    assert answer.usage_metadata is not None
    assert answer.usage_metadata["input_tokens"] == 12
    sent = ollama_server.requests[-1]
    assert sent["stream"] is False
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["HassTurnOn", "HassTurnOff"]

    ollama_server.add_error(500, "runner crashed")
    with pytest.raises(Exception) as caught:  # noqa: PT011  classified below
        await asyncio.to_thread(native.invoke, PROMPT)
    assert classify_error(caught.value) is ModelErrorKind.SERVER
