"""The fake Ollama server of the tests, with absolute timestamps per chat request.

The fake servers (fakes/) record each response's timing relative to its own arrival. A
benchmark needs to line the server's moments up with the client's (the first body byte
against the first ChatLog delta), so this subclass stamps every chat request with
`time.perf_counter()` values, which are comparable across the server's thread and Home
Assistant's loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
import time
from typing import Any

from aiohttp import web

from fakes import FakeOllamaServer
from fakes.script import AnyReply, Reply
from fakes.server import Frames

MODEL = "bench-model"


@dataclass(slots=True)
class ChatRecord:
    """One chat request as the server saw it (perf_counter seconds)."""

    arrived: float
    body: Mapping[str, Any] = field(default_factory=dict)
    first_frame: float | None = None  # the first body chunk handed to the transport
    done: float | None = None  # the response complete
    kind: str = "chat"  # or the name of the side route that answered it

    @property
    def server_time(self) -> float:
        """The server's own time on this request: arrival to complete body."""
        return (self.done or self.arrived) - self.arrived

    def last_user_text(self) -> str | None:
        """The newest user message of the request (how a turn is recognised)."""
        for message in reversed(self.body.get("messages", [])):
            if message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else None
        return None


_CURRENT: ContextVar[ChatRecord | None] = ContextVar("bench_chat_record", default=None)


type SideRoute = tuple[str, Callable[[Mapping[str, Any]], bool], Reply]


class TimedOllamaServer(FakeOllamaServer):
    """FakeOllamaServer that keeps a ChatRecord per chat request in `records`.

    `side_routes` answer requests that are not part of the scripted conversation (say, an
    agent summarising its history) without taking a scripted reply: (name, test on the
    request body, reply); the record's `kind` is the route's name.
    """

    def __init__(self) -> None:
        super().__init__()
        self.records: list[ChatRecord] = []
        self.side_routes: list[SideRoute] = []

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        record = ChatRecord(arrived=time.perf_counter())
        token = _CURRENT.set(record)
        try:
            return await super()._handle_chat(request)
        finally:
            record.done = time.perf_counter()
            _CURRENT.reset(token)
            self.records.append(record)

    async def _read_json(self, request: web.Request) -> dict[str, Any] | None:
        body = await super()._read_json(request)
        if (record := _CURRENT.get()) is not None and body is not None:
            record.body = body
        return body

    def next_reply(self) -> AnyReply | None:
        """A side route's reply if one matches the request, else the script's next."""
        record = _CURRENT.get()
        if record is not None:
            for name, matches, reply in self.side_routes:
                if matches(record.body):
                    record.kind = name
                    return reply
        return super().next_reply()

    def _stream_frames(self, body: Mapping[str, Any], reply: Reply) -> Frames:
        record = _CURRENT.get()
        if record is not None:
            record.body = body
        return self._stamped(super()._stream_frames(body, reply), record)

    def _completion(self, body: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
        record = _CURRENT.get()
        if record is not None:
            record.body = body
            record.first_frame = time.perf_counter()
        return super()._completion(body, reply)

    @staticmethod
    def _stamped(frames: Frames, record: ChatRecord | None) -> Iterator[Any]:
        for index, frame in enumerate(frames):
            if index == 0 and record is not None:
                record.first_frame = time.perf_counter()
            yield frame

    def other_paths_since(self, index: int) -> list[str]:
        """Requests other than chat ("POST /api/show", ...) from `paths[index]` on."""
        return [path for path in self.paths[index:] if path != "POST /api/chat"]

    def forget(self) -> None:
        """Drop what was recorded so far (long runs would otherwise keep every body)."""
        self.requests.clear()
        self.records.clear()
        self.paths.clear()
        self.timings.clear()
