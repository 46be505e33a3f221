"""A fake Gemini API server for image generation, on 127.0.0.1.

What LiteLLM's `gemini/<model>` image generation talks to with
`api_base=server.api_base`: Imagen models at `POST /v1beta/models/<model>:predict`
({instances: [{prompt}], parameters: {sampleCount, aspectRatio}} →
{predictions: [{bytesBase64Encoded, mimeType}]}), Gemini's image models at
`POST /v1beta/models/<model>:generateContent` ({contents, generationConfig} →
{candidates: [{content: {parts: [{text}, {inlineData: {mimeType, data}}]}}],
usageMetadata}). The key travels in the `x-goog-api-key` header; errors are Google's
{error: {code, message, status}}.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Final, Self

from aiohttp import web

from .background import BackgroundServer
from .image_script import ImageReply, ImageScript, RawReply
from .script import ErrorReply, estimate_tokens
from .server import HOST

# Google's status names of the HTTP errors a test scripts.
_STATUSES: Final = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class FakeGeminiServer:
    """Gemini image generation; reach it as model="gemini/<name>", api_base=server.api_base.

    `api_key` (None accepts any) is checked like Google does: a wrong key is a 400
    INVALID_ARGUMENT whose reason is API_KEY_INVALID. Replies are scripted in `images`.
    """

    def __init__(self) -> None:
        self.api_key: str | None = None
        self.images = ImageScript()
        self._background: BackgroundServer | None = None
        self._port: int | None = None

    async def start(self) -> None:
        """Listen on a free port of 127.0.0.1 (served from a thread of its own)."""
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_post("/v1beta/models/{target}", self._handle)
        self._background = BackgroundServer(app, HOST, name=type(self).__name__)
        self._port = await self._background.start()

    async def stop(self) -> None:
        """Stop listening and end open connections; safe to call twice."""
        background, self._background = self._background, None
        if background is not None:
            await background.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def api_base(self) -> str:
        """The base URL LiteLLM's gemini provider wants: http://127.0.0.1:PORT/v1beta."""
        if self._port is None:
            raise RuntimeError("server not started")
        return f"http://{HOST}:{self._port}/v1beta"

    async def _handle(self, request: web.Request) -> web.Response:
        model, _, method = request.match_info["target"].partition(":")
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = None
        script = self.images
        if not isinstance(body, dict) or method not in ("predict", "generateContent"):
            return _error(ErrorReply(status=400, message="Invalid JSON payload received."))
        script.requests.append(body)
        script.paths.append(request.path)
        script.credentials.append(request.headers.get("x-goog-api-key"))
        if self.api_key is not None and request.headers.get("x-goog-api-key") != self.api_key:
            return _key_refused()
        reply = script.next_reply()
        if isinstance(reply, ErrorReply):
            return _error(reply)
        if isinstance(reply, RawReply):
            return web.Response(body=reply.body, content_type=reply.content_type)
        if method == "predict":
            return web.json_response(_prediction(reply))
        return web.json_response(_content(model, body, reply))


def _prediction(reply: ImageReply) -> dict[str, Any]:
    encoded = base64.b64encode(reply.data).decode()
    return {"predictions": [{"bytesBase64Encoded": encoded, "mimeType": "image/png"}]}


def _content(model: str, body: dict[str, Any], reply: ImageReply) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if reply.text:
        parts.append({"text": reply.text})
    parts.append(
        {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(reply.data).decode()}}
    )
    prompt_tokens = estimate_tokens(json.dumps(body.get("contents") or []))
    return {
        "candidates": [
            {"content": {"parts": parts, "role": "model"}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": 1290,
            "totalTokenCount": prompt_tokens + 1290,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt_tokens}],
        },
        "modelVersion": model,
        "responseId": "fake-response",
    }


def _error(error: ErrorReply) -> web.Response:
    status = _STATUSES.get(error.status, "UNKNOWN")
    body = {"error": {"code": error.status, "message": error.message, "status": status}}
    return web.json_response(body, status=error.status, headers=dict(error.headers))


def _key_refused() -> web.Response:
    body = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                }
            ],
        }
    }
    return web.json_response(body, status=400)
