"""A fake Ollama server: the native API, not Ollama's OpenAI-compatible one.

What LiteLLM's `ollama_chat/<name>` provider calls (POST /api/chat, and POST
/api/show when it looks up model info) and what the official `ollama` client used
by Home Assistant's core integration calls (GET /api/tags, POST /api/chat, POST
/api/pull), plus GET /api/version. Reach it with `api_base=server.base_url`.

Streams are NDJSON: one JSON object per line, the last with `"done": true`, the
done reason and Ollama's counters (token counts, durations in nanoseconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
import hashlib
import json
from typing import Any, Final

from aiohttp import web

from .script import ErrorReply, Reply, StreamFault, ToolCall
from .server import DISCONNECT, FakeModelServer, Frames, Handler

OLLAMA_VERSION: Final = "0.12.6"
# A chat template mentioning tools: LiteLLM's model info reads that as tool support.
_TEMPLATE: Final = "{{- if .Tools }}{{ .Tools }}{{ end }}{{ .Prompt }}"
_CONTEXT_LENGTH: Final = 8192
_DETAILS: Final = {
    "parent_model": "",
    "format": "gguf",
    "family": "llama",
    "families": ["llama"],
    "parameter_size": "3.2B",
    "quantization_level": "Q4_K_M",
}
# Nanoseconds per token in the reported durations: a steady, plausible fake speed.
_PROMPT_NS_PER_TOKEN: Final = 1_000_000
_EVAL_NS_PER_TOKEN: Final = 20_000_000


def _tagged(model: str) -> str:
    """Ollama's full model name: "llama3.2" is "llama3.2:latest"."""
    return model if ":" in model else f"{model}:latest"


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _line(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data).encode() + b"\n"


def _tool_call(index: int, call: ToolCall) -> dict[str, Any]:
    # Ollama sends arguments as an object, never as encoded JSON; a raw string from
    # add_raw_tool_call goes out as a string, which a real Ollama would never send.
    return {"function": {"index": index, "name": call.name, "arguments": call.arguments}}


class FakeOllamaServer(FakeModelServer):
    """Ollama's /api; reach it as model="ollama_chat/<name>", api_base=server.base_url.

    `models` names the installed models ("llama3.2" and "llama3.2:latest" are the
    same); /api/tags lists them, and a pull adds one.
    """

    STREAM_CONTENT_TYPE = "application/x-ndjson"

    def _routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("POST", "/api/chat", self._handle_chat),
            ("GET", "/api/tags", self._tags),
            ("POST", "/api/show", self._show),
            ("POST", "/api/pull", self._pull),
            ("GET", "/api/version", self._version),
        ]

    def _knows_model(self, model: str) -> bool:
        return self.models is not None and _tagged(model) in {_tagged(m) for m in self.models}

    # -- model management endpoints --------------------------------------------------

    async def _tags(self, request: web.Request) -> web.Response:
        if (refusal := self._auth_refusal(request)) is not None:
            return self._error_response(refusal)
        models = [
            {
                "name": name,
                "model": name,
                "modified_at": "2025-01-01T00:00:00Z",
                "size": 2_019_393_189,
                "digest": hashlib.sha256(name.encode()).hexdigest(),
                "details": _DETAILS,
            }
            for name in sorted({_tagged(m) for m in self.models or ()})
        ]
        return web.json_response({"models": models})

    async def _show(self, request: web.Request) -> web.Response:
        body = await self._read_json(request) or {}
        # The ollama client sends "model"; LiteLLM still sends the older "name".
        model = str(body.get("model") or body.get("name") or "")
        refusal = self._auth_refusal(request) or self._model_refusal(model)
        if refusal is not None:
            return self._error_response(refusal)
        return web.json_response(
            {
                "modelfile": f"FROM {_tagged(model)}\n",
                "parameters": "",
                "template": _TEMPLATE,
                "details": _DETAILS,
                "model_info": {
                    "general.architecture": "llama",
                    "llama.context_length": _CONTEXT_LENGTH,
                },
                "capabilities": ["completion", "tools"],
                "modified_at": "2025-01-01T00:00:00Z",
            }
        )

    async def _pull(self, request: web.Request) -> web.StreamResponse:
        body = await self._read_json(request) or {}
        if (refusal := self._auth_refusal(request)) is not None:
            return self._error_response(refusal)
        model = str(body.get("model") or body.get("name") or "")
        if self.models is not None:
            self.models.add(model)
        statuses = ["pulling manifest", "verifying sha256 digest", "writing manifest", "success"]
        if body.get("stream", True) is False:
            return web.json_response({"status": statuses[-1]})
        response = web.StreamResponse(headers={"Content-Type": self.STREAM_CONTENT_TYPE})
        await response.prepare(request)
        for status in statuses:
            await response.write(_line({"status": status}))
        await response.write_eof()
        return response

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": OLLAMA_VERSION})

    # -- protocol hooks --------------------------------------------------------------

    def _wants_stream(self, body: Mapping[str, Any]) -> bool:
        # Ollama streams unless told "stream": false.
        return body.get("stream", True) is not False

    def _error_response(self, error: ErrorReply) -> web.Response:
        return web.json_response(
            {"error": error.message}, status=error.status, headers=dict(error.headers)
        )

    def _auth_error(self) -> ErrorReply:
        return ErrorReply(status=401, message="unauthorized")

    def _unknown_model_error(self, model: str) -> ErrorReply:
        return ErrorReply(status=404, message=f"model '{model}' not found")

    def _completion(self, body: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.tool_calls:
            message["tool_calls"] = [
                _tool_call(index, call) for index, call in enumerate(reply.tool_calls)
            ]
        return self._done(body, reply, message)

    def _stream_frames(self, body: Mapping[str, Any], reply: Reply) -> Frames:
        """Text pieces, one chunk per tool call, then the done chunk.

        Ollama's streaming tool parser emits each call as soon as it is complete, so
        parallel calls come in separate chunks, told apart by `function.index`.
        LiteLLM ignores that index and numbers the calls of each chunk from 0; see
        tests/test_fakes.py for what that does to its stream builder and to LangChain.
        """
        model = body.get("model")

        def chunk(message: Mapping[str, Any]) -> bytes:
            return _line(
                {
                    "model": model,
                    "created_at": _now(),
                    "message": {"role": "assistant", "content": "", **message},
                    "done": False,
                }
            )

        for piece in reply.streamed_pieces():
            yield chunk({"content": piece})
        for index, call in enumerate(reply.tool_calls):
            yield chunk({"tool_calls": [_tool_call(index, call)]})
        if reply.fault is StreamFault.DISCONNECT:
            yield DISCONNECT
            return
        if reply.fault is StreamFault.INVALID_JSON:
            yield chunk({"content": "lost"})[:30] + b"\n"
        yield _line(self._done(body, reply, {"role": "assistant", "content": ""}))

    # -- helpers ---------------------------------------------------------------------

    def _done(
        self, body: Mapping[str, Any], reply: Reply, message: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The final object: message, done reason and Ollama's counters."""
        prompt, completion = reply.usage(body)
        prompt_ns = prompt * _PROMPT_NS_PER_TOKEN
        eval_ns = completion * _EVAL_NS_PER_TOKEN
        return {
            "model": body.get("model"),
            "created_at": _now(),
            "message": message,
            "done": True,
            # Ollama says "stop" after tool calls too; "length" when num_predict ran out.
            "done_reason": reply.finish_reason or "stop",
            "total_duration": prompt_ns + eval_ns,
            "load_duration": 0,
            "prompt_eval_count": prompt,
            "prompt_eval_duration": prompt_ns,
            "eval_count": completion,
            "eval_duration": eval_ns,
        }
