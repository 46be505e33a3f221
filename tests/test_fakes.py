"""The fake model servers, checked through the real clients: LiteLLM, LangChain, ollama.

Each test pins down a wire format of the fakes together with what LiteLLM 1.83.0
really makes of it. Where LiteLLM surprises (errors, broken streams, Ollama tool
calls), the assertion states what it does and a comment says why, so a LiteLLM
upgrade that changes it shows up here first.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
import gc
import json
import socket
import threading
import time
from typing import Any

import httpx
from langchain_core.messages import AIMessageChunk
from langchain_litellm import ChatLiteLLM
import litellm
from litellm.exceptions import MidStreamFallbackError
import ollama
import openai
import pytest

from custom_components.langgraph_conversation.agent.events import ToolCall as AgentToolCall
from custom_components.langgraph_conversation.agent.graph.tool_calls import (
    confirmed_results,
    tool_message,
)
from custom_components.langgraph_conversation.agent.guard import Released

# LiteLLM's logging threads are the ones the integration owns and stops after each test
# (tests/conftest.py), as in Home Assistant, also when this file runs alone.
from custom_components.langgraph_conversation.agent.upstream import litellm_release  # noqa: F401
from fakes import FakeOllamaServer, FakeOpenAIServer, Reply, ToolCall
from fakes.offline_model import LITELLM_MODEL, OfflineModelServer
from fakes.openai_server import images_of

USER = [{"role": "user", "content": "Turn on the kitchen light and tell me the weather."}]


def _tool(name: str, argument: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} (test tool)",
            "parameters": {"type": "object", "properties": {argument: {"type": "string"}}},
        },
    }


TOOLS = [_tool("HassTurnOn", "name"), _tool("get_weather", "city")]
CALLS = [ToolCall("HassTurnOn", {"name": "Kitchen"}), ToolCall("get_weather", {"city": "Paris"})]
EXPECTED_CALLS = [("HassTurnOn", {"name": "Kitchen"}), ("get_weather", {"city": "Paris"})]


@pytest.fixture(autouse=True)
def no_module_wide_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start without a litellm.api_base left behind by an earlier ChatLiteLLM.

    See test_chatlitellm_sets_the_endpoint_module_wide: without this, an Ollama test
    run after any ChatLiteLLM call would talk to that call's (stopped) server.
    """
    monkeypatch.setattr(litellm, "api_base", None)
    monkeypatch.setattr(litellm, "api_key", None)


@pytest.fixture(autouse=True)
async def finish_abandoned_streams() -> AsyncIterator[None]:
    """Let the generators LiteLLM abandons close before the harness checks for tasks.

    LiteLLM stops reading an OpenAI stream at its finish chunk, leaving the openai
    SDK's async generators suspended in reference cycles. The cyclic GC finalizes them
    at a random later moment, and the aclose() task that this schedules fails Home
    Assistant's lingering-task check of whichever test is running then.
    """
    yield
    gc.collect()
    await asyncio.sleep(0)  # the finalizer hook creates the tasks via call_soon
    closing = [
        task
        for task in asyncio.all_tasks()
        if type(task.get_coro()).__name__ == "async_generator_athrow"
    ]
    if closing:
        await asyncio.wait(closing, timeout=5)


@pytest.fixture
async def openai_fake(socket_enabled: None) -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def ollama_fake(socket_enabled: None) -> AsyncIterator[FakeOllamaServer]:
    async with FakeOllamaServer() as server:
        yield server


def openai_call(server: FakeOpenAIServer, **kwargs: Any) -> dict[str, Any]:
    """acompletion arguments for the OpenAI fake; max_retries=0 keeps errors fast."""
    return {
        "model": "openai/gpt-test",
        "api_base": server.api_base,
        "api_key": "sk-test",
        "messages": USER,
        "max_retries": 0,
        **kwargs,
    }


def ollama_call(server: FakeOllamaServer, **kwargs: Any) -> dict[str, Any]:
    """acompletion arguments for the Ollama fake (LiteLLM does not retry these)."""
    return {
        "model": "ollama_chat/llama3.2",
        "api_base": server.base_url,
        "messages": USER,
        **kwargs,
    }


async def read_into(received: list[Any], **kwargs: Any) -> None:
    """Iterate a streamed acompletion, keeping each chunk (also those before an error)."""
    async for chunk in await litellm.acompletion(stream=True, **kwargs):
        received.append(chunk)


async def collect(**kwargs: Any) -> list[Any]:
    """All chunks of a streamed acompletion."""
    received: list[Any] = []
    await read_into(received, **kwargs)
    return received


def text_of(chunks: list[Any]) -> str:
    return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)


def calls_of(tool_calls: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(call.function.name, json.loads(call.function.arguments)) for call in tool_calls]


# -- OpenAI-compatible server through litellm.acompletion ----------------------------


async def test_openai_streamed_text(socket_enabled: None, openai_fake: FakeOpenAIServer) -> None:
    """Text arrives in chunk_size pieces; usage comes last when include_usage is asked."""
    openai_fake.add_text("Hello there, how are you?", chunk_size=4, prompt_tokens=12)
    chunks = await collect(**openai_call(openai_fake, stream_options={"include_usage": True}))

    assert text_of(chunks) == "Hello there, how are you?"
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) == 7
    built = litellm.stream_chunk_builder(chunks)
    assert built.choices[0].finish_reason == "stop"
    assert (built.usage.prompt_tokens, built.usage.completion_tokens) == (12, 6)
    request = openai_fake.requests[0]
    assert (request["model"], request["messages"], request["stream"]) == ("gpt-test", USER, True)
    assert request["stream_options"] == {"include_usage": True}


async def test_openai_plain_text(socket_enabled: None, openai_fake: FakeOpenAIServer) -> None:
    """A non-streaming request gets one JSON completion."""
    openai_fake.add_text("Hello there", completion_tokens=3)
    response = await litellm.acompletion(**openai_call(openai_fake))

    assert response.choices[0].message.content == "Hello there"
    assert response.choices[0].finish_reason == "stop"
    assert response.usage.completion_tokens == 3
    assert not openai_fake.requests[0].get("stream")


async def test_openai_streamed_parallel_tool_calls(
    socket_enabled: None, openai_fake: FakeOpenAIServer
) -> None:
    """Two calls, each with its id and its arguments split over several chunks."""
    openai_fake.add_tool_calls(CALLS, text="Sure.")
    chunks = await collect(**openai_call(openai_fake, tools=TOOLS))

    fragments = [
        call.function.arguments
        for chunk in chunks
        if chunk.choices and chunk.choices[0].delta.tool_calls
        for call in chunk.choices[0].delta.tool_calls
        if call.function.arguments
    ]
    assert len(fragments) > len(CALLS)
    message = litellm.stream_chunk_builder(chunks).choices[0]
    assert message.finish_reason == "tool_calls"
    assert message.message.content == "Sure."
    assert calls_of(message.message.tool_calls) == EXPECTED_CALLS
    assert [call.id for call in message.message.tool_calls] == ["call_1", "call_2"]
    offered = [tool["function"]["name"] for tool in openai_fake.requests[0]["tools"]]
    assert offered == ["HassTurnOn", "get_weather"]


async def test_openai_plain_tool_calls_have_unique_ids(
    socket_enabled: None, openai_fake: FakeOpenAIServer
) -> None:
    """Non-streamed tool calls; ids stay unique across replies of one server."""
    openai_fake.add_tool_calls(CALLS)
    openai_fake.add_tool_calls(CALLS[:1])
    first = await litellm.acompletion(**openai_call(openai_fake, tools=TOOLS))
    second = await litellm.acompletion(**openai_call(openai_fake, tools=TOOLS))

    assert first.choices[0].finish_reason == "tool_calls"
    assert first.choices[0].message.content is None
    assert calls_of(first.choices[0].message.tool_calls) == EXPECTED_CALLS
    ids = [call.id for r in (first, second) for call in r.choices[0].message.tool_calls]
    assert ids == ["call_1", "call_2", "call_3"]


@pytest.mark.parametrize("stream", [True, False])
async def test_openai_raw_tool_call_arguments(
    socket_enabled: None, openai_fake: FakeOpenAIServer, stream: bool
) -> None:
    """Malformed arguments reach the client exactly as scripted."""
    openai_fake.add_raw_tool_call("HassTurnOn", '{"name": ')
    if stream:
        chunks = await collect(**openai_call(openai_fake, tools=TOOLS))
        message = litellm.stream_chunk_builder(chunks).choices[0].message
    else:
        response = await litellm.acompletion(**openai_call(openai_fake, tools=TOOLS))
        message = response.choices[0].message
    assert message.tool_calls[0].function.name == "HassTurnOn"
    assert message.tool_calls[0].function.arguments == '{"name": '


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, litellm.BadRequestError),
        (401, litellm.AuthenticationError),
        # Not PermissionDeniedError: LiteLLM's OpenAI mapping has no 403 branch.
        (403, litellm.APIError),
        (404, litellm.NotFoundError),
        (429, litellm.RateLimitError),
        (500, litellm.InternalServerError),
        (502, litellm.BadGatewayError),
        (503, litellm.ServiceUnavailableError),
    ],
)
@pytest.mark.parametrize("stream", [True, False])
async def test_openai_errors(
    socket_enabled: None,
    openai_fake: FakeOpenAIServer,
    status: int,
    expected: type[Exception],
    stream: bool,
) -> None:
    """Each status becomes its own LiteLLM exception, keeping status and message."""
    openai_fake.add_error(status, f"scripted {status}")
    with pytest.raises(expected) as raised:
        await litellm.acompletion(**openai_call(openai_fake, stream=stream))
    assert type(raised.value) is expected
    assert raised.value.status_code == status
    assert f"scripted {status}" in str(raised.value)


async def test_openai_invalid_request_error_type_is_a_bad_request(
    socket_enabled: None, openai_fake: FakeOpenAIServer
) -> None:
    """OpenAI's own error.type for most 4xx turns them into BadRequestError.

    LiteLLM maps any error whose text mentions "invalid_request_error" to
    BadRequestError unless it says "Incorrect API key provided" (or model_not_found).
    The openai SDKs of both Home Assistant legs (2.15, 3.10) put the body into that
    text; a later one (3.57) keeps only the message, and then the status decides.
    """
    openai_fake.add_error(401, "You didn't provide an API key.", error_type="invalid_request_error")
    with pytest.raises(litellm.BadRequestError) as raised:
        await litellm.acompletion(**openai_call(openai_fake))
    assert raised.value.status_code == 401


async def test_openai_rate_limit_retry_after(
    socket_enabled: None, openai_fake: FakeOpenAIServer
) -> None:
    """Retry-After reaches the caller in litellm_response_headers (err.response has none)."""
    openai_fake.add_error(
        429, "slow down", code="rate_limit_exceeded", headers={"Retry-After": "7"}
    )
    with pytest.raises(litellm.RateLimitError) as raised:
        await litellm.acompletion(**openai_call(openai_fake))
    assert raised.value.litellm_response_headers["retry-after"] == "7"


async def test_openai_refuses_wrong_key_and_unknown_model(
    socket_enabled: None, openai_fake: FakeOpenAIServer
) -> None:
    """Refusals happen before the script: the scripted reply waits for a good request."""
    openai_fake.api_key = "sk-right"
    openai_fake.models = {"gpt-test"}
    openai_fake.add_text("Finally.")

    with pytest.raises(litellm.AuthenticationError, match="Incorrect API key"):
        await litellm.acompletion(**openai_call(openai_fake, api_key="sk-wrong"))
    with pytest.raises(litellm.NotFoundError, match="does not exist"):
        await litellm.acompletion(**openai_call(openai_fake, api_key="sk-right", model="openai/x"))
    assert openai_fake.pending_replies == 1
    response = await litellm.acompletion(**openai_call(openai_fake, api_key="sk-right"))
    assert response.choices[0].message.content == "Finally."
    assert [r["model"] for r in openai_fake.requests] == ["gpt-test", "x", "gpt-test"]


# The beginning of a PNG, and of a JPEG (the fake checks a format's first bytes only).
_PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
_JPEG = b"\xff\xd8\xff\xe0" + bytes(range(40, 90))


def _with_image(url: Any, role: str = "user") -> list[dict[str, Any]]:
    part = {"type": "image_url", "image_url": {"url": url}}
    return [{"role": role, "content": [{"type": "text", "text": "What is this?"}, part]}]


def _data_url(mime_type: str, data: bytes) -> str:
    return f"data:{mime_type};base64,{base64.b64encode(data).decode()}"


async def test_openai_image_parts(socket_enabled: None, openai_fake: FakeOpenAIServer) -> None:
    """An image part passes LiteLLM's client as sent and is given back as bytes; one in a
    message other than the user's, or not an image of its declared type, is refused
    before the script, as OpenAI refuses it."""
    openai_fake.add_text("A picture.")
    response = await litellm.acompletion(
        **openai_call(openai_fake, messages=_with_image(_data_url("image/png", _PNG)))
    )
    assert response.choices[0].message.content == "A picture."
    assert images_of(openai_fake.requests[0]) == [("image/png", _PNG)]
    refused = [
        _with_image(_data_url("image/jpeg", _PNG)),
        _with_image(_data_url("image/bmp", _JPEG)),
        _with_image("data:image/jpeg;base64,not base64!"),
        _with_image("a picture"),
        _with_image(None),
        [*USER, *_with_image(_data_url("image/jpeg", _JPEG), role="assistant")],
    ]
    for messages in refused:
        with pytest.raises(litellm.BadRequestError):
            await litellm.acompletion(**openai_call(openai_fake, messages=messages))
    openai_fake.add_text("Another.")
    await litellm.acompletion(
        **openai_call(openai_fake, messages=_with_image(_data_url("image/jpeg", _JPEG)))
    )
    assert images_of(openai_fake.requests[-1]) == [("image/jpeg", _JPEG)]
    assert openai_fake.pending_replies == 0


async def test_openai_unscripted_requests(
    socket_enabled: None, openai_fake: FakeOpenAIServer
) -> None:
    """An empty queue answers "OK", or HTTP 500 once default_reply is None."""
    response = await litellm.acompletion(**openai_call(openai_fake))
    assert response.choices[0].message.content == "OK"

    openai_fake.default_reply = None
    with pytest.raises(litellm.InternalServerError, match="was not scripted"):
        await litellm.acompletion(**openai_call(openai_fake))


async def test_openai_empty_answer(socket_enabled: None, openai_fake: FakeOpenAIServer) -> None:
    openai_fake.add_empty()
    openai_fake.add_empty()
    assert text_of(await collect(**openai_call(openai_fake))) == ""
    response = await litellm.acompletion(**openai_call(openai_fake))
    assert response.choices[0].message.content == ""


async def test_openai_broken_stream_looks_complete(
    socket_enabled: None, openai_fake: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection dropped mid-stream goes unnoticed with LiteLLM's default transport.

    Its aiohttp transport swallows the incomplete chunked body and ends the stream,
    and LiteLLM then adds a finish_reason "stop": a cut answer looks complete.
    (The integration sets disable_aiohttp_transport, hence the explicit False.)
    """
    monkeypatch.setattr(litellm, "disable_aiohttp_transport", False)
    openai_fake.add_broken_stream("Partial ans")
    chunks = await collect(**openai_call(openai_fake))
    assert text_of(chunks) == "Partial ans"
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_openai_broken_stream_raises_on_httpx_transport(
    socket_enabled: None, openai_fake: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With litellm.disable_aiohttp_transport the drop raises, after the partial text.

    Set before the first request of the event loop: LiteLLM caches its clients per
    loop and API base, transport included.
    """
    monkeypatch.setattr(litellm, "disable_aiohttp_transport", True)
    openai_fake.add_broken_stream("Partial ans")
    received: list[Any] = []
    # The wording differs between openai 2.x and 3.x, the type does not.
    with pytest.raises(MidStreamFallbackError):
        await read_into(received, **openai_call(openai_fake))
    assert text_of(received) == "Partial ans"
    # A subclass of ServiceUnavailableError, so it classifies as a server error.
    assert issubclass(MidStreamFallbackError, litellm.ServiceUnavailableError)


async def test_openai_reset_before_the_answer(
    socket_enabled: None, openai_fake: FakeOpenAIServer
) -> None:
    """A reset before the status line: the OpenAI SDK's "Connection error.", which
    LiteLLM files as an InternalServerError (agent/models/error_kinds.py classifies it by the SDK's
    error in its chain). The next request is answered: the reset took one reply."""
    openai_fake.add_reset()
    with pytest.raises(litellm.InternalServerError) as raised:
        await collect(**openai_call(openai_fake))
    assert "Connection error" in str(raised.value)
    assert openai_fake.request_count == 1
    assert text_of(await collect(**openai_call(openai_fake))) == "OK"


async def test_openai_invalid_json_chunk(
    socket_enabled: None, openai_fake: FakeOpenAIServer
) -> None:
    """A chunk that is not JSON raises while iterating, after the text before it."""
    openai_fake.add_invalid_json_chunk("Hi")
    received: list[Any] = []
    with pytest.raises(MidStreamFallbackError, match="Expecting value"):
        await read_into(received, **openai_call(openai_fake))
    assert text_of(received) == "Hi"


async def test_finish_reason_and_clearing_the_script(
    socket_enabled: None, openai_fake: FakeOpenAIServer, ollama_fake: FakeOllamaServer
) -> None:
    """A scripted finish reason reaches LiteLLM from both protocols."""
    openai_fake.add_text("Cut sh", finish_reason="length")
    ollama_fake.add_text("Cut sh", finish_reason="length")
    response = await litellm.acompletion(**openai_call(openai_fake))
    chunks = await collect(**ollama_call(ollama_fake))
    assert response.choices[0].finish_reason == "length"
    assert chunks[-1].choices[0].finish_reason == "length"

    openai_fake.add_text("never sent")
    openai_fake.clear_replies()
    assert openai_fake.pending_replies == 0


async def test_openai_first_byte_delay_times_out(
    socket_enabled: None, openai_fake: FakeOpenAIServer
) -> None:
    """A delayed reply trips the client's timeout; the server answers the next at once."""
    openai_fake.add_text("too late", first_byte_delay=30.0)
    openai_fake.add_text("on time")
    started = time.perf_counter()
    with pytest.raises(litellm.Timeout):
        await litellm.acompletion(**openai_call(openai_fake, timeout=0.3))
    response = await litellm.acompletion(**openai_call(openai_fake))
    assert response.choices[0].message.content == "on time"
    # Far below the 30 s delay (not a speed check: the timeout fired, nothing waited).
    assert time.perf_counter() - started < 15.0


async def test_timings_and_server_wide_delay(
    socket_enabled: None, openai_fake: FakeOpenAIServer
) -> None:
    """first_byte_delay applies to replies without their own; timings measure it."""
    openai_fake.first_byte_delay = 0.2
    openai_fake.add_text("slow")
    openai_fake.add_text("fast", first_byte_delay=0)
    await collect(**openai_call(openai_fake))
    await litellm.acompletion(**openai_call(openai_fake))

    slow, fast = openai_fake.timings
    assert slow.first_byte >= 0.2 > fast.first_byte
    assert slow.total >= slow.first_byte
    assert openai_fake.first_byte_times == [slow.first_byte, fast.first_byte]
    assert openai_fake.server_time == pytest.approx(slow.total + fast.total)


async def test_chunks_are_sent_as_they_come(
    socket_enabled: None, openai_fake: FakeOpenAIServer
) -> None:
    """With chunk_delay the client sees the first text long before the last."""
    openai_fake.add_text("abcdef", chunk_size=1, chunk_delay=0.1)
    stream = await litellm.acompletion(**openai_call(openai_fake, stream=True))
    arrivals = [time.perf_counter() async for chunk in stream if chunk.choices[0].delta.content]
    assert len(arrivals) == 6
    assert arrivals[-1] - arrivals[0] >= 0.4


async def _first_texts_through_litellm(server: FakeOpenAIServer, count: int) -> list[str]:
    """The first `count` chunks' texts of a LiteLLM stream, which is then closed."""
    stream = await litellm.acompletion(stream=True, **openai_call(server))
    texts: list[str] = []
    async for chunk in stream:
        assert chunk.choices[0].finish_reason is None
        texts.append(chunk.choices[0].delta.content or "")
        if len(texts) >= count:
            break
    await stream.aclose()
    return texts


async def _first_texts_through_httpx(server: FakeOllamaServer, count: int) -> list[str]:
    """The first `count` lines' texts of an /api/chat stream read as the integration's
    Ollama client reads it (agent/models/ollama_chat.py: httpx), which then hangs up.

    Not LiteLLM's ollama_chat: its stream's aclose() closes the line iterator but not the
    HTTP response, which stays open until the collector finalizes it.
    """
    texts: list[str] = []
    body = {"model": "llama3.2", "messages": USER, "stream": True}
    async with (
        httpx.AsyncClient() as client,
        client.stream("POST", f"{server.base_url}/api/chat", json=body) as response,
    ):
        async for line in response.aiter_lines():
            message = json.loads(line)
            assert message["done"] is False
            texts.append(message["message"]["content"])
            if len(texts) >= count:
                break
    return texts


@pytest.mark.parametrize("protocol", ["openai", "ollama"])
async def test_endless_reply_until_the_client_hangs_up(
    socket_enabled: None,
    openai_fake: FakeOpenAIServer,
    ollama_fake: FakeOllamaServer,
    protocol: str,
) -> None:
    """An endless reply streams numbered text without a finish chunk; the response
    ends when the client closes the stream."""
    server = openai_fake if protocol == "openai" else ollama_fake
    server.add(Reply(text="la ", endless=True, chunk_size=3))
    texts = await (
        _first_texts_through_litellm(openai_fake, 300)
        if protocol == "openai"
        else _first_texts_through_httpx(ollama_fake, 300)
    )
    assert "".join(texts).startswith("la la 1 la 2 la 3 ")
    async with asyncio.timeout(5):
        while not server.timings:  # noqa: ASYNC110  the server runs on its own thread
            await asyncio.sleep(0.01)


async def test_wait_for_requests_and_stop_mid_reply(
    socket_enabled: None, openai_fake: FakeOpenAIServer
) -> None:
    """A test can wait for a request; stop() ends a reply still waiting, at once."""
    openai_fake.add_text("never sent", first_byte_delay=30)
    task = asyncio.create_task(litellm.acompletion(**openai_call(openai_fake)))
    await openai_fake.wait_for_requests(1)
    assert openai_fake.requests[0]["messages"] == USER

    started = time.perf_counter()
    await openai_fake.stop()
    # Far below the reply's 30 s delay: stop() did not wait for it.
    assert time.perf_counter() - started < 15.0
    with pytest.raises(litellm.InternalServerError, match="Connection error"):
        await task


def _connect_until_refused(port: int, opened: list[socket.socket], enough: threading.Event) -> None:
    """Open connections to `port`, each sending one request, until refused or told."""
    request = b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    while not enough.is_set():
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            return
        opened.append(sock)
        try:
            sock.sendall(request)
        except OSError:
            return


def _read_each_to_the_end(socks: list[socket.socket]) -> list[bool]:
    """For each socket, whether the server's side ended (closed or reset) within 5 s."""
    ended = []
    for sock in socks:
        sock.settimeout(5)
        try:
            while sock.recv(65536):
                pass
        except TimeoutError:
            ended.append(False)
        except OSError:
            ended.append(True)  # a reset is an end too
        else:
            ended.append(True)
    return ended


async def test_stop_leaves_no_connection_open_even_mid_accept(socket_enabled: None) -> None:
    """A client connecting while the server stops is never left waiting on an open socket.

    A connection accepted in the very instant the server stopped used to stay open with
    nobody reading it, until Python's cyclic collector ran; a client blocked on it (LiteLLM's
    synchronous /api/show, on the test's own loop) could wait forever and the collector
    never ran. With the collector off, every connection opened while the server stops must
    still end.
    """
    gc.disable()
    try:
        for _ in range(15):
            server = FakeOllamaServer()
            await server.start()
            opened: list[socket.socket] = []
            enough = threading.Event()
            flood = threading.Thread(
                target=_connect_until_refused, args=(server.port, opened, enough)
            )
            flood.start()
            # Stopped while connections keep coming (the first one is there, on a busy
            # machine too).
            async with asyncio.timeout(10):
                while not opened:  # noqa: ASYNC110  the flood runs on its own thread
                    await asyncio.sleep(0.005)
            await asyncio.sleep(0.01)
            await server.stop()
            enough.set()
            await asyncio.to_thread(flood.join)
            try:
                ended = await asyncio.to_thread(_read_each_to_the_end, opened)
            finally:
                for sock in opened:
                    sock.close()
            assert all(ended), f"{ended.count(False)} of {len(opened)} connections left open"
    finally:
        gc.enable()


async def test_openai_models_endpoint(socket_enabled: None, openai_fake: FakeOpenAIServer) -> None:
    """GET /v1/models lists `models`, behind the same API key check."""
    openai_fake.models = {"gpt-test", "gpt-other"}
    openai_fake.api_key = "sk-right"
    client = openai.AsyncOpenAI(base_url=openai_fake.api_base, api_key="sk-right", max_retries=0)
    wrong = openai.AsyncOpenAI(base_url=openai_fake.api_base, api_key="sk-wrong", max_retries=0)
    try:
        assert [model.id async for model in client.models.list()] == ["gpt-other", "gpt-test"]
        with pytest.raises(openai.AuthenticationError):
            await wrong.models.list()
    finally:
        await client.close()
        await wrong.close()
    assert openai_fake.paths == ["GET /v1/models", "GET /v1/models"]


def test_sync_use_from_a_plain_script(socket_enabled: None) -> None:
    """`with` starts and stops the server without an event loop (for dev tools)."""
    with FakeOpenAIServer() as server:
        server.add_text("From a script.")
        client = openai.OpenAI(base_url=server.api_base, api_key="sk-test", max_retries=0)
        with client:
            answer = client.chat.completions.create(model="gpt-test", messages=USER)
        port = server.port
    assert answer.choices[0].message.content == "From a script."
    with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
        sock.connect(("127.0.0.1", port))


# -- Ollama server through litellm.acompletion (ollama_chat/) ------------------------


async def test_ollama_streamed_text(socket_enabled: None, ollama_fake: FakeOllamaServer) -> None:
    """NDJSON chunks become text; the done chunk's counts become usage."""
    ollama_fake.add_text("Hello there, how are you?", chunk_size=5, completion_tokens=9)
    chunks = await collect(**ollama_call(ollama_fake, temperature=0.2))

    assert text_of(chunks) == "Hello there, how are you?"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert litellm.stream_chunk_builder(chunks).usage.completion_tokens == 9
    request = ollama_fake.requests[0]
    assert (request["model"], request["stream"]) == ("llama3.2", True)
    assert request["messages"][0]["content"] == USER[0]["content"]
    assert request["options"] == {"temperature": 0.2}


async def test_ollama_plain_text(socket_enabled: None, ollama_fake: FakeOllamaServer) -> None:
    ollama_fake.add_text("Hello there", prompt_tokens=11)
    response = await litellm.acompletion(**ollama_call(ollama_fake))

    assert response.choices[0].message.content == "Hello there"
    assert response.usage.prompt_tokens == 11
    assert ollama_fake.requests[0]["stream"] is False


async def test_ollama_streamed_parallel_tool_calls(
    socket_enabled: None, ollama_fake: FakeOllamaServer
) -> None:
    """Like Ollama, one chunk per call, and LiteLLM's reading of that.

    LiteLLM numbers the calls of each chunk from 0 and ignores Ollama's
    function.index, so both calls arrive with index 0 but distinct ids (uuids it
    adds). Accumulating by id works (LangChain does, see below); accumulating by
    index, as litellm.stream_chunk_builder does, merges them into one broken call.
    The finish reason stays "stop": LiteLLM says "tool_calls" only when the calls
    ride on the done chunk, which Ollama's streaming parser does not do.
    """
    ollama_fake.add_tool_calls(CALLS)
    chunks = await collect(**ollama_call(ollama_fake, tools=TOOLS))

    deltas = [call for c in chunks for call in c.choices[0].delta.tool_calls or ()]
    assert [call.index for call in deltas] == [0, 0]
    assert len({call.id for call in deltas}) == 2
    assert calls_of(deltas) == EXPECTED_CALLS
    assert chunks[-1].choices[0].finish_reason == "stop"
    merged = litellm.stream_chunk_builder(chunks).choices[0].message.tool_calls
    assert len(merged) == 1
    assert ollama_fake.requests[0]["tools"] == TOOLS


async def test_ollama_plain_tool_calls(socket_enabled: None, ollama_fake: FakeOllamaServer) -> None:
    ollama_fake.add_tool_calls(CALLS)
    response = await litellm.acompletion(**ollama_call(ollama_fake, tools=TOOLS))

    assert response.choices[0].finish_reason == "tool_calls"
    assert calls_of(response.choices[0].message.tool_calls) == EXPECTED_CALLS


@pytest.mark.parametrize("status", [401, 404, 429, 500, 503])
@pytest.mark.parametrize("stream", [True, False])
async def test_ollama_errors(
    socket_enabled: None, ollama_fake: FakeOllamaServer, status: int, stream: bool
) -> None:
    """Every HTTP error becomes APIConnectionError with status_code 500.

    LiteLLM maps Ollama errors by message text only; the real status survives on
    the exception's __context__ (an OllamaError) and the body in the message.
    """
    ollama_fake.add_error(status, f"scripted {status}")
    with pytest.raises(litellm.APIConnectionError) as raised:
        await litellm.acompletion(**ollama_call(ollama_fake, stream=stream))
    assert raised.value.status_code == 500
    assert f'{{"error": "scripted {status}"}}' in str(raised.value)
    assert raised.value.__context__.status_code == status


async def test_ollama_refuses_unknown_model(
    socket_enabled: None, ollama_fake: FakeOllamaServer
) -> None:
    """`models` matches with or without the :latest tag; others get Ollama's 404."""
    ollama_fake.models = {"llama3.2:latest"}
    await litellm.acompletion(**ollama_call(ollama_fake))
    with pytest.raises(litellm.APIConnectionError, match="model 'qwen3' not found"):
        await litellm.acompletion(**ollama_call(ollama_fake, model="ollama_chat/qwen3"))


async def test_ollama_broken_stream_and_invalid_json_look_complete(
    socket_enabled: None, ollama_fake: FakeOllamaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both go unnoticed by default: partial text, finish_reason "stop", no error.

    The dropped connection is swallowed by LiteLLM's aiohttp transport (as for
    OpenAI); the line that is not JSON is skipped by its Ollama chunk parser.
    """
    monkeypatch.setattr(litellm, "disable_aiohttp_transport", False)
    ollama_fake.add_broken_stream("Partial ans")
    ollama_fake.add_invalid_json_chunk("Hi")
    broken = await collect(**ollama_call(ollama_fake))
    invalid = await collect(**ollama_call(ollama_fake))
    assert (text_of(broken), broken[-1].choices[0].finish_reason) == ("Partial ans", "stop")
    assert (text_of(invalid), invalid[-1].choices[0].finish_reason) == ("Hi", "stop")


async def test_ollama_broken_stream_raises_on_httpx_transport(
    socket_enabled: None, ollama_fake: FakeOllamaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(litellm, "disable_aiohttp_transport", True)
    ollama_fake.add_broken_stream("Partial ans")
    with pytest.raises(MidStreamFallbackError, match="incomplete chunked read"):
        await collect(**ollama_call(ollama_fake))


async def test_ollama_first_byte_delay_times_out(
    socket_enabled: None, ollama_fake: FakeOllamaServer
) -> None:
    """Not litellm.Timeout: ollama_chat wraps its timeout in APIConnectionError."""
    ollama_fake.add_text("too late", first_byte_delay=5.0)
    with pytest.raises(litellm.APIConnectionError, match=r"litellm\.Timeout"):
        await litellm.acompletion(**ollama_call(ollama_fake, timeout=0.3))


# -- Ollama's window, counted prompt and keep-alive ----------------------------------

LONG_USER = [{"role": "user", "content": "x" * 4000}]  # 1,006 tokens with the role lines


async def test_ollama_counts_the_prompt_it_was_sent(
    socket_enabled: None, ollama_fake: FakeOllamaServer
) -> None:
    """prompt_eval_count is the rendered prompt's tokens (four characters each)."""
    ollama_fake.add_text("Hi")
    response = await litellm.acompletion(**ollama_call(ollama_fake, tools=TOOLS))
    [measure] = ollama_fake.prompts
    rendered = f"<|tools|>\n{json.dumps(TOOLS)}\n<|user|>\n{USER[0]['content']}\n<|assistant|>\n"
    assert measure.tokens == -(-len(rendered) // 4)
    assert response.usage.prompt_tokens == measure.evaluated == measure.tokens
    # No window named: Ollama's own default.
    assert measure.window == 4096


async def test_ollama_applies_the_window_it_was_sent(
    socket_enabled: None, ollama_fake: FakeOllamaServer
) -> None:
    """num_ctx is the window, bounded by the model's own length; over it, half is kept."""
    ollama_fake.context_length = 6000
    for window in (512, 2048, 32768):
        await litellm.acompletion(**ollama_call(ollama_fake, messages=LONG_USER, num_ctx=window))
    windows = [(m.window, m.truncated, m.evaluated) for m in ollama_fake.prompts]
    assert windows == [(512, True, 256), (2048, False, 1006), (6000, False, 1006)]


async def test_ollama_may_refuse_an_over_long_prompt(
    socket_enabled: None, ollama_fake: FakeOllamaServer
) -> None:
    """Some models refuse instead of cutting: HTTP 400, and no scripted reply is used."""
    ollama_fake.overflow = "refuse"
    ollama_fake.add_text("never read")
    with pytest.raises(litellm.APIConnectionError, match="exceeds the context length"):
        await litellm.acompletion(**ollama_call(ollama_fake, messages=LONG_USER, num_ctx=512))
    assert ollama_fake.pending_replies == 1


async def test_ollama_show_reports_the_context_length(
    socket_enabled: None, ollama_fake: FakeOllamaServer
) -> None:
    ollama_fake.context_length = 32768
    async with httpx.AsyncClient() as client:
        shown = await client.post(f"{ollama_fake.base_url}/api/show", json={"model": "qwen3"})
    assert shown.json()["model_info"]["llama.context_length"] == 32768


async def test_ollama_keeps_the_model_loaded_as_asked(
    socket_enabled: None, ollama_fake: FakeOllamaServer
) -> None:
    """keep_alive: -1 keeps it, 0 unloads at once; a cold model reports its load time."""
    await litellm.acompletion(**ollama_call(ollama_fake, keep_alive=-1))
    await litellm.acompletion(**ollama_call(ollama_fake, keep_alive=-1))
    assert ollama_fake.loaded_models() == ["llama3.2:latest"]
    async with httpx.AsyncClient() as client:
        listed = (await client.get(f"{ollama_fake.base_url}/api/ps")).json()
        assert [m["name"] for m in listed["models"]] == ["llama3.2:latest"]
        await litellm.acompletion(**ollama_call(ollama_fake, keep_alive=0))
        assert ollama_fake.loaded_models() == []
        cold = await client.post(
            f"{ollama_fake.base_url}/api/chat",
            json={"model": "llama3.2", "messages": USER, "stream": False},
        )
        warm = await client.post(
            f"{ollama_fake.base_url}/api/chat",
            json={"model": "llama3.2", "messages": USER, "stream": False},
        )
    assert cold.json()["load_duration"] > 0
    assert warm.json()["load_duration"] == 0
    # Ollama's default keep-alive is five minutes: still loaded.
    assert ollama_fake.loaded_models() == ["llama3.2:latest"]
    assert [r.get("keep_alive") for r in ollama_fake.requests] == [-1, -1, 0, None, None]


# -- Ollama server through the official ollama client --------------------------------


async def test_ollama_official_client(socket_enabled: None, ollama_fake: FakeOllamaServer) -> None:
    """What Home Assistant's core ollama integration calls: list, pull, show, chat."""
    ollama_fake.models = {"llama3.2"}
    client = ollama.AsyncClient(host=ollama_fake.base_url)
    # ollama 0.5 (core's pin on 2026.2) has no async context manager; close its transport.
    try:
        assert [m.model for m in (await client.list()).models] == ["llama3.2:latest"]
        assert (await client.pull("qwen3")).status == "success"
        assert "tools" in (await client.show("qwen3")).capabilities

        ollama_fake.add_tool_calls(CALLS)
        stream = await client.chat(model="qwen3", messages=USER, tools=TOOLS, stream=True)
        calls = [
            (call.function.name, dict(call.function.arguments))
            async for part in stream
            for call in part.message.tool_calls or ()
        ]
        assert calls == EXPECTED_CALLS

        ollama_fake.add_text("Hi there")
        answer = await client.chat(model="qwen3", messages=USER, keep_alive="5m")
        assert answer.message.content == "Hi there"
        assert (answer.done_reason, answer.eval_count) == ("stop", 2)

        with pytest.raises(ollama.ResponseError, match="not found") as raised:
            await client.chat(model="mistral", messages=USER)
        assert raised.value.status_code == 404
    finally:
        await client._client.aclose()
    assert ollama_fake.paths[:3] == ["GET /api/tags", "POST /api/pull", "POST /api/show"]


async def test_ollama_version_endpoint(socket_enabled: None, ollama_fake: FakeOllamaServer) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.get(f"{ollama_fake.base_url}/api/version")
    assert response.json() == {"version": "0.12.6"}


# -- LangChain's ChatLiteLLM ---------------------------------------------------------


async def astream_tool_calls(model: ChatLiteLLM) -> AIMessageChunk:
    """Stream one answer through bind_tools and add the chunks up, as LangGraph does."""
    total: AIMessageChunk | None = None
    async for chunk in model.bind_tools(TOOLS).astream(USER):
        assert isinstance(chunk, AIMessageChunk)
        total = chunk if total is None else total + chunk
    assert total is not None
    return total


async def test_langchain_openai_tool_call_chunks(
    socket_enabled: None, openai_fake: FakeOpenAIServer
) -> None:
    openai_fake.add_tool_calls(CALLS)
    model = ChatLiteLLM(
        model="openai/gpt-test",
        api_base=openai_fake.api_base,
        api_key="sk-test",
        streaming=True,
        max_retries=0,
        # langchain-litellm 0.6 asks for usage by default, 0.5 only for known OpenAI models.
        stream_options={"include_usage": True},
    )
    message = await astream_tool_calls(model)

    assert [(c["name"], c["args"], c["id"]) for c in message.tool_calls] == [
        ("HassTurnOn", {"name": "Kitchen"}, "call_1"),
        ("get_weather", {"city": "Paris"}, "call_2"),
    ]
    assert message.usage_metadata is not None
    assert message.usage_metadata["output_tokens"] > 0


async def test_langchain_ollama_tool_call_chunks(
    socket_enabled: None, ollama_fake: FakeOllamaServer
) -> None:
    """LangChain keeps the two index-0 calls apart, as their ids differ."""
    ollama_fake.add_tool_calls(CALLS)
    model = ChatLiteLLM(
        model="ollama_chat/llama3.2", api_base=ollama_fake.base_url, streaming=True, max_retries=0
    )
    message = await astream_tool_calls(model)

    assert [(c["name"], c["args"]) for c in message.tool_calls] == EXPECTED_CALLS
    assert message.invalid_tool_calls == []


async def test_chatlitellm_sets_the_endpoint_module_wide(
    socket_enabled: None, ollama_fake: FakeOllamaServer
) -> None:
    """ChatLiteLLM writes its api_base and api_key into the litellm module.

    Its default `client` is the litellm module, and building each request sets
    client.api_base and client.api_key. ollama_chat then prefers litellm.api_base to
    the api_base argument: every later ollama_chat call, from any agent, goes to the
    server of the last ChatLiteLLM call. (openai/ lets the argument win.)
    """
    async with FakeOllamaServer() as first:
        model = ChatLiteLLM(
            model="ollama_chat/llama3.2", api_base=first.base_url, streaming=True, max_retries=0
        )
        await model.ainvoke(USER)
        assert litellm.api_base == first.base_url

        await litellm.acompletion(**ollama_call(ollama_fake))
        assert (first.request_count, ollama_fake.request_count) == (2, 0)


# --- the offline stand-in model (fakes/offline_model.py) -----------------------------------


async def test_the_offline_stand_in_says_a_confirmed_unlock_in_a_sentence(
    socket_enabled: None,
) -> None:
    """After the user's yes the agent sends the held call's result (built here by the agent's
    own code); the stand-in answers in words, not with the tool's name and raw JSON."""
    unlock = AgentToolCall(
        "call-1", "intent__HassTurnOff", {"name": "Front Door", "domain": ["lock"]}
    )
    [finished] = confirmed_results(
        {unlock.id: unlock}, {unlock.id: Released(done=("unlock Front Door",))}, "confirmed"
    )
    record = tool_message(finished)
    messages = [
        {"role": "user", "content": "Unlock the front door"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": unlock.id,
                    "type": "function",
                    "function": {"name": unlock.name, "arguments": json.dumps(unlock.args)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": record.tool_call_id, "content": record.content},
    ]
    async with OfflineModelServer() as server:
        chunks = await collect(
            model=LITELLM_MODEL,
            api_base=server.api_base,
            api_key="no-key",
            messages=messages,
            max_retries=0,
        )
    assert text_of(chunks) == "Done: I unlocked Front Door."


@pytest.mark.parametrize(
    ("offered", "expected"),
    [
        (["garden__HassTurnOn", "assist__intent__HassTurnOn"], "assist__intent__HassTurnOn"),
        (["HassTurnOn", "intent__HassTurnOn"], "intent__HassTurnOn"),
        (["HassTurnOn"], "HassTurnOn"),
        (["garden__HassTurnOn", "assist__HassTurnOn"], "assist__HassTurnOn"),
        (["garden__HassTurnOn", "intent__HassTurnOn"], "intent__HassTurnOn"),
        (["garden__HassTurnOn"], "garden__HassTurnOn"),
        (["home_get_state"], None),
    ],
)
def test_the_offline_stand_in_takes_assists_intent_among_other_apis_tools(
    offered: list[str], expected: str | None
) -> None:
    """With other APIs merged in, another API's tool named like an intent is not taken for
    Assist's while Assist's own is offered."""
    from fakes.offline_model import Tools

    tools = Tools({"tools": [{"type": "function", "function": {"name": n}} for n in offered]})
    assert tools.intent("HassTurnOn") == expected
