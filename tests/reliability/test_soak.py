"""Soak: many turns of mixed faults on a few conversations, with memory and disk bounded.

The normal run does SOAK_TURNS_DEFAULT turns; `scripts/test --soak` sets LGC_SOAK_TURNS
to 2,000. The figures (turns, process memory growth, threads.db size) are printed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
import gc
import os
from pathlib import Path
import resource
import time
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.agent.graph.history import SUMMARY_INSTRUCTIONS
from fakes import AnyReply, ErrorReply, FakeOpenAIServer, Reply, StreamFault, ToolCall
from homeassistant.core import HomeAssistant
from homeassistant.helpers import intent

from ..helpers import assist_tool_name, text_of
from .conftest import (
    SENTENCES,
    ask,
    assert_responsive,
    assert_thread_consistent,
    speech,
    thread_messages,
)

SOAK_TURNS_DEFAULT = 150
CONVERSATIONS = 10
# Bounds: process memory may grow by a fixed allowance plus a little per turn (caches
# fill up, then level off); threads.db (with its write-ahead log) stays small because
# old checkpoints are pruned and long threads are summarised.
MEMORY_ALLOWANCE_MB = 80.0
MEMORY_PER_TURN_KB = 24.0
THREADS_DB_LIMIT_MB = 16.0


@dataclass(frozen=True)
class Step:
    """One turn's fault: the replies it scripts, and the sentence it ends with (None: answered)."""

    name: str
    # The scripted replies, given the name of a harmless tool to call.
    replies: Callable[[str], list[AnyReply]]
    sentence: str | None = None


RETRY_NOW = {"Retry-After": "0"}
STEPS = [
    Step("plain", lambda tool: []),
    Step("503 then fine", lambda tool: [ErrorReply(status=503, message="busy", headers=RETRY_NOW)]),
    Step("tool call", lambda tool: [Reply(tool_calls=(ToolCall(tool, {}),))]),
    Step(
        "429 twice",
        lambda tool: [ErrorReply(status=429, message="quota", headers=RETRY_NOW)] * 2,
        "rate_limit",
    ),
    Step(
        "stream cut",
        lambda tool: [Reply(text="Let me th", fault=StreamFault.DISCONNECT)],
        "connection",
    ),
    Step("unknown tool", lambda tool: [Reply(tool_calls=(ToolCall("make_coffee", {}),))]),
    Step("plain", lambda tool: []),
    Step("arguments not JSON", lambda tool: [Reply(tool_calls=(ToolCall(tool, '{"x": '),))]),
    Step("empty answer", lambda tool: [Reply()], "empty_answer"),
    Step("400", lambda tool: [ErrorReply(status=400, message="bad")], "bad_request"),
    Step(
        "invalid JSON chunk",
        lambda tool: [Reply(text="Hmm", fault=StreamFault.INVALID_JSON)],
        "server",
    ),
    Step("502 then fine", lambda tool: [ErrorReply(status=502, message="gw", headers=RETRY_NOW)]),
]


class Model:
    """The soak's model: the turn's scripted replies for its chat calls, a short summary
    for summary calls (which come whenever a thread outgrows its budget), and otherwise
    an answer naming the request."""

    def __init__(self) -> None:
        self.planned: list[AnyReply] = []

    def __call__(self, request: Mapping[str, Any]) -> AnyReply:
        system = text_of(request["messages"][0]) if request["messages"] else ""
        if system.startswith(SUMMARY_INSTRUCTIONS[:40]):
            return Reply(text="They made small talk and asked about many numbered things.")
        if self.planned:
            return self.planned.pop(0)
        users = [m for m in request["messages"] if m["role"] == "user"]
        return Reply(text=f"Answer to {text_of(users[-1])}", chunk_size=16)


def _rss_mb() -> float:
    """Resident memory of this process now, in MB (Linux)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def _db_mb(config_dir: str) -> float:
    base = Path(config_dir, "langgraph_conversation", "threads.db")
    files = [base, base.with_name("threads.db-wal")]
    return sum(f.stat().st_size for f in files if f.exists()) / 2**20


@pytest.mark.soak
async def test_soak(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    quiet_logs: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Thousands of turns with faults: every outcome right, memory and disk bounded."""
    turns = int(os.environ.get("LGC_SOAK_TURNS", SOAK_TURNS_DEFAULT))
    model = Model()
    openai_server.responder = model
    tool = await assist_tool_name(hass, "GetDateTime")
    warm_up = max(20, turns // 10)
    baseline = peak = 0.0
    wrong: list[str] = []
    started = time.monotonic()
    for index in range(turns):
        if index == warm_up:
            gc.collect()
            baseline = _rss_mb()
        step = STEPS[index % len(STEPS)]
        model.planned = step.replies(tool)
        text = f"request {index}"
        result = await ask(hass, setup_integration, text, f"soak-{index % CONVERSATIONS}")
        if step.sentence is None:
            expected = f"Answer to {text}"
            ok = result.response.response_type != intent.IntentResponseType.ERROR
        else:
            expected = SENTENCES[step.sentence].rstrip(".")
            ok = result.response.response_type == intent.IntentResponseType.ERROR
        if not ok or speech(result) != expected:
            wrong.append(f"{index} {step.name}: {speech(result)[:120]}")
        if index % 50 == 0:
            peak = max(peak, _rss_mb())
        assert model.planned == [], f"turn {index} ({step.name}) left replies"
        # The fake server records every request; the soak measures the integration.
        openai_server.requests.clear()
        openai_server.paths.clear()
        openai_server.timings.clear()
    elapsed = time.monotonic() - started
    gc.collect()
    final = _rss_mb()
    peak = max(peak, final)
    growth = final - baseline
    db_mb = await hass.async_add_executor_job(_db_mb, hass.config.config_dir)
    with capsys.disabled():  # the figures belong in the run's output, pass or fail
        print(
            f"\nsoak: {turns} turns ({len(STEPS)} kinds of turn, {CONVERSATIONS} conversations) "
            f"in {elapsed:.0f} s; memory {baseline:.0f} MB after {warm_up} turns -> "
            f"{final:.0f} MB at the end (growth {growth:+.1f} MB, peak {peak:.0f} MB); "
            f"threads.db with WAL {db_mb:.2f} MB"
        )
    assert wrong == []
    assert growth < MEMORY_ALLOWANCE_MB + turns * MEMORY_PER_TURN_KB / 1024
    assert db_mb < THREADS_DB_LIMIT_MB
    await assert_responsive(hass)
    for conversation in range(CONVERSATIONS):
        assert_thread_consistent(await thread_messages(setup_integration, f"soak-{conversation}"))
