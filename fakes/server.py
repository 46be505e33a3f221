"""What every fake model server shares: lifecycle, recording, refusals, the reply flow.

A protocol module subclasses FakeModelServer and says how replies, errors and
streams look on its wire (see openai_server.py and ollama_server.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
import json
import time
from typing import Any, ClassVar, Final, Self

from aiohttp import web

from .background import BackgroundServer
from .script import AnyReply, ErrorReply, Reply, ScriptedReplies, StreamFault

HOST: Final = "127.0.0.1"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Disconnect:
    """Marks the place in a frame sequence where the server drops the connection."""


DISCONNECT: Final = Disconnect()

# What a protocol renders a reply into: raw body pieces, written one by one.
Frames = Iterable[bytes | Disconnect]


@dataclass(frozen=True, slots=True)
class ReplyTiming:
    """Server-side time of one chat response, in seconds from the request's arrival."""

    first_byte: float  # until the status line and headers were sent
    total: float  # until the body was complete (or the connection dropped)


class FakeModelServer(ScriptedReplies, ABC):
    """An HTTP server on 127.0.0.1 (random free port) that answers from a script.

    Use `async with Server() as server:` or start()/stop(). Settings a test may change
    at any time: `api_key` (None accepts any key), `models` (None accepts any model
    name), `first_byte_delay` (seconds, for replies that set none), `default_reply`.
    """

    # Content type of a streamed chat answer.
    STREAM_CONTENT_TYPE: ClassVar[str]

    def __init__(self) -> None:
        super().__init__()
        self.api_key: str | None = None
        self.models: set[str] | None = None
        self.first_byte_delay: float = 0.0
        # Every chat request body, in arrival order (refused ones included).
        self.requests: list[dict[str, Any]] = []
        # "METHOD /path" of every HTTP request, to see what a client really calls.
        self.paths: list[str] = []
        # One entry per chat response, same order as the responses were sent.
        self.timings: list[ReplyTiming] = []
        self._background: BackgroundServer | None = None
        self._port: int | None = None

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on a free port of 127.0.0.1 (served from a thread of its own)."""
        self._port = await self._new_background().start()

    async def stop(self) -> None:
        """Stop listening, end open responses and connections; safe to call twice."""
        background, self._background = self._background, None
        if background is not None:
            await background.stop()

    async def drop_connections(self) -> None:
        """Abort every open connection, idle keep-alive ones included; keep listening."""
        if self._background is not None:
            await self._background.drop_connections()

    async def refuse_connections(self, refuse: bool) -> None:
        """Stop listening (connecting is refused) or listen on the same port again."""
        if self._background is not None:
            await self._background.refuse_connections(refuse)

    def start_sync(self) -> None:
        """start() for a plain script without an event loop."""
        self._port = self._new_background().start_sync()

    def stop_sync(self) -> None:
        """stop() for a plain script without an event loop."""
        background, self._background = self._background, None
        if background is not None:
            background.stop_sync()

    def _new_background(self) -> BackgroundServer:
        if self._background is not None:
            raise RuntimeError("server already started")
        # Chat requests carry the whole history and tool schemas: allow large bodies.
        app = web.Application(client_max_size=64 * 1024 * 1024)
        for method, path, handler in self._routes():
            app.router.add_route(method, path, self._recorded(handler))
        # Anything else is recorded too (a client calling a wrong URL shows in paths).
        app.router.add_route("*", "/{tail:.*}", self._recorded(self._not_found))
        self._background = BackgroundServer(app, HOST, name=type(self).__name__)
        return self._background

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def __enter__(self) -> Self:
        self.start_sync()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop_sync()

    @property
    def port(self) -> int:
        """The TCP port; only valid once started."""
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT (no trailing slash)."""
        return f"http://{HOST}:{self.port}"

    # -- introspection ---------------------------------------------------------------

    @property
    def request_count(self) -> int:
        """How many chat requests arrived."""
        return len(self.requests)

    @property
    def first_byte_times(self) -> list[float]:
        """Server-side seconds to first byte of each chat response."""
        return [timing.first_byte for timing in self.timings]

    @property
    def server_time(self) -> float:
        """Total seconds the server spent on chat responses (to subtract in benchmarks)."""
        return sum(timing.total for timing in self.timings)

    async def wait_for_requests(self, count: int, timeout: float = 5.0) -> None:
        """Wait until at least `count` chat requests have arrived (TimeoutError if not)."""
        async with asyncio.timeout(timeout):
            # Polled: requests arrive on the server's own thread and loop, and an
            # executor-based wait would leave a thread behind.
            while self.request_count < count:  # noqa: ASYNC110
                await asyncio.sleep(0.005)

    # -- what a protocol provides ----------------------------------------------------

    @abstractmethod
    def _routes(self) -> Iterable[tuple[str, str, Handler]]:
        """(method, path, handler) of each endpoint; chat goes to self._handle_chat."""

    @abstractmethod
    def _wants_stream(self, body: Mapping[str, Any]) -> bool:
        """Whether the chat request asks for a streamed answer (defaults differ)."""

    @abstractmethod
    def _error_response(self, error: ErrorReply) -> web.Response:
        """An HTTP error with the provider's error body."""

    @abstractmethod
    def _auth_error(self) -> ErrorReply:
        """The error for a request without the right API key."""

    @abstractmethod
    def _unknown_model_error(self, model: str) -> ErrorReply:
        """The error for a model name not in self.models."""

    @abstractmethod
    def _stream_frames(self, body: Mapping[str, Any], reply: Reply) -> Frames:
        """The body of a streamed answer: chunks, and DISCONNECT where a fault cuts it."""

    @abstractmethod
    def _completion(self, body: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
        """The JSON body of a non-streamed answer."""

    # -- shared request handling -----------------------------------------------------

    def _recorded(self, handler: Handler) -> Handler:
        """Wrap a handler to record the method and path of each request."""

        async def recorded(request: web.Request) -> web.StreamResponse:
            self.paths.append(f"{request.method} {request.path}")
            return await handler(request)

        return recorded

    async def _not_found(self, request: web.Request) -> web.Response:
        return web.Response(status=404, text="404 page not found")

    def _auth_refusal(self, request: web.Request) -> ErrorReply | None:
        """The error for a request without the right API key, if api_key is set."""
        if self.api_key is None:
            return None
        if request.headers.get("Authorization") == f"Bearer {self.api_key}":
            return None
        return self._auth_error()

    def _model_refusal(self, model: str) -> ErrorReply | None:
        """The error for a model name the server does not have, if models is set."""
        if self.models is None or self._knows_model(model):
            return None
        return self._unknown_model_error(model)

    def _prompt_refusal(self, body: Mapping[str, Any]) -> ErrorReply | None:
        """The error for a prompt the server will not read (too long), if any."""
        return None

    def _knows_model(self, model: str) -> bool:
        """Whether `model` is one of self.models (protocols may normalise names)."""
        return self.models is not None and model in self.models

    async def _read_json(self, request: web.Request) -> dict[str, Any] | None:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return None
        return body if isinstance(body, dict) else None

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        """The chat endpoint of every protocol: refuse, or answer with the next reply."""
        arrived = time.perf_counter()
        body = await self._read_json(request)
        if body is None:
            return self._error_response(ErrorReply(status=400, message="body is not a JSON object"))
        self.requests.append(body)

        # A real server refuses these before any generation: no scripted reply is used.
        reply: AnyReply | None = (
            self._auth_refusal(request)
            or self._model_refusal(str(body.get("model", "")))
            or self._prompt_refusal(body)
        )
        if reply is None:
            reply = self.reply_to(body)
        if reply is None:
            reply = ErrorReply(
                status=500,
                message=(
                    f"fake server: chat request #{self.request_count} was not scripted "
                    "(queue empty and default_reply is None)"
                ),
            )

        delay = self.first_byte_delay if reply.first_byte_delay is None else reply.first_byte_delay
        if delay > 0:
            await asyncio.sleep(delay)

        if isinstance(reply, ErrorReply):
            return self._finished(self._error_response(reply), arrived)
        if reply.fault is StreamFault.RESET:
            # Aborted, not closed: the client's read fails with a reset connection. The
            # response returned is never written (aiohttp sees the transport gone).
            assert request.transport is not None
            request.transport.abort()
            return self._finished(web.Response(status=204), arrived)
        if self._wants_stream(body):
            frames = self._stream_frames(body, reply)
            return await self._write(request, frames, self.STREAM_CONTENT_TYPE, reply, arrived)
        payload = json.dumps(self._completion(body, reply)).encode()
        if reply.fault is StreamFault.INVALID_JSON:
            # The body is cut short, so it is not JSON (but the connection is fine).
            payload = payload[: len(payload) // 2]
        elif reply.fault is StreamFault.DISCONNECT:
            # Headers promise the full length; the connection drops halfway.
            return await self._write(
                request,
                [payload[: len(payload) // 2], DISCONNECT],
                "application/json",
                reply,
                arrived,
                content_length=len(payload),
            )
        response = web.Response(body=payload, content_type="application/json")
        return self._finished(response, arrived)

    def _finished(self, response: web.Response, arrived: float) -> web.Response:
        """Record the timing of a response sent in one piece (aiohttp sends it next)."""
        elapsed = time.perf_counter() - arrived
        self.timings.append(ReplyTiming(first_byte=elapsed, total=elapsed))
        return response

    async def _write(
        self,
        request: web.Request,
        frames: Frames,
        content_type: str,
        reply: Reply,
        arrived: float,
        content_length: int | None = None,
    ) -> web.StreamResponse:
        """Send frames as they come, with the reply's chunk delay, recording the timing."""
        response = web.StreamResponse(headers={"Content-Type": content_type})
        if content_length is not None:
            response.content_length = content_length
        await response.prepare(request)
        first_byte = time.perf_counter() - arrived
        try:
            for index, frame in enumerate(frames):
                if isinstance(frame, Disconnect):
                    # Abort (no FIN-after-flush niceties): the client sees the body end
                    # mid-stream, like a proxy or server crash. aiohttp then just logs
                    # the failed end of response at debug level.
                    assert request.transport is not None
                    request.transport.abort()
                    return response
                if index and reply.chunk_delay > 0:
                    await asyncio.sleep(reply.chunk_delay)
                elif reply.endless:
                    # Never a busy loop: the server must see the client hang up.
                    await asyncio.sleep(0)
                await response.write(frame)
            await response.write_eof()
            return response
        finally:
            self.timings.append(
                ReplyTiming(first_byte=first_byte, total=time.perf_counter() - arrived)
            )
