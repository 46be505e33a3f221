"""One measured turn, run the way the Assist pipeline runs it.

The pipeline opens the chat session and the ChatLog itself, with a delta listener for
streaming TTS, then calls `conversation.async_converse`; so does this. Both agents go
through exactly this path, and the same fake server answers them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
import time
from typing import Any

from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import chat_session, intent

from .home import AgentHandle
from .server import ChatRecord, TimedOllamaServer

# How long to wait for the server thread to file the records of a finished turn.
_RECORD_TIMEOUT = 2.0


@dataclass(slots=True)
class TurnResult:
    """What one turn took, from the client's side and the server's."""

    agent: str
    wall: float  # seconds, async_converse inside the ChatLog context
    records: list[ChatRecord]
    other_requests: list[str]  # non-chat HTTP requests to the model server
    first_content_delta: float | None  # perf_counter of the first delta with text
    speech: str
    conversation_id: str
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def server_time(self) -> float:
        """The server's own time on this turn's chat requests."""
        return sum(record.server_time for record in self.records)

    @property
    def overhead(self) -> float:
        """Turn wall time minus the server's own time."""
        return self.wall - self.server_time

    @property
    def chat_requests(self) -> int:
        """Model round trips of this turn."""
        return len(self.records)

    def requests_of_kind(self, kind: str) -> int:
        """Round trips answered as `kind` ("chat", "summary")."""
        return sum(1 for record in self.records if record.kind == kind)

    @property
    def first_delta_lag(self) -> float | None:
        """First text delta in the ChatLog minus the server's first byte of the answer."""
        answers = [record for record in self.records if record.kind == "chat"]
        if self.first_content_delta is None or not answers:
            return None
        first_frame = answers[0].first_frame
        if first_frame is None:
            return None
        return self.first_content_delta - first_frame


async def wait_for_records(server: TimedOllamaServer, requests_before: int) -> None:
    """Until every chat request that arrived has its record (filed by the server thread)."""
    deadline = time.perf_counter() + _RECORD_TIMEOUT
    # Polled: records are filed by the server's own thread and loop.
    while len(server.records) < len(server.requests) and time.perf_counter() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.001)


def speech_of(result: conversation.ConversationResult) -> str:
    """The plain speech of a conversation result."""
    return result.response.speech.get("plain", {}).get("speech", "")


async def converse(
    hass: HomeAssistant,
    server: TimedOllamaServer | None,
    agent: AgentHandle,
    text: str,
    conversation_id: str | None = None,
    *,
    on_delta: Callable[[dict], None] | None = None,
    settle: bool = True,
    context: Context | None = None,
) -> TurnResult:
    """Run one turn of `agent` and measure it.

    `settle=False` skips waiting for the server's records (concurrent turns collect their
    records by text afterwards instead); without a server (it runs in another process)
    only the client's side is measured. `context` says who talks (default: nobody).
    """
    records_before = len(server.records) if server else 0
    requests_before = len(server.requests) if server else 0
    paths_before = len(server.paths) if server else 0
    first_delta: float | None = None

    def listener(_chat_log: conversation.ChatLog, delta: dict) -> None:
        nonlocal first_delta
        if first_delta is None and delta.get("content"):
            first_delta = time.perf_counter()
        if on_delta is not None:
            on_delta(delta)

    error: str | None = None
    start = time.perf_counter()
    with (
        chat_session.async_get_chat_session(hass, conversation_id) as session,
        conversation.async_get_chat_log(hass, session, chat_log_delta_listener=listener),
    ):
        result = await conversation.async_converse(
            hass, text, session.conversation_id, context or Context(), agent_id=agent.entity_id
        )
    wall = time.perf_counter() - start
    speech = speech_of(result)
    if result.response.response_type is intent.IntentResponseType.ERROR:
        error = speech or "error response"
    records: list[ChatRecord] = []
    if server is not None and settle:
        await wait_for_records(server, requests_before)
        records = server.records[records_before:]
        if len(server.requests) - requests_before != len(records):
            error = error or "records of the turn's chat requests are missing"
    return TurnResult(
        agent=agent.label,
        wall=wall,
        records=records,
        other_requests=server.other_paths_since(paths_before) if server else [],
        first_content_delta=first_delta,
        speech=speech,
        conversation_id=session.conversation_id,
        error=error,
    )
