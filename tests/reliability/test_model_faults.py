"""Model faults: each one at the first model call and in the middle of a tool loop.

For every fault the user hears a clear sentence (no stack trace, no secret), Home
Assistant keeps serving while the turn fails, the next turn works and the thread holds
only whole turns, and a fault that may pass is retried within the agent's budget
(model_retries, default 1) before the turn gives up. Faults the model can recover from
(bad tool calls) come back to the model as readable tool errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
import json
import logging
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.agent.models import model_call
from custom_components.langgraph_conversation.const import (
    CONF_HISTORY_BUDGET,
    CONF_MAX_TOOL_ROUNDS,
    CONF_MODEL_RETRIES,
    CONF_REQUEST_TIMEOUT,
    DOMAIN,
)
from fakes import FakeOpenAIServer, FakeResolver, NetworkMode, Reply, ToolCall
from homeassistant.config_entries import SOURCE_REAUTH
from homeassistant.core import HomeAssistant, ServiceCall
from homeassistant.helpers import intent

from ..conftest import TEST_KEY
from ..helpers import add_light, assist_tool_name, messages_of, text_of
from .conftest import (
    Witness,
    ask,
    assert_plain_sentence,
    assert_responsive,
    assert_sentence,
    assert_thread_consistent,
    pairs,
    speech,
    thread_messages,
)

RETRIES = 1  # the default budget: one more attempt
LONG_ANSWER = ("All work and no play. " * 4546)[:60_000]
TOO_LONG_ANSWER = ("All work and no play. " * 4546)[:100_000]
RECOVERY = "Sorry, I got that wrong."


@dataclass
class Bench:
    """What a fault can act on."""

    hass: HomeAssistant
    server: FakeOpenAIServer
    resolver: FakeResolver
    # How many model calls the fault must spoil for the turn to give up.
    attempts: int = 1


type Arm = Callable[[Bench], Awaitable[None]]


@dataclass(frozen=True)
class Fault:
    """One way a model call goes wrong, and how the turn must end."""

    name: str
    arm: Arm
    # The sentence the user hears (a key of SENTENCES), or None when the turn answers.
    kind: str | None
    retryable: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    # For faults the model recovers from: the error its tool result must name.
    tool_error: str | None = None
    # The answer the user hears when the turn recovers.
    answer: str = RECOVERY

    def __str__(self) -> str:
        return self.name


def _http(status: int, message: str = "scripted failure", **options: Any) -> Arm:
    async def arm(bench: Bench) -> None:
        for _ in range(bench.attempts):
            bench.server.add_error(status, message, **options)

    return arm


async def _no_such_host(bench: Bench) -> None:
    bench.resolver.mode = NetworkMode.NO_SUCH_NAME
    # Pooled keep-alive connections would bypass the lookup.
    await bench.server.drop_connections()


async def _refused(bench: Bench) -> None:
    await bench.server.refuse_connections(True)


def _queue(*replies: Callable[[FakeOpenAIServer], None]) -> Arm:
    async def arm(bench: Bench) -> None:
        for reply in replies:
            reply(bench.server)

    return arm


async def _unknown_model(bench: Bench) -> None:
    bench.server.models = {"some-other-model"}


async def _tools_forever(bench: Bench) -> None:
    tool = await assist_tool_name(bench.hass, "GetDateTime")
    bench.server.default_reply = Reply(tool_calls=(ToolCall(tool, {}),))


async def _bad_tool_arguments(bench: Bench) -> None:
    tool = await assist_tool_name(bench.hass, "HassTurnOn")
    bench.server.add_raw_tool_call(tool, '{"name": "Kitchen Li')
    bench.server.add_text(RECOVERY)


FAULTS = [
    Fault("400", _http(400, "invalid request"), "bad_request"),
    # A provider that echoes the key it refused: the key must still go nowhere.
    Fault("401", _http(401, f"Incorrect API key provided: {TEST_KEY}"), "auth"),
    Fault("403", _http(403, "not allowed"), "auth"),
    Fault("404 model", _unknown_model, "model_not_found"),
    Fault("408", _http(408, "request timeout"), "timeout", retryable=True),
    Fault(
        "429 Retry-After", _http(429, "slow down", headers={"Retry-After": "1"}), "rate_limit", True
    ),
    Fault("429", _http(429, "quota"), "rate_limit", retryable=True),
    Fault("500", _http(500), "server", retryable=True),
    Fault("502", _http(502), "server", retryable=True),
    Fault("503", _http(503), "server", retryable=True),
    Fault("refused", _refused, "connection", retryable=True),
    Fault("no such host", _no_such_host, "connection", retryable=True),
    Fault(
        "first-byte timeout",
        _queue(lambda s: s.add_text("too late", first_byte_delay=3)),
        "timeout",
        options={CONF_REQUEST_TIMEOUT: 1},
    ),
    # Words were spoken before the cut: no retry would take them back.
    Fault(
        "stream cut",
        _queue(lambda s: s.add_broken_stream("The weather today is sun")),
        "connection",
    ),
    Fault(
        "invalid JSON chunk",
        _queue(lambda s: s.add_invalid_json_chunk("The weather today is sun")),
        "server",
    ),
    Fault("arguments not JSON", _bad_tool_arguments, None, tool_error="invalid_arguments"),
    Fault(
        "arguments missing",
        _queue(
            lambda s: s.add_tool_calls([ToolCall("home_light_control", {"name": "Kitchen Light"})]),
            lambda s: s.add_text(RECOVERY),
        ),
        None,
        tool_error="action",
    ),
    Fault(
        "unknown tool",
        _queue(
            lambda s: s.add_tool_calls([ToolCall("open_pod_bay_doors", {"please": True})]),
            lambda s: s.add_text(RECOVERY),
        ),
        None,
        tool_error="unknown_tool",
    ),
    Fault("empty answer", _queue(lambda s: s.add_empty()), "empty_answer"),
    Fault(
        "60,000 characters",
        _queue(lambda s: s.add_text(LONG_ANSWER, chunk_size=5000)),
        None,
        answer=LONG_ANSWER,
        # The check below reads the whole thread back; no summary in between.
        options={CONF_HISTORY_BUDGET: 0},
    ),
    # Past the answer's size bound (agent/models/answer.py): cut, and the user is told.
    Fault(
        "100,000 characters",
        _queue(lambda s: s.add_text(TOO_LONG_ANSWER, chunk_size=5000)),
        "answer_too_long",
        options={CONF_HISTORY_BUDGET: 0},
    ),
    Fault("tools forever", _tools_forever, "tool_rounds", options={CONF_MAX_TOOL_ROUNDS: 3}),
]


@pytest.fixture
def agent_overrides(fault: Fault) -> dict[str, Any]:
    """The default retry budget, plus what the fault needs."""
    return {CONF_MODEL_RETRIES: RETRIES, **fault.options}


async def _heal(bench: Bench) -> None:
    """The network is back."""
    bench.resolver.mode = NetworkMode.UP
    await bench.server.refuse_connections(False)


class _OnRetry(logging.Handler):
    """Runs a callback when the runtime logs that it will retry a model call."""

    def __init__(self, callback: Callable[[], None]) -> None:
        super().__init__()
        self.callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Model call failed"):
            self.callback()


def _retries_logged(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for r in caplog.records if r.getMessage().startswith("Model call failed"))


@pytest.mark.parametrize("position", ["first call", "mid tool loop"])
@pytest.mark.parametrize("fault", FAULTS, ids=str)
async def test_model_fault(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    resolver: FakeResolver,
    witness: Witness,
    fault: Fault,
    position: str,
) -> None:
    """The fault ends the turn cleanly, retried first if it may pass."""
    entry = setup_integration
    bench = Bench(hass, openai_server, resolver, RETRIES + 1 if fault.retryable else 1)
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    switched: list[ServiceCall] = []

    async def turn_on(call: ServiceCall) -> None:
        switched.append(call)
        # The first tool ran; the model's next call meets the fault.
        await fault.arm(bench)

    hass.services.async_register("light", "turn_on", turn_on)

    openai_server.add_text("Hi!")
    first = await ask(hass, entry, "Hello")
    cid = first.conversation_id
    witness.conversation_ids.add(cid)
    if position == "first call":
        await fault.arm(bench)
    else:
        tool = await assist_tool_name(hass, "HassTurnOn")
        openai_server.add_tool_calls([ToolCall(tool, {"name": "Kitchen Light"})])

    failing = asyncio.create_task(ask(hass, entry, "Kitchen light on, and the weather?", cid))
    await asyncio.sleep(0)
    # Home Assistant serves others while the turn is in trouble.
    await assert_responsive(hass)
    result = await failing

    if position == "mid tool loop":
        assert len(switched) == 1
    assert _retries_logged(witness.caplog) == (RETRIES if fault.retryable else 0)
    if fault.kind is not None:
        assert_sentence(result, fault.kind)
    else:
        assert result.response.response_type == intent.IntentResponseType.ACTION_DONE
        assert speech(result) == fault.answer
        assert_plain_sentence(speech(result), TEST_KEY)
    if fault.tool_error is not None:
        tool_results = messages_of(openai_server.requests[-1], "tool")
        assert fault.tool_error in text_of(tool_results[-1])
        json.loads(text_of(tool_results[-1]))  # a readable, structured error

    # The fault passes; the conversation goes on from whole turns only.
    await _heal(bench)
    openai_server.models = None
    openai_server.default_reply = Reply(text="OK")
    openai_server.clear_replies()
    openai_server.add_text("Still here.")
    again = await ask(hass, entry, "Are you there?", cid)
    assert speech(again) == "Still here."
    messages = await thread_messages(entry, cid)
    assert_thread_consistent(messages)
    expected = [("human", "Hello"), ("ai", "Hi!")]
    if fault.kind is None:
        expected += [("human", "Kitchen light on, and the weather?"), ("ai", fault.answer)]
    expected += [("human", "Are you there?"), ("ai", "Still here.")]
    assert pairs(messages) == expected
    # What the model saw next is exactly that history.
    seen = [
        (m["role"], text_of(m))
        for m in openai_server.requests[-1]["messages"]
        if m["role"] in ("user", "assistant") and text_of(m)
    ]
    assert seen == [("user" if t == "human" else "assistant", x) for t, x in expected[:-1]]
    await assert_responsive(hass)
    await witness.assert_nowhere(entry, TEST_KEY)


@pytest.mark.parametrize("fault", [f for f in FAULTS if f.retryable], ids=str)
async def test_retryable_fault_passes_on_retry(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    resolver: FakeResolver,
    caplog: pytest.LogCaptureFixture,
    fault: Fault,
) -> None:
    """A fault that happens once is retried and the user gets the answer."""
    bench = Bench(hass, openai_server, resolver, attempts=1)
    await fault.arm(bench)
    # The network comes back while the runtime waits to retry (HTTP faults pass anyway:
    # each was queued once).
    heal = _OnRetry(lambda: hass.async_create_background_task(_heal(bench), "heal"))
    retry_logger = logging.getLogger(model_call.__name__)
    retry_logger.addHandler(heal)
    try:
        openai_server.add_text("Worked the second time.")
        result = await ask(hass, setup_integration, "Hello")
    finally:
        retry_logger.removeHandler(heal)
    assert _retries_logged(caplog) == 1
    assert speech(result) == "Worked the second time."


# -- focused behaviour around faults --------------------------------------------------


@pytest.fixture
def fault() -> Fault:
    """The tests below need no fault-specific options."""
    return Fault("none", _queue(), None)


async def test_auth_error_starts_reauth(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A refused key asks the user for a new one."""
    openai_server.add_error(401, "bad key")
    await ask(hass, setup_integration, "Hello")
    await hass.async_block_till_done()
    flows = hass.config_entries.flow.async_progress_by_handler(DOMAIN)
    assert [flow["context"]["source"] for flow in flows] == [SOURCE_REAUTH]


async def test_invalid_tool_arguments_are_reported_to_the_model(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Arguments that are not JSON, or miss required fields, come back as errors."""
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    turned_on: list[ServiceCall] = []

    async def turn_on(call: ServiceCall) -> None:
        turned_on.append(call)

    hass.services.async_register("light", "turn_on", turn_on)
    tool = await assist_tool_name(hass, "HassTurnOn")
    openai_server.add_raw_tool_call(tool, '{"name": "Kitch')
    openai_server.add_tool_calls([ToolCall(tool, {"brightness": "very"})])
    openai_server.add_text("Sorry, I got confused.")
    result = await ask(hass, setup_integration, "Kitchen light on")
    assert speech(result) == "Sorry, I got confused."
    not_json = json.loads(text_of(messages_of(openai_server.requests[1], "tool")[0]))
    assert not_json["error"] == "invalid_arguments"
    schema_error = json.loads(text_of(messages_of(openai_server.requests[2], "tool")[-1]))
    assert "error" in schema_error
    assert turned_on == []


async def test_retry_budget_is_bounded(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Past the budget the turn fails with the sentence; 4xx other than 408/429 never retry."""
    openai_server.add_error(503, "down")
    openai_server.add_error(503, "still down")
    result = await ask(hass, setup_integration, "Hello")
    assert_sentence(result, "server")
    assert openai_server.request_count == 2
    openai_server.add_error(401, "bad key")
    result = await ask(hass, setup_integration, "Hello")
    assert_sentence(result, "auth")
    assert openai_server.request_count == 3


@pytest.mark.parametrize("agent_overrides", [{CONF_MODEL_RETRIES: 3}])
async def test_larger_retry_budget(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A budget of three retries means four attempts, then the sentence."""
    for _ in range(4):
        openai_server.add_error(502, "bad gateway", headers={"Retry-After": "0"})
    result = await ask(hass, setup_integration, "Hello")
    assert_sentence(result, "server")
    assert openai_server.request_count == 4


async def test_no_retry_after_words_were_spoken(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A stream that breaks after text is not retried: the words were already heard."""
    openai_server.add_broken_stream("The answer is")
    result = await ask(hass, setup_integration, "Hello")
    assert_sentence(result, "connection")
    assert openai_server.request_count == 1
