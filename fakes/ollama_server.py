"""A fake Ollama server: the native API, not Ollama's OpenAI-compatible one.

What the integration's native Ollama model calls (POST /api/chat, agent/models/ollama_chat.py;
POST /api/show for the model's context length), what LiteLLM's `ollama_chat/<name>`
provider calls (the same, as the tests' reference), and what the official `ollama` client
used by Home Assistant's core integration calls (GET /api/tags, POST /api/chat, POST
/api/pull), plus GET /api/version. Reach it with `api_base=server.base_url`.

Streams are NDJSON: one JSON object per line, the last with `"done": true`, the
done reason and Ollama's counters (token counts, durations in nanoseconds).

Like a real Ollama where it matters for fitting a request into the model's window:

- The prompt is counted: the request rendered as a chat template would (the tools as
  JSON in the first turn, as Qwen- and Llama-style templates place them, then each message
  as a role line, its content, and its tool calls as JSON), one token per
  `chars_per_token` characters (default 4, rounded up): a deterministic stand-in for a
  model's tokenizer, close to a real one on English text and JSON.
- The window is the request's `options.num_ctx`, or `default_window` (4,096, Ollama's own
  default on machines with less than 24 GiB of GPU memory) when it names none, bounded
  by the model's context length (`context_length`, which /api/show reports).
- A prompt over the window is cut to its last half window (`overflow = "truncate"`,
  Ollama's default) or refused with HTTP 400 (`overflow = "refuse"`, as some models do).
  `prompt_eval_count` reports the tokens evaluated: after a cut, fewer than were sent.
- `keep_alive` (seconds; -1 forever, 0 unload at once; Ollama's default 5 minutes) says
  how long the model stays loaded after a request; a request to a model that is not
  loaded reports a `load_duration`. GET /api/ps lists the loaded models.

`prompts` records what each chat request measured (window, tokens, evaluated), in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
import hashlib
import json
import math
import time
from typing import Any, Final, Literal

from aiohttp import web

from .script import ErrorReply, Reply, StreamFault, ToolCall
from .server import DISCONNECT, FakeModelServer, Frames, Handler

OLLAMA_VERSION: Final = "0.12.6"
# A chat template mentioning tools: LiteLLM's model info reads that as tool support.
_TEMPLATE: Final = "{{- if .Tools }}{{ .Tools }}{{ end }}{{ .Prompt }}"
# The model's own context length, as /api/show reports it (`context_length`).
CONTEXT_LENGTH: Final = 8192
# Ollama's window when a request names none, on a machine with < 24 GiB of GPU memory.
DEFAULT_WINDOW: Final = 4096
# Ollama's default keep-alive: five minutes.
DEFAULT_KEEP_ALIVE: Final = 300.0
# Nanoseconds a model load takes in the reported load_duration.
_LOAD_NS: Final = 2_000_000_000
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


@dataclass(frozen=True, slots=True)
class PromptMeasure:
    """One chat request's prompt as the server measured it."""

    window: int  # the context window applied
    tokens: int  # the prompt's tokens as sent
    evaluated: int  # the tokens read: all, or what is left after a cut

    @property
    def truncated(self) -> bool:
        """Whether the prompt was cut to fit the window."""
        return self.evaluated < self.tokens


def render_prompt(body: Mapping[str, Any]) -> str:
    """The request as a chat template renders it: tools in the first turn, then messages."""
    parts: list[str] = []
    if tools := body.get("tools"):
        parts.append("<|tools|>\n" + json.dumps(tools))
    for message in body.get("messages") or ():
        if not isinstance(message, Mapping):
            continue
        parts.append(f"<|{message.get('role', '')}|>\n{message.get('content') or ''}")
        if calls := message.get("tool_calls"):
            parts.append(json.dumps(calls))
    return "\n".join(parts) + "\n<|assistant|>\n"


def _keep_alive_seconds(value: Any) -> float | None:
    """Seconds of a request's keep_alive (None: forever); Ollama takes numbers or "5m"."""
    if value is None:
        return DEFAULT_KEEP_ALIVE
    if isinstance(value, str):
        units = {"s": 1, "m": 60, "h": 3600}
        number = float(value[:-1]) * units[value[-1]] if value[-1:] in units else float(value)
    else:
        number = float(value)
    return None if number < 0 else number


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

    def __init__(self) -> None:
        super().__init__()
        # None: /api/show reports no context length (and nothing bounds the window).
        self.context_length: int | None = CONTEXT_LENGTH
        self.default_window = DEFAULT_WINDOW
        self.chars_per_token = 4.0
        self.overflow: Literal["truncate", "refuse"] = "truncate"
        self.prompts: list[PromptMeasure] = []
        # Model name → when it unloads (monotonic seconds; None: never).
        self._loaded: dict[str, float | None] = {}

    def _routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("POST", "/api/chat", self._handle_chat),
            ("GET", "/api/tags", self._tags),
            ("POST", "/api/show", self._show),
            ("POST", "/api/pull", self._pull),
            ("GET", "/api/ps", self._ps),
            ("GET", "/api/version", self._version),
        ]

    # -- the window --------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """The fake tokenizer: one token per `chars_per_token` characters, rounded up."""
        return math.ceil(len(text) / self.chars_per_token)

    def measure(self, body: Mapping[str, Any]) -> PromptMeasure:
        """The window a request gets and how much of its prompt is read."""
        options = body.get("options") or {}
        asked = options.get("num_ctx") if isinstance(options, Mapping) else None
        window = int(asked or self.default_window)
        if self.context_length is not None:
            window = min(window, self.context_length)
        tokens = self.count_tokens(render_prompt(body))
        return PromptMeasure(window, tokens, tokens if tokens <= window else window // 2)

    def _prompt_refusal(self, body: Mapping[str, Any]) -> ErrorReply | None:
        measure = self.measure(body)
        self.prompts.append(measure)
        if measure.truncated and self.overflow == "refuse":
            return ErrorReply(status=400, message="the input length exceeds the context length")
        return None

    # -- keep-alive --------------------------------------------------------------------

    def loaded_models(self) -> list[str]:
        """The models loaded now (their keep-alive has not run out)."""
        now = time.monotonic()
        return sorted(m for m, until in self._loaded.items() if until is None or until > now)

    def _load(self, body: Mapping[str, Any]) -> int:
        """Mark the request's model loaded for its keep-alive; nanoseconds spent loading."""
        model = _tagged(str(body.get("model", "")))
        was_loaded = model in self.loaded_models()
        keep = _keep_alive_seconds(body.get("keep_alive"))
        self._loaded[model] = None if keep is None else time.monotonic() + keep
        return 0 if was_loaded else _LOAD_NS

    async def _ps(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"models": [{"name": m, "model": m, "details": _DETAILS} for m in self.loaded_models()]}
        )

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
                    **(
                        {"llama.context_length": self.context_length}
                        if self.context_length is not None
                        else {}
                    ),
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
        """The final object: message, done reason and Ollama's counters.

        `prompt_eval_count` is what the window let the model read, unless the reply
        scripts a count of its own.
        """
        _, completion = reply.usage(body)
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt = self.measure(body).evaluated
        load_ns = self._load(body)
        prompt_ns = prompt * _PROMPT_NS_PER_TOKEN
        eval_ns = completion * _EVAL_NS_PER_TOKEN
        return {
            "model": body.get("model"),
            "created_at": _now(),
            "message": message,
            "done": True,
            # Ollama says "stop" after tool calls too; "length" when num_predict ran out.
            "done_reason": reply.finish_reason or "stop",
            "total_duration": load_ns + prompt_ns + eval_ns,
            "load_duration": load_ns,
            "prompt_eval_count": prompt,
            "prompt_eval_duration": prompt_ns,
            "eval_count": completion,
            "eval_duration": eval_ns,
        }
