"""Chat with a model Ollama serves, over its native API, without LiteLLM in between.

Ollama is what a small box talks to, and what Home Assistant's own Ollama agent is
measured against. Through LiteLLM every call ran its setup in a worker thread (the
`acompletion` hop), rebuilt each chunk as pydantic objects and needed workarounds for
a tool round's history and a lean stream (issue #29); here one streamed POST to
`/api/chat` goes out on a shared aiohttp session and its lines become LangChain chunks
(ollama_wire.py). Other providers still go through LiteLLM (chat.py).

aiohttp, not httpx: Home Assistant itself runs on aiohttp (always installed, its client
modules already imported), and a streamed request costs the event loop about a quarter of
httpx's CPU time (0.22 against 0.79 ms for a three-line answer on 127.0.0.1; httpx reads
through httpcore, h11 and anyio in pure Python). That is a twentieth of a turn's overhead
per model call (bench figure 1).

The session is shared by every Ollama model of the process on the running event loop (a
pool of keep-alive connections to each server), used and closed under
`SHARED_CLIENT_USERS` with LiteLLM's clients when the last entry unloads. Its TLS context
(for an Ollama behind HTTPS) is built off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
import json
import ssl
from typing import Any

import aiohttp
import certifi
import httpx
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.chat_models import agenerate_from_stream
from langchain_core.messages import AIMessageChunk, BaseMessage, message_chunk_to_message
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool

from .client_users import SHARED_CLIENT_USERS
from .ollama_wire import AnswerReader, OllamaAnswerError, request_body

DEFAULT_BASE = "http://localhost:11434"

# The TLS context of the shared session, built once off the event loop (certifi's
# authorities, as httpx would load them itself, on the loop).
_TLS: ssl.SSLContext | None = None
# The shared session and the loop it belongs to (a test suite runs many loops).
_SHARED: tuple[asyncio.AbstractEventLoop, aiohttp.ClientSession] | None = None


def prepare_client() -> None:
    """Build the shared session's TLS context (blocking: run it in the executor)."""
    global _TLS
    if _TLS is None:
        _TLS = ssl.create_default_context(cafile=certifi.where())


async def _session() -> aiohttp.ClientSession:
    """The shared session of the running loop, created on first use."""
    global _SHARED
    loop = asyncio.get_running_loop()
    if _SHARED is not None and _SHARED[0] is loop and not _SHARED[1].closed:
        return _SHARED[1]
    if _TLS is None:
        await asyncio.to_thread(prepare_client)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=_TLS))
    _SHARED = (loop, session)
    return session


async def async_close_client() -> None:
    """Close the running loop's shared session (the next call opens a new one)."""
    global _SHARED
    shared, _SHARED = _SHARED, None
    if shared is not None and shared[0] is asyncio.get_running_loop():
        await shared[1].close()


def _timeout(seconds: float) -> aiohttp.ClientTimeout:
    """httpx's `Timeout(seconds)` in aiohttp's terms: each wait (a connection, a read
    between two pieces of the answer) is bounded, not the whole answer."""
    return aiohttp.ClientTimeout(
        total=None, connect=seconds, sock_connect=seconds, sock_read=seconds
    )


def _json_body(body: dict[str, Any]) -> bytes:
    """The request body as httpx wrote it (compact, UTF-8, no NaN)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


async def _lines(response: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """The response's lines as they arrive (Ollama sends one JSON object per line).

    Split here, not with aiohttp's `readline`, which fails on a line over 128 KiB (a long
    tool call's arguments). A class-based iterator underneath: nothing is left for the
    loop to close when the reader stops early.
    """
    pending = b""
    async for data in response.content.iter_any():
        pending += data
        if b"\n" in data:
            *whole, pending = pending.split(b"\n")
            for line in whole:
                yield line.decode(errors="replace")
    if pending:
        yield pending.decode(errors="replace")


class OllamaChatModel(BaseChatModel):
    """A chat model served by Ollama (`ollama_chat/<name>`), streamed natively."""

    model: str
    api_base: str | None = None
    request_timeout: float = 60
    temperature: float | None = None
    max_tokens: int | None = None
    # Ollama's own fields (see access.ModelSettings).
    context_window: int | None = None
    keep_alive: int | None = None
    think: bool | None = None
    # A private attribute: never in the model's repr, its serialization or a trace.
    _api_key: str | None = None

    def __init__(self, *, api_key: str | None = None, **fields: Any) -> None:
        super().__init__(**fields)
        self._api_key = api_key

    @property
    def _llm_type(self) -> str:
        return "ollama-native"

    @property
    def name_on_server(self) -> str:
        """The model's name as Ollama knows it (the string without its provider prefix)."""
        return self.model.partition("/")[2] or self.model

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, Any]:
        """The model with tools, sent as OpenAI's function format (Ollama reads it)."""
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _options(self, stop: list[str] | None) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.max_tokens is not None:
            options["num_predict"] = self.max_tokens
        if self.context_window is not None:
            options["num_ctx"] = self.context_window
        if stop:
            options["stop"] = list(stop)
        return options

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _request(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        tools: Sequence[dict[str, Any]] | None,
        response_format: Any,
        *,
        stream: bool = True,
    ) -> tuple[str, dict[str, Any]]:
        """The URL and JSON body of one /api/chat request."""
        body = request_body(
            self.name_on_server,
            messages,
            options=self._options(stop),
            keep_alive=self.keep_alive,
            think=self.think,
            tools=tools,
            response_format=response_format,
            stream=stream,
        )
        return f"{(self.api_base or DEFAULT_BASE).rstrip('/')}/api/chat", body

    async def answer_chunks(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        response_format: Any = None,
    ) -> AsyncIterator[AIMessageChunk]:
        """The chunks of one answer, as they arrive; the response is closed when the
        reader stops early (an answer too long or too slow) as when it ends."""
        url, body = self._request(messages, stop, tools, response_format)
        async with SHARED_CLIENT_USERS.use():
            session = await _session()
            response = await session.post(
                url,
                data=_json_body(body),
                headers={"Content-Type": "application/json", **self._headers()},
                timeout=_timeout(self.request_timeout),
                allow_redirects=False,
            )
            try:
                if response.status >= 400:
                    text = await response.text(errors="replace")
                    raise OllamaAnswerError(
                        _error_text(text, response.status), response.status, response.headers
                    )
                reader = AnswerReader()
                async with aclosing(_lines(response)) as lines:
                    async for line in lines:
                        if (chunk := reader.chunk(line)) is not None:
                            yield chunk
            finally:
                # A whole answer leaves its connection to the pool; one stopped early
                # (too long, too slow, a failure) closes it, unread.
                if response.content.at_eof():
                    response.release()
                else:
                    response.close()

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        async with aclosing(self.answer_chunks(messages, stop, **kwargs)) as chunks:
            async for message in chunks:
                generation = ChatGenerationChunk(message=message)
                if run_manager:
                    await run_manager.on_llm_new_token(message.text, chunk=generation)
                yield generation

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return await agenerate_from_stream(self._astream(messages, stop, run_manager, **kwargs))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        response_format: Any = None,
    ) -> ChatResult:
        """LangChain's blocking `invoke`: one answer, not streamed, on a client of its own.

        Blocking: never on the event loop (the integration itself always awaits the model).
        """
        url, body = self._request(messages, stop, tools, response_format, stream=False)
        prepare_client()
        with httpx.Client(verify=_TLS, follow_redirects=False) as client:
            response = client.post(
                url,
                json=body,
                headers=self._headers(),
                timeout=httpx.Timeout(self.request_timeout),
            )
        if response.is_error:
            raise OllamaAnswerError(
                _error_text(response.text, response.status_code),
                response.status_code,
                response.headers,
            )
        answer = AnswerReader().chunk(response.text)
        if answer is None:
            raise OllamaAnswerError("Ollama answered nothing")
        return ChatResult(generations=[ChatGeneration(message=message_chunk_to_message(answer))])


def _error_text(text: str, status: int) -> str:
    """What Ollama said about a failed request (its JSON `error`, else the body)."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("error"):
        return str(data["error"])
    return text[:500] or f"HTTP {status}"
