"""Fake web-searching model servers on 127.0.0.1: one class, five providers' wire formats.

What LiteLLM 1.83.0 sends when a completion carries `web_search_options`, and what each
provider answers with, citations in its own format:

openai      POST /chat/completions, `web_search_options` in the body → a chat completion
            whose message has `annotations` [{type: url_citation, url_citation: {url,
            title, start_index, end_index}}]
perplexity  POST /chat/completions, `web_search_options` in the body → a chat completion
            with top-level `citations` (addresses) and `search_results` ({title, url, date})
anthropic   POST /v1/messages, a `web_search_20250305` tool named web_search → content
            blocks server_tool_use, web_search_tool_result (the pages found) and text with
            `citations` [{type: web_search_result_location, url, title, cited_text}]
gemini      POST /v1beta/models/<model>:generateContent, a `googleSearch` tool → a candidate
            with `groundingMetadata` (webSearchQueries, groundingChunks [{web: {uri,
            title}}], groundingSupports)
xai         POST /responses (LiteLLM bridges xAI's search to the Responses API), a
            `web_search` tool → output [web_search_call, message with output_text whose
            annotations are {type: url_citation, url, title, start_index, end_index}]

The server checks the shape: a request without its provider's search, or one that also
offers function tools, is refused with HTTP 400 (and kept in `requests` for the test to
read). Replies are scripted (`add_answer`, `add_error`); an empty script answers 500.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
import json
from typing import Any, Final, Self

from aiohttp import web

from .background import BackgroundServer
from .server import HOST

PROVIDERS: Final = ("openai", "anthropic", "gemini", "xai", "perplexity")
# The model name each provider's search is tested with (LiteLLM's map says it searches).
SEARCH_MODELS: Final = {
    "openai": "gpt-4o-mini-search-preview",
    "anthropic": "claude-sonnet-4-5-20250929",
    "gemini": "gemini-2.5-flash",
    "xai": "grok-4",
    "perplexity": "sonar",
}


@dataclass(frozen=True, slots=True)
class SearchAnswer:
    """One scripted search answer: its words and the pages it cites (title, url)."""

    text: str
    sources: tuple[tuple[str, str], ...] = ()
    # Seconds before the answer is sent.
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class SearchError:
    """One scripted failure: an HTTP status with the provider's error body."""

    status: int = 500
    message: str = "internal error"
    delay: float = 0.0


@dataclass
class _Script:
    replies: deque[SearchAnswer | SearchError] = field(default_factory=deque)


def search_asked(body: Mapping[str, Any]) -> list[str]:
    """What in a request body asks any provider's web search (empty: nothing): the
    `web_search_options` or `search_parameters` keys, a hosted search tool (OpenAI's,
    Anthropic's, xAI's), Gemini's `googleSearch` tool."""
    found = [key for key in ("web_search_options", "search_parameters") if key in body]
    for tool in body.get("tools") or []:
        if not isinstance(tool, Mapping):
            continue
        kind = str(tool.get("type") or "")
        if kind.startswith("web_search"):
            found.append(f"tool {kind}")
        found += [f"tool {key}" for key in ("googleSearch", "google_search") if key in tool]
    return found


def function_tools(body: Mapping[str, Any]) -> list[str]:
    """The names of the function tools a request offers (OpenAI's, Anthropic's, Gemini's
    shapes)."""
    names: list[str] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, Mapping):
            continue
        if isinstance(tool.get("function"), Mapping):
            names.append(str(tool["function"].get("name")))
        elif "input_schema" in tool or tool.get("type") == "function":
            names.append(str(tool.get("name")))
        for declaration in (
            tool.get("functionDeclarations") or tool.get("function_declarations") or []
        ):
            names.append(str(declaration.get("name")))
    return names


class FakeSearchServer:
    """One provider's web search; reach it as model=f"{provider}/{SEARCH_MODELS[provider]}"
    with api_base=server.api_base.

    `requests` holds every request body in order, `paths` their paths, `credentials` the
    key each carried (Authorization, x-api-key or x-goog-api-key).
    """

    def __init__(self, provider: str) -> None:
        if provider not in PROVIDERS:
            raise ValueError(f"no fake search for {provider}")
        self.provider = provider
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.credentials: list[str | None] = []
        self._script = _Script()
        self._background: BackgroundServer | None = None
        self._port: int | None = None

    # -- script ----------------------------------------------------------------------

    def add_answer(self, text: str, sources: Any = (), *, delay: float = 0.0) -> None:
        """Answer the next search with `text`, citing `sources` ((title, url) pairs)."""
        self._script.replies.append(SearchAnswer(text, tuple(map(tuple, sources)), delay))

    def add_error(self, status: int = 500, message: str = "internal error") -> None:
        """Fail the next search with an HTTP error of the provider's shape."""
        self._script.replies.append(SearchError(status, message))

    @property
    def model(self) -> str:
        """The LiteLLM model string of this provider's search model."""
        return f"{self.provider}/{SEARCH_MODELS[self.provider]}"

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on a free port of 127.0.0.1 (served from a thread of its own)."""
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._background = BackgroundServer(app, HOST, name=f"FakeSearchServer-{self.provider}")
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
        """The base URL LiteLLM's provider wants (Gemini's ends in /v1beta)."""
        if self._port is None:
            raise RuntimeError("server not started")
        base = f"http://{HOST}:{self._port}"
        return f"{base}/v1beta" if self.provider == "gemini" else base

    # -- requests --------------------------------------------------------------------

    def _path_fits(self, path: str) -> bool:
        if self.provider in ("openai", "perplexity"):
            return path.endswith("/chat/completions")
        if self.provider == "xai":
            return path.endswith("/responses")
        if self.provider == "anthropic":
            return path == "/v1/messages"
        return path.startswith("/v1beta/models/") and path.endswith(":generateContent")

    def _shape_problem(self, body: Mapping[str, Any]) -> str | None:
        """Why the request is not this provider's web search as LiteLLM sends it."""
        tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping)]
        if self.provider in ("openai", "perplexity"):
            options = body.get("web_search_options")
            if not isinstance(options, Mapping):
                return "no web_search_options in the body"
            if options.get("search_context_size") not in ("low", "medium", "high"):
                return f"search_context_size {options.get('search_context_size')!r}"
        elif self.provider == "anthropic":
            if not any(
                str(t.get("type", "")).startswith("web_search_2") and t.get("name") == "web_search"
                for t in tools
            ):
                return "no web_search_2025xxxx tool"
        elif self.provider == "gemini":
            if not any("googleSearch" in t for t in tools):
                return "no googleSearch tool"
        elif not any(t.get("type") == "web_search" for t in tools):
            return "no web_search tool"
        if offered := function_tools(body):
            return f"function tools offered with the search: {offered}"
        if body.get("stream"):
            return "a streamed search (citations come with the whole answer)"
        return None

    async def _handle(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = None
        self.paths.append(f"{request.method} {request.path}")
        if not isinstance(body, dict) or request.method != "POST":
            return self._error(SearchError(400, "body is not a JSON object"))
        self.requests.append(body)
        self.credentials.append(
            request.headers.get("Authorization")
            or request.headers.get("x-api-key")
            or request.headers.get("x-goog-api-key")
        )
        if not self._path_fits(request.path):
            return self._error(SearchError(404, f"no such endpoint {request.path}"))
        if (problem := self._shape_problem(body)) is not None:
            return self._error(SearchError(400, f"fake {self.provider} search: {problem}"))
        reply: SearchAnswer | SearchError = (
            self._script.replies.popleft()
            if self._script.replies
            else SearchError(500, "fake search server: no reply scripted")
        )
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if isinstance(reply, SearchError):
            return self._error(reply)
        model = str(body.get("model") or SEARCH_MODELS[self.provider])
        return web.json_response(_ANSWERS[self.provider](model, reply))

    def _error(self, error: SearchError) -> web.Response:
        if self.provider == "anthropic":
            kind = "invalid_request_error" if error.status == 400 else "api_error"
            payload: dict[str, Any] = {
                "type": "error",
                "error": {"type": kind, "message": error.message},
            }
        elif self.provider == "gemini":
            payload = {
                "error": {"code": error.status, "message": error.message, "status": "INTERNAL"}
            }
        else:
            payload = {"error": {"message": error.message, "type": "server_error", "code": None}}
        return web.json_response(payload, status=error.status)


def _usage() -> dict[str, int]:
    return {"prompt_tokens": 40, "completion_tokens": 20, "total_tokens": 60}


def _openai(model: str, reply: SearchAnswer) -> dict[str, Any]:
    annotations = [
        {
            "type": "url_citation",
            "url_citation": {
                "start_index": 0,
                "end_index": len(reply.text),
                "url": url,
                "title": title,
            },
        }
        for title, url in reply.sources
    ]
    message = {"role": "assistant", "content": reply.text, "annotations": annotations}
    return {
        "id": "chatcmpl-search",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": _usage(),
    }


def _perplexity(model: str, reply: SearchAnswer) -> dict[str, Any]:
    return {
        "id": "pplx-search",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text},
                "finish_reason": "stop",
            }
        ],
        "citations": [url for _title, url in reply.sources],
        "search_results": [
            {"title": title, "url": url, "date": "2026-12-01"} for title, url in reply.sources
        ],
        "usage": {**_usage(), "search_context_size": "low"},
    }


def _anthropic(model: str, reply: SearchAnswer) -> dict[str, Any]:
    citations = [
        {
            "type": "web_search_result_location",
            "url": url,
            "title": title,
            "encrypted_index": "EqgfCioIARgB",
            "cited_text": reply.text[:40],
        }
        for title, url in reply.sources
    ]
    text: dict[str, Any] = {"type": "text", "text": reply.text}
    if citations:
        text["citations"] = citations
    return {
        "id": "msg_search",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {"query": "the question"},
            },
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": [
                    {
                        "type": "web_search_result",
                        "url": url,
                        "title": title,
                        "encrypted_content": "EqgfCioIARgBIiQ3",
                        "page_age": "1 day ago",
                    }
                    for title, url in reply.sources
                ],
            },
            text,
        ],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 40,
            "output_tokens": 20,
            "server_tool_use": {"web_search_requests": 1},
        },
    }


def _gemini(model: str, reply: SearchAnswer) -> dict[str, Any]:
    chunks = [{"web": {"uri": url, "title": title}} for title, url in reply.sources]
    supports = [
        {
            "segment": {"startIndex": 0, "endIndex": len(reply.text), "text": reply.text},
            "groundingChunkIndices": list(range(len(chunks))),
        }
    ]
    return {
        "candidates": [
            {
                "content": {"parts": [{"text": reply.text}], "role": "model"},
                "finishReason": "STOP",
                "index": 0,
                "groundingMetadata": {
                    "webSearchQueries": ["the question"],
                    "groundingChunks": chunks,
                    "groundingSupports": supports if chunks else [],
                    "searchEntryPoint": {"renderedContent": "<div></div>"},
                },
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 40,
            "candidatesTokenCount": 20,
            "totalTokenCount": 60,
        },
        "modelVersion": model,
        "responseId": "gemini-search",
    }


def _xai(model: str, reply: SearchAnswer) -> dict[str, Any]:
    annotations = [
        {
            "type": "url_citation",
            "url": url,
            "title": title,
            "start_index": 0,
            "end_index": len(reply.text),
        }
        for title, url in reply.sources
    ]
    return {
        "id": "resp_search",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": model,
        "output": [
            {
                "type": "web_search_call",
                "id": "ws_1",
                "status": "completed",
                "action": {"type": "search", "query": "the question"},
            },
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": reply.text, "annotations": annotations}
                ],
            },
        ],
        "usage": {"input_tokens": 40, "output_tokens": 20, "total_tokens": 60},
    }


_ANSWERS: Final = {
    "openai": _openai,
    "perplexity": _perplexity,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "xai": _xai,
}
