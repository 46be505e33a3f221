"""A fake OpenAI-compatible server: POST /v1/chat/completions and GET /v1/models.

What LiteLLM's `openai/<name>` provider (the OpenAI SDK underneath) talks to, with
`api_base=server.api_base`. Streams are server-sent events, `data: {chunk}` blocks
ending with `data: [DONE]`, shaped like OpenAI's own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
import itertools
import json
import time
from typing import Any, Final

from aiohttp import web

from .script import ErrorReply, Reply, StreamFault, pieces
from .server import DISCONNECT, Disconnect, FakeModelServer, Frames, Handler

# error.type when a scripted error names none. OpenAI itself says
# "invalid_request_error" for most 4xx, and LiteLLM maps any error whose text mentions
# that to BadRequestError whatever the status (unless the message or code says
# otherwise); the openai SDKs Home Assistant pins put the whole body into that text.
# These types let the status decide instead; script error_type="invalid_request_error"
# to reproduce OpenAI exactly.
_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "requests",
}
_FINGERPRINT: Final = "fp_fake"


def _sse(data: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


class FakeOpenAIServer(FakeModelServer):
    """OpenAI chat completions; reach it as model="openai/<name>", api_base=server.api_base."""

    STREAM_CONTENT_TYPE = "text/event-stream"

    def __init__(self) -> None:
        super().__init__()
        # Ids are unique for the server's lifetime, as a client may key state on them.
        self._completion_ids = itertools.count(1)
        self._call_ids = itertools.count(1)

    @property
    def api_base(self) -> str:
        """The base URL an OpenAI client wants: http://127.0.0.1:PORT/v1."""
        return f"{self.base_url}/v1"

    def _routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("POST", "/v1/chat/completions", self._handle_chat),
            ("GET", "/v1/models", self._list_models),
        ]

    async def _list_models(self, request: web.Request) -> web.Response:
        if (refusal := self._auth_refusal(request)) is not None:
            return self._error_response(refusal)
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "fake"}
            for name in sorted(self.models or ())
        ]
        return web.json_response({"object": "list", "data": data})

    # -- protocol hooks --------------------------------------------------------------

    def _wants_stream(self, body: Mapping[str, Any]) -> bool:
        return bool(body.get("stream", False))

    def _error_response(self, error: ErrorReply) -> web.Response:
        default_type = "server_error" if error.status >= 500 else "api_error"
        body = {
            "error": {
                "message": error.message,
                "type": error.error_type or _ERROR_TYPES.get(error.status, default_type),
                "param": None,
                "code": error.code,
            }
        }
        return web.json_response(body, status=error.status, headers=dict(error.headers))

    # The refusals are OpenAI's own, word for word where LiteLLM reads the words.

    def _auth_error(self) -> ErrorReply:
        return ErrorReply(
            status=401,
            message=(
                "Incorrect API key provided. You can find your API key at "
                "https://platform.openai.com/account/api-keys."
            ),
            code="invalid_api_key",
            error_type="invalid_request_error",
        )

    def _unknown_model_error(self, model: str) -> ErrorReply:
        return ErrorReply(
            status=404,
            message=f"The model `{model}` does not exist or you do not have access to it.",
            code="model_not_found",
            error_type="invalid_request_error",
        )

    def _completion(self, body: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            # OpenAI sends null content when the answer is only tool calls.
            "content": reply.text if reply.text or not reply.tool_calls else None,
            "refusal": None,
        }
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": self._next_call_id(),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                }
                for call in reply.tool_calls
            ]
        return {
            "id": self._next_completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model"),
            "system_fingerprint": _FINGERPRINT,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self._finish_reason(reply),
                }
            ],
            "usage": _usage(*reply.usage(body)),
        }

    def _stream_frames(self, body: Mapping[str, Any], reply: Reply) -> Frames:
        return _Stream(self, body, reply).frames()

    # -- helpers ---------------------------------------------------------------------

    def _next_completion_id(self) -> str:
        return f"chatcmpl-fake{next(self._completion_ids)}"

    def _next_call_id(self) -> str:
        return f"call_{next(self._call_ids)}"

    @staticmethod
    def _finish_reason(reply: Reply) -> str:
        if reply.finish_reason is not None:
            return reply.finish_reason
        return "tool_calls" if reply.tool_calls else "stop"


class _Stream:
    """The chunks of one streamed completion, in OpenAI's order.

    A role chunk, text pieces, then each tool call (id and name first, the encoded
    arguments split over following chunks, one call after the other, like OpenAI),
    a finish chunk, the usage chunk if stream_options.include_usage, and [DONE].
    A scripted fault comes right before the finish chunk.
    """

    def __init__(self, server: FakeOpenAIServer, body: Mapping[str, Any], reply: Reply) -> None:
        self._server = server
        self._body = body
        self._reply = reply
        self._id = server._next_completion_id()
        self._created = int(time.time())
        stream_options = body.get("stream_options") or {}
        self._include_usage = bool(stream_options.get("include_usage"))

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        data: dict[str, Any] = {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._body.get("model"),
            "system_fingerprint": _FINGERPRINT,
            "choices": choices,
        }
        if self._include_usage:
            # With include_usage, OpenAI sends "usage": null on every other chunk.
            data["usage"] = None
        data.update(extra)
        return _sse(data)

    def _delta(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return self._chunk([choice])

    def frames(self) -> Iterator[bytes | Disconnect]:
        reply = self._reply
        yield self._delta({"role": "assistant", "content": "", "refusal": None})
        for piece in reply.text_pieces():
            yield self._delta({"content": piece})
        for index, call in enumerate(reply.tool_calls):
            head = {
                "index": index,
                "id": self._server._next_call_id(),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            yield self._delta({"tool_calls": [head]})
            for fragment in pieces(call.arguments_json, reply.chunk_size):
                yield self._delta(
                    {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}
                )
        if reply.fault is StreamFault.DISCONNECT:
            yield DISCONNECT
            return
        if reply.fault is StreamFault.INVALID_JSON:
            # A chunk cut in the middle of its JSON.
            yield self._delta({"content": "lost"})[:40] + b"\n\n"
        yield self._delta({}, self._server._finish_reason(reply))
        if self._include_usage:
            yield self._chunk([], usage=_usage(*reply.usage(self._body)))
        yield b"data: [DONE]\n\n"
