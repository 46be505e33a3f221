"""Ollama's native chat API on the wire: a request's body from LangChain messages, and
an answer's NDJSON lines as LangChain message chunks.

Pure functions and a small reader, no I/O (ollama_chat.py sends and receives). Written
by hand because the protocol is small and stable, and neither installable client keeps
to it faithfully: the official `ollama` client validates tools into its own model, which
drops the JSON-schema keywords it does not know (`anyOf`, bounds, nested objects' own
properties), and reads a local file for an image string that names one; LiteLLM's
`ollama_chat` provider loses a tool round's history on the wire (see
upstream/litellm_ollama.py) and rebuilds every chunk several times over.

The body follows what LiteLLM 1.83.0 sent for the same request (tests/test_ollama_options.py
and tests/agent/models/test_ollama_wire.py check it): text parts joined as they are,
images as the base64 of data URLs, tool calls with their arguments as objects, tool
results with the call's id and the tool's name, `max_tokens` as `options.num_predict`,
the window as `options.num_ctx`, `keep_alive` and `think` at the top level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import json
import logging
from typing import Any
import uuid

from langchain_core import messages as lc_messages
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import tool_call_chunk

_LOGGER = logging.getLogger(__name__)

_DATA_URL_MARK = ";base64,"
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"


class OllamaAnswerError(Exception):
    """What Ollama said instead of an answer: an HTTP error status, or an error line in a
    stream. `status_code` is the HTTP status (None for an error line mid-stream);
    `headers` the response's (a proxy's Retry-After)."""

    def __init__(
        self,
        message: str,
        status_code: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.headers = headers or {}


def _text(content: Any) -> str:
    """The text of a message's content: a string, or its text parts joined as they are."""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence):
        return ""
    parts: list[str] = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    return "".join(parts)


def _image_data(part: Mapping[str, Any]) -> str | None:
    """The base64 data of an image part (a data URL); None for a part that is no image."""
    image = part.get("image_url")
    if image is None:
        return None
    url = image.get("url") if isinstance(image, Mapping) else image
    if not isinstance(url, str) or not url.startswith("data:") or _DATA_URL_MARK not in url:
        # Never fetched: an image reaches Ollama as data the integration read itself.
        raise ValueError("Ollama takes images as data URLs only")
    return url.partition(_DATA_URL_MARK)[2]


def _images(content: Any) -> list[str]:
    if isinstance(content, str) or not isinstance(content, Sequence):
        return []
    return [
        data
        for part in content
        if isinstance(part, Mapping) and (data := _image_data(part)) is not None
    ]


def _arguments(raw: Any) -> Any:
    """Ollama takes arguments as an object; OpenAI-style messages carry encoded JSON."""
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw
    return raw if raw is not None else {}


def _wire_calls(message: AIMessage) -> list[dict[str, Any]]:
    calls = []
    for call in message.tool_calls:
        entry: dict[str, Any] = {
            "function": {"name": call["name"], "arguments": _arguments(call.get("args"))}
        }
        if call.get("id"):
            entry["id"] = call["id"]
        calls.append(entry)
    return calls


def wire_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages as Ollama's /api/chat `messages`."""
    names: dict[str, str] = {}  # tool call id → tool name, from the calls seen so far
    wire: list[dict[str, Any]] = []
    for message in messages:
        entry: dict[str, Any] = {"content": _text(message.content)}
        if isinstance(message, SystemMessage):
            entry["role"] = "system"
        elif isinstance(message, AIMessage):
            entry["role"] = "assistant"
            if calls := _wire_calls(message):
                entry["tool_calls"] = calls
                names.update({c["id"]: c["function"]["name"] for c in calls if "id" in c})
        elif isinstance(message, ToolMessage):
            entry["role"] = "tool"
            entry["tool_call_id"] = message.tool_call_id
            if name := message.name or names.get(message.tool_call_id):
                entry["tool_name"] = name
        elif isinstance(message, HumanMessage):
            entry["role"] = "user"
        else:
            entry["role"] = getattr(message, "role", None) or message.type
        if images := _images(message.content):
            entry["images"] = images
        wire.append(entry)
    return wire


def _format(response_format: Any) -> Any:
    """An OpenAI-style `response_format` as Ollama's `format` (None: free text)."""
    if not isinstance(response_format, Mapping):
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return "json"
    if kind == "json_schema":
        schema = response_format.get("json_schema")
        if isinstance(schema, Mapping) and isinstance(schema.get("schema"), Mapping):
            return schema["schema"]
        return "json"
    return None


def request_body(
    model: str,
    messages: Sequence[BaseMessage],
    *,
    options: Mapping[str, Any],
    keep_alive: int | None = None,
    think: bool | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    response_format: Any = None,
    stream: bool = True,
) -> dict[str, Any]:
    """The JSON body of one /api/chat request (`model` without its prefix)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": wire_messages(messages),
        "stream": stream,
        "options": dict(options),
    }
    if (fmt := _format(response_format)) is not None:
        body["format"] = fmt
    if tools:
        # Sent exactly as built (OpenAI's function format, which Ollama reads as it is).
        body["tools"] = list(tools)
    if keep_alive is not None:
        body["keep_alive"] = keep_alive
    if think is not None:
        body["think"] = think
    return body


def _json_line(line: str) -> dict[str, Any] | None:
    """A line's JSON object; None for a blank line or one that is not JSON.

    Ollama sends one JSON object per line. A proxy may prefix server-sent events'
    "data:"; anything else (a keep-alive, a line cut by a proxy) is skipped, as LiteLLM
    skipped it, rather than failing an answer whose other lines are whole.
    """
    text = line.strip()
    if text.startswith("data:"):
        text = text[5:].strip()
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        _LOGGER.debug("Skipped a line of an Ollama answer that is not JSON: %.80r", text)
        return None
    return data if isinstance(data, dict) else None


def _without_tag_start(text: str, tag: str) -> tuple[str, str]:
    """`text` split before a trailing start of `tag` ("It is<th" → "It is", "<th")."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return text[:-size], text[-size:]
    return text, ""


class AnswerReader:
    """Reads one answer's NDJSON lines into LangChain message chunks.

    Text inside `<think>` tags goes to `reasoning_content` (as LiteLLM did), never into
    what is spoken; Ollama's own `thinking` field too. Tool calls get ids (Ollama sends
    none) and their index in the answer. The last line carries the token counts.
    """

    def __init__(self) -> None:
        self._thinking = False
        self._held = ""  # the start of a tag, maybe, waiting for the rest
        self._calls = 0

    def chunk(self, line: str) -> AIMessageChunk | None:
        """The chunk of one line; None for a line that carries nothing."""
        data = _json_line(line)
        if data is None:
            return None
        if error := data.get("error"):
            raise OllamaAnswerError(str(error))
        message = data.get("message")
        message = message if isinstance(message, dict) else {}
        content, reasoning = self._split_thinking(
            message.get("content"), last=bool(data.get("done"))
        )
        additional: dict[str, Any] = {}
        thinking = message.get("thinking")
        if isinstance(thinking, str) and thinking:
            reasoning += thinking
        if reasoning:
            additional["reasoning_content"] = reasoning
        calls = self._calls_of(message.get("tool_calls"))
        if calls:
            additional["tool_calls"] = [
                {
                    "id": call["id"],
                    "function": {"name": call["name"], "arguments": call["args"]},
                    "type": "function",
                    "index": call["index"],
                }
                for call in calls
            ]
        chunk = AIMessageChunk(
            content=content, additional_kwargs=additional, tool_call_chunks=calls
        )
        if data.get("done"):
            chunk.response_metadata = {"finish_reason": data.get("done_reason") or "stop"}
            prompt, answer = data.get("prompt_eval_count"), data.get("eval_count")
            if isinstance(prompt, int) or isinstance(answer, int):
                prompt = prompt if isinstance(prompt, int) else 0
                answer = answer if isinstance(answer, int) else 0
                chunk.usage_metadata = lc_messages.UsageMetadata(
                    input_tokens=prompt, output_tokens=answer, total_tokens=prompt + answer
                )
        return chunk

    def _split_thinking(self, content: Any, *, last: bool = False) -> tuple[str, str]:
        """(spoken text, reasoning) of a content piece, following `<think>` tags.

        A tag may arrive split over two lines ("<thi", "nk>"): a piece's end that could
        begin the next tag waits for the next piece (or the last line, which releases it).
        """
        rest = self._held + (content if isinstance(content, str) else "")
        self._held = ""
        spoken: list[str] = []
        reasoning: list[str] = []
        while rest:
            tag = _THINK_CLOSE if self._thinking else _THINK_OPEN
            before, found, rest = rest.partition(tag)
            if not found and not last:
                before, self._held = _without_tag_start(before, tag)
            (reasoning if self._thinking else spoken).append(before)
            if not found:
                break
            self._thinking = not self._thinking
        return "".join(spoken), "".join(reasoning)

    def _calls_of(self, raw: Any) -> list[Any]:
        """A line's tool calls as LangChain tool-call chunks, numbered across the answer."""
        if not isinstance(raw, list):
            return []
        calls = []
        for call in raw:
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping) or not function.get("name"):
                continue
            arguments = function.get("arguments")
            calls.append(
                tool_call_chunk(
                    name=str(function["name"]),
                    args=arguments if isinstance(arguments, str) else json.dumps(arguments),
                    id=str(call.get("id") or f"call_{uuid.uuid4().hex[:24]}"),
                    index=self._calls,
                )
            )
            self._calls += 1
        return calls
