"""Figure 10: a real engine's prefill time for each agent's first request.

Our agent's and Home Assistant's Ollama agent's first requests for the generated home are
recorded by the fake Ollama server (as for figure 6), then replayed to llama.cpp's
llama-server (Debian's llama.cpp-tools) running SmolLM2-135M-Instruct on 127.0.0.1, and
the server's own `timings` are reported: prompt tokens evaluated (`prompt_n`) and the
milliseconds it took (`prompt_ms`). SmolLM2's chat template has no tool section, so the
tool list is written into the system message the way Qwen- and Llama-style templates
render it (a header, then one JSON schema per line), or the tools would cost nothing.
Each replay asks for one token and bypasses the prompt cache.

Skipped, with the reason printed, when llama-server or the model file is not there
(scripts/bench passes the model's path in LGC_LOCAL_MODEL), and in --quick runs: a first
request of several thousand tokens takes tens of seconds on two busy cores.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
import json
import logging
import os
from pathlib import Path
import shutil
import socket
from typing import Any
import urllib.error
import urllib.request

from .context import Bench
from .home import HOME_SIZE
from .report import Row, Stat
from .turns import converse

_LOGGER = logging.getLogger(__name__)

FIGURE = 10
ALIAS = "smollm2-135m-instruct"
WINDOW = 16384  # room for the largest first request of the generated home
START_TIMEOUT = 60.0
REPLAY_TIMEOUT = 900.0
TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)


def unavailable_reason(quick: bool) -> str | None:
    """Why the figure cannot run here, or None."""
    if quick:
        return "skipped in --quick runs (prefill of thousands of tokens takes tens of seconds)"
    if shutil.which("llama-server") is None:
        return "skipped: no llama-server (Debian's llama.cpp-tools) in this leg"
    model = os.environ.get("LGC_LOCAL_MODEL", "")
    if not model or not Path(model).is_file():
        return "skipped: no local model file (LGC_LOCAL_MODEL, see scripts/lib/local_model.sh)"
    return None


def openai_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """An Ollama /api/chat request's messages in OpenAI's format, tools in the system turn."""
    messages: list[dict[str, Any]] = [
        {"role": m["role"], "content": m.get("content") or ""} for m in body.get("messages", [])
    ]
    tools = body.get("tools") or []
    if tools:
        listing = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
        rendered = f"{TOOLS_HEADER}\n{listing}\n</tools>"
        if messages and messages[0]["role"] == "system":
            messages[0]["content"] = f"{messages[0]['content']}\n\n{rendered}"
        else:
            messages.insert(0, {"role": "system", "content": rendered})
    return messages


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _post(url: str, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        return {"http_status": err.code, **json.loads(err.read() or b"{}")}


@asynccontextmanager
async def llama_server(model: str, log: Path) -> AsyncIterator[str]:
    """llama-server on a free port of 127.0.0.1 (its base URL); stopped on the way out."""
    port = _free_port()
    with log.open("wb") as output:
        process = await asyncio.create_subprocess_exec(
            "llama-server",
            *("-m", model, "--alias", ALIAS, "--host", "127.0.0.1", "--port", str(port)),
            *("-c", str(WINDOW), "-np", "1", "-t", "2", "--no-webui"),
            stdout=output,
            stderr=asyncio.subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + START_TIMEOUT
            while True:
                if process.returncode is not None:
                    raise RuntimeError(f"llama-server exited ({process.returncode}); see {log}")
                try:
                    await asyncio.to_thread(urllib.request.urlopen, f"{base}/health", None, 2)
                    break
                except OSError:
                    if loop.time() > deadline:
                        raise RuntimeError(f"llama-server not up in {START_TIMEOUT:.0f}s") from None
                    await asyncio.sleep(0.2)
            yield base
        finally:
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 10)
                except TimeoutError:
                    process.kill()
                    await process.wait()


async def first_request(bench: Bench, label: str) -> dict[str, Any]:
    """The first request of a new conversation with the agent, as the fake server got it."""
    result = await converse(
        bench.hass, bench.server, bench.agents[label], "What is on in the living room?"
    )
    if result.error or not result.records:
        raise RuntimeError(f"{label}: the first turn failed: {result.error}")
    return dict(result.records[0].body)


async def measure(bench: Bench) -> list[Row]:
    """Our first request and core's, replayed to llama-server: its prefill tokens and time."""
    if reason := unavailable_reason(bench.settings.quick):
        print(f"figure {FIGURE} (real engine prefill): {reason}", flush=True)
        bench.raw["local_prefill"] = {"skipped": reason}
        return [
            Row(
                figure=FIGURE,
                name="first-request prefill on llama-server (SmolLM2-135M)",
                unit="ms",
                ours=None,
                core=None,
                target="(information)",
                outcome="n/a",
                detail=reason,
                single=True,
            )
        ]
    bodies = {label: await first_request(bench, label) for label in ("ours", "core")}
    timings: dict[str, dict[str, Any]] = {}
    log = bench.settings.out / "llama-server.log"
    async with llama_server(os.environ["LGC_LOCAL_MODEL"], log) as base:
        for label, body in bodies.items():
            answer = await asyncio.to_thread(
                _post,
                f"{base}/v1/chat/completions",
                {
                    "model": ALIAS,
                    "messages": openai_messages(body),
                    "max_tokens": 1,
                    "cache_prompt": False,
                },
                REPLAY_TIMEOUT,
            )
            if "timings" not in answer:
                raise RuntimeError(f"{label}: llama-server answered {str(answer)[:200]}")
            timings[label] = answer["timings"]
    bench.raw["local_prefill"] = {"home_entities": HOME_SIZE, "window": WINDOW, **timings}
    ours, core = timings["ours"], timings["core"]
    return [
        Row(
            figure=FIGURE,
            name=f"first-request prefill on llama-server, SmolLM2-135M ({HOME_SIZE}-entity home)",
            unit="ms",
            ours=Stat.single(ours["prompt_ms"]),
            core=Stat.single(core["prompt_ms"]),
            ratio=ours["prompt_ms"] / core["prompt_ms"] if core["prompt_ms"] else None,
            target="(information)",
            outcome="info",
            single=True,
            detail=f"prompt tokens evaluated: ours {ours['prompt_n']}, core {core['prompt_n']}",
        )
    ]
