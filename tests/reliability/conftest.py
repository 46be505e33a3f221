"""What the reliability suite shares: asking, the sentences users hear, thread checks, a witness.

Every test here drives a real Home Assistant with the integration loaded, against the
fake OpenAI-compatible server reached through a made-up host name (fakes/network.py),
so a test can also break name resolution or the TCP connection at any moment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
import json
import logging
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.agent.graph import is_note
from custom_components.langgraph_conversation.agent.memory import Party
from custom_components.langgraph_conversation.const import (
    DOMAIN,
)
from custom_components.langgraph_conversation.diagnostics import (
    async_get_config_entry_diagnostics,
)
from fakes import FakeOpenAIServer, FakeResolver
from homeassistant.components import conversation
from homeassistant.components.conversation.trace import async_clear_traces, async_get_traces
from homeassistant.const import MATCH_ALL
from homeassistant.core import Context, CoreState, Event, HomeAssistant, ServiceCall, callback
from homeassistant.helpers import intent

from ..conftest import TEST_KEY, add_test_entry, agent_entity_id
from ..helpers import open_chat_session

# The sentences users hear, straight from the translations Home Assistant loads.
SENTENCES: dict[str, str] = {
    key.removeprefix("turn_"): value["message"]
    for key, value in json.loads(
        (
            Path(__file__).parents[2] / "custom_components" / DOMAIN / "translations" / "en.json"
        ).read_text(encoding="utf-8")
    )["exceptions"].items()
}

# What must never reach a person: stack traces, exception names, internals.
_INTERNALS = ("Traceback", 'File "', "Error:", "Exception", "litellm", "langchain", "http://")

# Loggers whose DEBUG output the witness reads, besides the root logger.
WATCHED_LOGGERS = (
    "custom_components.langgraph_conversation",
    "homeassistant",
    "LiteLLM",
    "LiteLLM Router",
    "LiteLLM Proxy",
    "litellm",
    "langchain",
    "langchain_core",
    "langchain_litellm",
    "langgraph",
    "httpx",
    "httpcore",
    "openai",
    "aiosqlite",
)


@pytest.fixture
def resolver(socket_enabled: None) -> Iterator[FakeResolver]:
    """The fake model host name, resolvable (and breakable) for the test's duration."""
    with FakeResolver().installed() as installed:
        yield installed


@pytest.fixture
def config_entry(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    resolver: FakeResolver,
    agent_options: dict[str, Any],
) -> MockConfigEntry:
    """The shared test entry, but reaching the fake server through the fake host name."""
    return add_test_entry(hass, resolver.url(openai_server.port), agent_options)


async def ask(
    hass: HomeAssistant,
    entry: MockConfigEntry,
    text: str,
    conversation_id: str | None = None,
    *,
    user_id: str | None = None,
    language: str | None = None,
) -> conversation.ConversationResult:
    """One turn through Home Assistant's conversation entry point."""
    return await conversation.async_converse(
        hass,
        text,
        conversation_id,
        Context(user_id=user_id),
        language=language,
        agent_id=agent_entity_id(hass, entry),
    )


def speech(result: conversation.ConversationResult) -> str:
    """What the user hears."""
    return result.response.speech["plain"]["speech"]


def assert_plain_sentence(text: str, *secrets: str) -> None:
    """A sentence for people: no stack trace, no internals, none of the secrets."""
    assert text.strip(), "the user heard nothing"
    for marker in (*_INTERNALS, *secrets):
        assert marker not in text, f"{marker!r} reached the user: {text[:300]!r}"


def assert_sentence(result: conversation.ConversationResult, kind: str) -> None:
    """The turn failed with the translated sentence for `kind`, and nothing else."""
    assert result.response.response_type == intent.IntentResponseType.ERROR, speech(result)
    # Home Assistant drops the final full stop of an exception message.
    assert speech(result) == SENTENCES[kind].rstrip(".")
    assert_plain_sentence(speech(result), TEST_KEY)


async def thread_messages(
    entry: MockConfigEntry, conversation_id: str, party: Party | None = None
) -> list[BaseMessage]:
    """What the agent's thread of a conversation holds now (read from threads.db), for
    `party` (default: nobody, as `ask` talks without a user or device)."""
    runtime = entry.runtime_data.runtime
    thread_id = await runtime.find_thread(
        next(iter(entry.subentries)), conversation_id, party or Party()
    )
    return await runtime.messages(thread_id)


def assert_thread_consistent(messages: list[BaseMessage]) -> None:
    """Only whole turns: each starts with the user (after the turn's context note, when it
    has one), every tool call has its one result right after it, and each turn ends with
    an answer that calls no tool."""
    index = 0
    while index < len(messages):
        if is_note(messages[index]):
            index += 1
            assert index < len(messages), f"a context note without its request: {_roles(messages)}"
        assert isinstance(messages[index], HumanMessage), _roles(messages)
        assert not is_note(messages[index]), f"two context notes in a row: {_roles(messages)}"
        index += 1
        while True:
            assert index < len(messages), f"turn without an answer: {_roles(messages)}"
            answer = messages[index]
            assert isinstance(answer, AIMessage), _roles(messages)
            index += 1
            calls = [c["id"] for c in answer.tool_calls] + [
                c.get("id") for c in answer.invalid_tool_calls
            ]
            if not calls:
                break
            results = messages[index : index + len(calls)]
            assert all(isinstance(m, ToolMessage) for m in results), _roles(messages)
            assert sorted(m.tool_call_id for m in results) == sorted(calls), _roles(messages)
            index += len(calls)


def _roles(messages: list[BaseMessage]) -> list[str]:
    return [m.type for m in messages]


def pairs(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    """(type, text) of the user messages (not context notes) and of answers that called
    no tool."""
    return [
        (m.type, m.text)
        for m in messages
        if (isinstance(m, HumanMessage) and not is_note(m))
        or (isinstance(m, AIMessage) and not m.tool_calls and not m.invalid_tool_calls)
    ]


async def assert_responsive(hass: HomeAssistant) -> None:
    """Home Assistant still runs, serves actions and keeps states."""
    assert hass.state is CoreState.running
    answered: list[ServiceCall] = hass.data.setdefault("reliability_pings", [])
    if not hass.services.has_service("reliability", "ping"):

        async def ping(call: ServiceCall) -> None:
            answered.append(call)

        hass.services.async_register("reliability", "ping", ping)
    before = len(answered)
    await hass.services.async_call("reliability", "ping", {}, blocking=True)
    assert len(answered) == before + 1
    hass.states.async_set("sensor.reliability_probe", str(len(answered)))
    assert hass.states.get("sensor.reliability_probe").state == str(len(answered))


@pytest.fixture
def quiet_logs(caplog: pytest.LogCaptureFixture) -> None:
    """Long runs keep only warnings: formatting every library's DEBUG lines (whole
    requests, SQL) would cost more time than the turns themselves."""
    caplog.set_level(logging.WARNING)
    for name in WATCHED_LOGGERS:
        caplog.set_level(logging.WARNING, logger=name)


class Witness:
    """Everything a secret could leak into: logs, bus events, traces, chat logs, diagnostics."""

    def __init__(self, hass: HomeAssistant, caplog: pytest.LogCaptureFixture) -> None:
        self.hass = hass
        self.caplog = caplog
        self.events: list[Event] = []
        self.conversation_ids: set[str] = set()

    async def start_watching(self) -> None:
        """Forget what was seen so far, once it has all been seen.

        Whatever the test did before (a service call, a turn) may still have work queued
        on the loop that logs or fires events: it is awaited first, so nothing of it is
        recorded after the clearing and read as the watched part's doing.
        """
        await self.hass.async_block_till_done()
        self.caplog.clear()
        self.events.clear()
        async_clear_traces()

    @callback
    def record(self, event: Event) -> None:
        """Runs in the loop as the event fires: a plain function would be handed to the
        executor and could record an event after the test has cleared the list."""
        self.events.append(event)

    async def everything(self, entry: MockConfigEntry | None = None) -> dict[str, str]:
        """Each channel's captured text."""
        logs = "\n".join(
            f"{record.name} {record.levelname} {record.getMessage()} "
            + (logging.Formatter().formatException(record.exc_info) if record.exc_info else "")
            for record in self.caplog.records
        )
        events = "\n".join(f"{event.event_type} {event.data!r}" for event in self.events)
        traces = json.dumps([t.as_dict() for t in async_get_traces()], default=str)
        chat_logs = ""
        for conversation_id in self.conversation_ids:
            with (
                open_chat_session(self.hass, conversation_id) as session,
                conversation.async_get_chat_log(self.hass, session) as chat_log,
            ):
                chat_logs += repr(chat_log.content)
        diagnostics = (
            json.dumps(await async_get_config_entry_diagnostics(self.hass, entry), default=str)
            if entry is not None
            else ""
        )
        return {
            "logs": logs,
            "bus events": events,
            "traces": traces,
            "chat logs": chat_logs,
            "diagnostics": diagnostics,
        }

    async def assert_nowhere(self, entry: MockConfigEntry | None, *secrets: str) -> None:
        """None of the secrets appears in any channel."""
        channels = await self.everything(entry)
        assert channels["logs"], "nothing was logged: the witness saw nothing"
        for name, text in channels.items():
            for secret in secrets:
                assert secret not in text, f"{secret!r} leaked into {name}"


@pytest.fixture
def witness(hass: HomeAssistant, caplog: pytest.LogCaptureFixture) -> Iterator[Witness]:
    """Capture DEBUG logs of every library on the path and every bus event."""
    caplog.set_level(logging.DEBUG)
    for name in WATCHED_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    watcher = Witness(hass, caplog)
    unsubscribe: Callable[[], None] = hass.bus.async_listen(MATCH_ALL, watcher.record)
    yield watcher
    unsubscribe()
