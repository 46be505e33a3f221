"""The real local model step: llama.cpp's llama-server behind a recording proxy.

scripts/develop --local-model starts llama-server (SmolLM2-135M-Instruct, a 2,048-token
window, one slot) on 127.0.0.1 and writes its port into the config directory. The step
puts a small proxy on 127.0.0.1 in front of it, so that it can read what the server said
about each request (llama-server's own `timings`: prompt tokens evaluated, tokens served
from its prompt cache) without changing what Home Assistant sends or receives. The agent
is configured through Home Assistant's config flow, as a person adds an OpenAI-compatible
local server: model openai/<name>, base URL http://127.0.0.1:PORT/v1, any text as the key.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
import http.client
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import json
from pathlib import Path
import threading
import time
from typing import Any

# What scripts/lib/local_model.sh names the model (llama-server --alias).
MODEL_ALIAS = "smollm2-135m-instruct"
SERVER_WINDOW = 2048  # llama-server -c in scripts/develop
PORT_WAIT = 60.0  # seconds for scripts/develop to report the server's port
STRINGS = Path(__file__).resolve().parents[2] / (
    "custom_components/langgraph_conversation/translations/en.json"
)


@dataclass
class Exchange:
    """One request through the proxy and what llama-server answered."""

    method: str
    path: str
    request: dict[str, Any]
    status: int = 0
    streamed: bool = False
    content_pieces: list[str] = field(default_factory=list)
    timings: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class RecordingProxy:
    """A proxy on 127.0.0.1 that forwards to llama-server and keeps each exchange."""

    def __init__(self, upstream_port: int, record: Path | None = None) -> None:
        self.upstream_port = upstream_port
        self.record = record  # where the exchanges are written on the way out
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet: the step reports
                pass

            def do_GET(self) -> None:
                proxy.forward(self)

            def do_POST(self) -> None:
                proxy.forward(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self.record is not None:
            with self._lock:
                exchanges = [asdict(e) for e in self.exchanges]
            self.record.write_text(json.dumps(exchanges, indent=1), encoding="utf-8")

    def completions(self) -> list[Exchange]:
        with self._lock:
            return [e for e in self.exchanges if e.path.endswith("/chat/completions")]

    def forward(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        try:
            request = json.loads(body) if body else {}
        except ValueError:
            request = {}
        exchange = Exchange(handler.command, handler.path, request)
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=300)
        headers = {
            k: v
            for k, v in handler.headers.items()
            if k.lower() not in ("host", "connection", "accept-encoding")
        }
        upstream.request(handler.command, handler.path, body=body or None, headers=headers)
        response = upstream.getresponse()
        exchange.status = response.status
        kind = response.getheader("Content-Type", "")
        handler.send_response(response.status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Connection", "close")
        if "text/event-stream" in kind:
            exchange.streamed = True
            handler.end_headers()
            while line := response.readline():
                handler.wfile.write(line)
                handler.wfile.flush()
                self._read_event(exchange, line)
        else:
            data = response.read()
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            try:
                answer = json.loads(data)
            except ValueError:
                answer = {}
            if isinstance(answer, dict):
                exchange.timings = answer.get("timings")
                exchange.error = answer.get("error")
                for choice in answer.get("choices") or []:
                    text = (choice.get("message") or {}).get("content")
                    if text:
                        exchange.content_pieces.append(text)
        upstream.close()
        with self._lock:
            self.exchanges.append(exchange)

    @staticmethod
    def _read_event(exchange: Exchange, line: bytes) -> None:
        text = line.decode("utf-8", "replace").strip()
        if not text.startswith("data:") or text == "data: [DONE]":
            return
        try:
            event = json.loads(text.removeprefix("data:").strip())
        except ValueError:
            return
        if timings := event.get("timings"):
            exchange.timings = timings
        for choice in event.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                exchange.content_pieces.append(piece)


def read_port(port_file: Path, timeout: float = PORT_WAIT) -> int | None:
    """llama-server's port as scripts/develop wrote it, or None when it never came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return int(port_file.read_text().strip())
        except (OSError, ValueError):
            time.sleep(0.5)
    return None


def window_sentence() -> str:
    """What the agent says when a request does not fit the model's window."""
    strings = json.loads(STRINGS.read_text(encoding="utf-8"))
    return strings["exceptions"]["turn_context_window"]["message"].rstrip(".")
