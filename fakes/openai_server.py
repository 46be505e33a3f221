"""A fake OpenAI-compatible server: POST /v1/chat/completions, GET /v1/models, embeddings,
and image generation (POST /v1/images/generations, scripted through `server.images`).

What LiteLLM's `openai/<name>` provider (the OpenAI SDK underneath) talks to, with
`api_base=server.api_base`. Streams are server-sent events, `data: {chunk}` blocks
ending with `data: [DONE]`, shaped like OpenAI's own.

Image content parts (`{"type": "image_url", "image_url": {"url": ...}}`) are checked as
OpenAI checks them before answering: only in user messages, an http(s) URL or a base64
data URL of a JPEG, PNG, GIF or WebP image whose bytes are that format; anything else is
refused with HTTP 400. `images_of(request)` gives a recorded request's images back as
bytes, so a test can assert exactly which picture reached the model.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Mapping
import hashlib
import itertools
import json
import re
import time
from typing import Any, Final

from aiohttp import BodyPartReader, web
import numpy as np

from .image_script import ImageReply, ImageScript, RawReply
from .script import ErrorReply, Reply, StreamFault, estimate_tokens, pieces
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
EMBEDDING_DIMS: Final = 32
_WORD = re.compile(r"[^\W_]+")
# The image formats OpenAI accepts in a data URL, and how each one's bytes begin.
IMAGE_SIGNATURES: Final = {
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
_DATA_URL = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)", re.DOTALL)


def word_vector(text: str, concepts: Mapping[str, str] | None = None) -> list[float]:
    """A bag of words hashed into EMBEDDING_DIMS dimensions: texts sharing words are close.

    `concepts` maps words to a concept word (e.g. "bicycle" -> "bike"): a test gives the
    fake model a little meaning that way, so texts about one concept become close without
    sharing a word.
    """
    vector = [0.0] * EMBEDDING_DIMS
    for word in _WORD.findall(text.lower()):
        concept = (concepts or {}).get(word, word)
        slot = int.from_bytes(hashlib.sha256(concept.encode()).digest()[:4], "big")
        vector[slot % EMBEDDING_DIMS] += 1.0
    return vector


def _image_parts(body: Mapping[str, Any]) -> Iterator[tuple[int, str, Any]]:
    """(message index, role, image_url value) of every image part of a request."""
    for index, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image_url":
                yield index, str(message.get("role")), part.get("image_url")


def _decoded_image(url: str) -> tuple[str, bytes] | str:
    """A data URL's image type and bytes, or why OpenAI would refuse it."""
    match = _DATA_URL.fullmatch(url)
    if match is None:
        return "Invalid image URL: expected an http(s) URL or a base64 data URL."
    mime_type = match["type"].lower()
    if mime_type not in IMAGE_SIGNATURES:
        return f"Invalid image data URL: unsupported MIME type '{mime_type}'."
    try:
        data = base64.b64decode(match["data"], validate=True)
    except ValueError:
        return "Invalid image data URL: the data is not valid base64."
    if not data.startswith(IMAGE_SIGNATURES[mime_type]):
        return "You uploaded an unsupported image. Please make sure your image is valid."
    return mime_type, data


def images_of(body: Mapping[str, Any]) -> list[tuple[str, bytes]]:
    """The images (type, bytes) of a recorded request's data URLs, in order."""
    images = []
    for _index, _role, value in _image_parts(body):
        decoded = _decoded_image(str((value or {}).get("url", "")))
        if isinstance(decoded, tuple):
            images.append(decoded)
    return images


def _image_refusal(body: Mapping[str, Any]) -> ErrorReply | None:
    """The 400 OpenAI answers a request with a misplaced or broken image part, if any."""
    for index, role, value in _image_parts(body):
        param = f"messages[{index}].content"
        if role != "user":
            return ErrorReply(
                status=400,
                message=f"Invalid '{param}': image parts are only allowed in user messages.",
                code="invalid_value",
                error_type="invalid_request_error",
            )
        url = value.get("url") if isinstance(value, dict) else None
        if not isinstance(url, str):
            return ErrorReply(
                status=400,
                message=f"Missing required parameter: '{param}.image_url.url'.",
                code="missing_required_parameter",
                error_type="invalid_request_error",
            )
        if url.startswith(("http://", "https://")):
            continue
        decoded = _decoded_image(url)
        if isinstance(decoded, str):
            return ErrorReply(
                status=400,
                message=decoded,
                code="invalid_image_format",
                error_type="invalid_request_error",
            )
    return None


def _sse(data: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()


def _usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        # As OpenAI reports its automatic prompt caching.
        "prompt_tokens_details": {"cached_tokens": min(cached, prompt), "audio_tokens": 0},
    }


def _prompt_text(body: Mapping[str, Any]) -> str:
    """What a prefix cache compares: tools, then messages, as sent."""
    return json.dumps(body.get("tools") or []) + json.dumps(body.get("messages") or [])


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common beginning of two strings (a binary search over slice
    comparisons, which run in C: prompts are tens of kilobytes)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


# How many earlier requests the fake's prefix cache remembers (a provider's cache keeps
# recent prompts for minutes; comparing with every request of a long test would make
# each request cost more than the last).
CACHED_PROMPTS = 16


class FakeOpenAIServer(FakeModelServer):
    """OpenAI chat completions; reach it as model="openai/<name>", api_base=server.api_base."""

    STREAM_CONTENT_TYPE = "text/event-stream"

    def __init__(self) -> None:
        super().__init__()
        # Ids are unique for the server's lifetime, as a client may key state on them.
        self._completion_ids = itertools.count(1)
        self._call_ids = itertools.count(1)
        # Embeddings: the vector of one text (tests may replace it), every request body
        # with the Authorization header it came with, and an error to answer while set.
        self.embed_text: Callable[[str], list[float]] = word_vector
        self.embedding_requests: list[dict[str, Any]] = []
        self.embedding_authorizations: list[str | None] = []
        self.embedding_error: ErrorReply | None = None
        # Prompt texts of recent requests, by the id of their body (see cached_tokens).
        self._prompt_texts: dict[int, tuple[Mapping[str, Any], str]] = {}
        # Image generation: its own script and record (credentials: the Authorization
        # header), and the images answered as links, served under /files/images/.
        self.images = ImageScript()
        self._linked_images: dict[str, tuple[bytes, bool]] = {}
        self._image_ids = itertools.count(1)

    @property
    def api_base(self) -> str:
        """The base URL an OpenAI client wants: http://127.0.0.1:PORT/v1."""
        return f"{self.base_url}/v1"

    def _routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("POST", "/v1/chat/completions", self._handle_chat),
            ("GET", "/v1/models", self._list_models),
            ("POST", "/v1/embeddings", self._handle_embeddings),
            ("POST", "/v1/images/generations", self._handle_images),
            ("POST", "/v1/images/edits", self._handle_image_edits),
            ("GET", "/files/images/{name}", self._serve_linked_image),
        ]

    async def _handle_images(self, request: web.Request) -> web.Response:
        """OpenAI's image generation: {created, data: [{b64_json | url, revised_prompt}]},
        and for gpt-image models their usage and output fields. Like OpenAI, DALL-E
        answers a link unless asked for b64_json; gpt-image models always answer base64."""
        body = await self._read_json(request)
        if body is None:
            return self._error_response(ErrorReply(status=400, message="body is not JSON"))
        return self._image_response(request, body)

    async def _handle_image_edits(self, request: web.Request) -> web.Response:
        """OpenAI's image edits: a multipart form (model, prompt, n, ... and the images as
        `image[]` files), answered like a generation. Recorded in `images.requests` as the
        form's fields, the files under "image[]" as {filename, content_type, data}."""
        if not request.content_type.startswith("multipart/"):
            return self._error_response(ErrorReply(status=400, message="expected a form"))
        body: dict[str, Any] = {}
        files: list[dict[str, Any]] = []
        async for part in await request.multipart():
            if not isinstance(part, BodyPartReader) or part.name is None:
                continue
            if part.filename is not None:
                content_type = part.headers.get("Content-Type", "")
                data = bytes(await part.read())
                files.append(
                    {"filename": part.filename, "content_type": content_type, "data": data}
                )
            else:
                body[part.name] = await part.text()
        body["image[]"] = files
        return self._image_response(request, body)

    def _image_response(self, request: web.Request, body: dict[str, Any]) -> web.Response:
        """Record an image request, then refuse it or answer the next scripted reply."""
        script = self.images
        script.requests.append(body)
        script.paths.append(request.path)
        script.credentials.append(request.headers.get("Authorization"))
        model = str(body.get("model", ""))
        reply = self._auth_refusal(request) or self._model_refusal(model) or script.next_reply()
        if isinstance(reply, ErrorReply):
            return self._error_response(reply)
        if isinstance(reply, RawReply):
            return web.Response(body=reply.body, content_type=reply.content_type)
        return web.json_response(self._image_answer(body, model, reply))

    def _image_answer(self, body: Mapping[str, Any], model: str, reply: ImageReply) -> dict:
        entry: dict[str, Any] = {}
        wants_link = body.get("response_format") == "url" or (
            model.startswith("dall-e") and body.get("response_format") is None
        )
        if reply.as_link or wants_link:
            entry["url"] = self.serve_image(reply.data)
        else:
            entry["b64_json"] = base64.b64encode(reply.data).decode()
        if reply.revised_prompt is not None:
            entry["revised_prompt"] = reply.revised_prompt
        answer: dict[str, Any] = {"created": int(time.time()), "data": [entry]}
        if model.startswith("gpt-image"):
            prompt_tokens = estimate_tokens(str(body.get("prompt", "")))
            answer.update(
                background="opaque",
                output_format="png",
                quality="high",
                size=body.get("size") or "1024x1024",
                usage={
                    "input_tokens": prompt_tokens,
                    "output_tokens": 1056,
                    "total_tokens": prompt_tokens + 1056,
                    "input_tokens_details": {"text_tokens": prompt_tokens, "image_tokens": 0},
                },
            )
        return answer

    def serve_image(self, data: bytes, *, chunked: bool = False) -> str:
        """Serve `data` as a PNG at a new link of this server, as a provider's storage
        would (with its length, or `chunked` without); returns the link."""
        name = f"image-{next(self._image_ids)}.png"
        self._linked_images[name] = (data, chunked)
        return f"{self.base_url}/files/images/{name}"

    async def _serve_linked_image(self, request: web.Request) -> web.StreamResponse:
        served = self._linked_images.get(request.match_info["name"])
        if served is None:
            return web.Response(status=404, text="404 page not found")
        data, chunked = served
        if not chunked:
            return web.Response(body=data, content_type="image/png")
        response = web.StreamResponse(headers={"Content-Type": "image/png"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(data), 65536):
            await response.write(data[start : start + 65536])
        await response.write_eof()
        return response

    async def _list_models(self, request: web.Request) -> web.Response:
        if (refusal := self._auth_refusal(request)) is not None:
            return self._error_response(refusal)
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "fake"}
            for name in sorted(self.models or ())
        ]
        return web.json_response({"object": "list", "data": data})

    async def _handle_embeddings(self, request: web.Request) -> web.Response:
        """OpenAI's embeddings: float lists, or base64 little-endian float32 when asked."""
        body = await self._read_json(request)
        if body is None:
            return self._error_response(ErrorReply(status=400, message="body is not JSON"))
        self.embedding_requests.append(body)
        self.embedding_authorizations.append(request.headers.get("Authorization"))
        refusal = (
            self._auth_refusal(request)
            or self._model_refusal(str(body.get("model", "")))
            or self.embedding_error
        )
        if refusal is not None:
            return self._error_response(refusal)
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        if not all(isinstance(text, str) for text in texts):
            return self._error_response(ErrorReply(status=400, message="input must be text"))
        data = []
        for index, text in enumerate(texts):
            vector: list[float] | str = self.embed_text(text)
            if body.get("encoding_format") == "base64":
                vector = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
            data.append({"object": "embedding", "index": index, "embedding": vector})
        tokens = sum(len(text.split()) for text in texts)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    # -- protocol hooks --------------------------------------------------------------

    def _wants_stream(self, body: Mapping[str, Any]) -> bool:
        return bool(body.get("stream", False))

    def _prompt_refusal(self, body: Mapping[str, Any]) -> ErrorReply | None:
        return _image_refusal(body)

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
            "usage": _usage(*reply.usage(body), self.cached_tokens(body)),
        }

    def cached_tokens(self, body: Mapping[str, Any]) -> int:
        """Tokens of the longest beginning this request shares with an earlier one: what
        a provider's prefix cache would serve (estimated as the prompt tokens are)."""
        text = self._prompt_text_of(body)
        earlier = list(itertools.takewhile(lambda r: r is not body, self.requests))
        shared = max(
            (_common_prefix(text, self._prompt_text_of(r)) for r in earlier[-CACHED_PROMPTS:]),
            default=0,
        )
        return estimate_tokens(text[:shared]) if shared else 0

    def _prompt_text_of(self, body: Mapping[str, Any]) -> str:
        """A request's prompt text, made once for the recent requests (the cache holds the
        body too, so its id cannot be reused while the entry lives)."""
        key = id(body)
        cached = self._prompt_texts.get(key)
        if cached is not None and cached[0] is body:
            return cached[1]
        text = _prompt_text(body)
        self._prompt_texts[key] = (body, text)
        while len(self._prompt_texts) > 2 * CACHED_PROMPTS:
            del self._prompt_texts[next(iter(self._prompt_texts))]
        return text

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
        for piece in reply.streamed_pieces():
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
            usage = _usage(*reply.usage(self._body), self._server.cached_tokens(self._body))
            yield self._chunk([], usage=usage)
        yield b"data: [DONE]\n\n"
