"""Conversations held before conversations had owners continue after the update (#31).

Home Assistant runs over the threads.db the release before the rework (commit 446498e)
wrote with its own code (earlier_release.py): a conversation whose id Home Assistant had
issued continues for the first party that brings the id back, and for nobody else; one
whose id a client chose is continued by nobody, and stays stored. Every case asserts on
what reached the fake model server.
"""

from __future__ import annotations

from contextlib import closing
import json
import logging
from pathlib import Path
import shutil
import sqlite3
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, MockUser

from custom_components.langgraph_conversation.const import (
    CONF_THREAD_IDLE_DAYS,
    DOMAIN,
    THREADS_FILE,
)
from fakes import FakeOpenAIServer
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import issue_registry as ir

from ...conftest import add_test_entry, agent_entity_id
from .earlier_release import (
    AGENT_ID,
    CHOSEN_ANSWER,
    CHOSEN_ID,
    CHOSEN_REQUEST,
    FIXTURE,
    ISSUED_ANSWER,
    ISSUED_ID,
    ISSUED_REQUEST,
    ISSUED_TOOL_ARGUMENT,
)

ISSUED_MARKS = (ISSUED_REQUEST, ISSUED_TOOL_ARGUMENT, ISSUED_ANSWER)


@pytest.fixture
def config_entry(
    hass: HomeAssistant, openai_server: FakeOpenAIServer, agent_options: dict[str, Any]
) -> MockConfigEntry:
    """The agent the earlier conversations were held with (the same subentry id), over
    the threads.db the earlier release wrote. Conversations are kept however long idle:
    the file's conversations date from when it was written."""
    folder = Path(hass.config.path(DOMAIN))
    folder.mkdir()
    shutil.copyfile(FIXTURE, folder / THREADS_FILE)
    return add_test_entry(
        hass,
        openai_server.api_base,
        agent_options,
        options={CONF_THREAD_IDLE_DAYS: 0},
        subentry_id=AGENT_ID,
    )


@pytest.fixture
def users(hass_admin_user: MockUser, hass_read_only_user: MockUser) -> dict[str, str | None]:
    """Two real Home Assistant users, and nobody."""
    return {"a": hass_admin_user.id, "b": hass_read_only_user.id, "nobody": None}


async def _say(
    hass: HomeAssistant,
    entry: MockConfigEntry,
    user: str | None,
    text: str,
    conversation_id: str | None,
    device_id: str | None = None,
) -> conversation.ConversationResult:
    return await conversation.async_converse(
        hass,
        text,
        conversation_id,
        Context(user_id=user),
        agent_id=agent_entity_id(hass, entry),
        device_id=device_id,
    )


def _last_request(server: FakeOpenAIServer) -> str:
    return json.dumps(server.requests[-1])


def _checkpoints_of(path: Path, thread_id: str) -> int:
    with closing(sqlite3.connect(path)) as connection:
        (count,) = connection.execute(
            "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (thread_id,)
        ).fetchone()
    return count


async def test_a_notice_says_who_continues_the_earlier_conversations(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    users: dict[str, str | None],
) -> None:
    """The repair notice counts the conversations nobody holds yet and says who may
    continue them; once each is held (or gone), the next opening finds none to report."""
    issues = ir.async_get(hass)
    notice = issues.async_get_issue(DOMAIN, "earlier_conversations")
    assert notice is not None
    assert notice.severity is ir.IssueSeverity.WARNING
    assert notice.translation_placeholders == {"count": "2"}
    texts = json.loads(
        (
            Path(__file__).parents[3] / "custom_components" / DOMAIN / "translations" / "en.json"
        ).read_text(encoding="utf-8")
    )["issues"]["earlier_conversations"]
    assert "{count}" in texts["description"]

    await _say(hass, setup_integration, users["a"], "Turn them off again", ISSUED_ID)
    assert await hass.config_entries.async_reload(setup_integration.entry_id)
    await hass.async_block_till_done()
    notice = issues.async_get_issue(DOMAIN, "earlier_conversations")
    assert notice is not None
    assert notice.translation_placeholders == {"count": "1"}


async def test_a_conversation_from_before_the_update_continues(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    users: dict[str, str | None],
) -> None:
    """The client brings back the id Home Assistant gave it before the update: the
    conversation goes on from the earlier release's thread (its request, tool call and
    answer), also on the new id, and the export of the old id holds it whole."""
    result = await _say(hass, setup_integration, users["a"], "Turn them off again", ISSUED_ID)
    # Home Assistant no longer knows the id after the restart and issued a new one.
    assert result.conversation_id != ISSUED_ID
    sent = openai_server.requests[-1]["messages"]
    assert [m["role"] for m in sent if m["role"] != "system"] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert all(mark in _last_request(openai_server) for mark in ISSUED_MARKS)

    await _say(hass, setup_integration, users["a"], "And the hallway", result.conversation_id)
    request = _last_request(openai_server)
    assert ISSUED_REQUEST in request
    assert "Turn them off again" in request

    exported = await hass.services.async_call(
        DOMAIN,
        "export_thread",
        {"agent": agent_entity_id(hass, setup_integration), "conversation_id": ISSUED_ID},
        blocking=True,
        context=Context(user_id=users["a"]),
        return_response=True,
    )
    contents = [message["content"] for message in exported["messages"]]
    assert contents[0] == ISSUED_REQUEST
    assert "And the hallway" in contents


@pytest.mark.parametrize(
    ("user", "device"),
    [("b", None), ("nobody", None), ("nobody", "satellite-x"), ("a", "satellite-x")],
)
async def test_once_continued_it_is_nobody_elses(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    users: dict[str, str | None],
    user: str,
    device: str | None,
) -> None:
    """After user a continued it, another party bringing the same id gets a fresh
    conversation, and a's next turn on it still holds a's conversation."""
    await _say(hass, setup_integration, users["a"], "Turn them off again", ISSUED_ID)
    await _say(hass, setup_integration, users[user], "What was said?", ISSUED_ID, device)
    assert not any(mark in _last_request(openai_server) for mark in ISSUED_MARKS)
    await _say(hass, setup_integration, users["a"], "And now?", ISSUED_ID)
    assert ISSUED_REQUEST in _last_request(openai_server)


@pytest.mark.parametrize(
    ("user", "device"), [("a", None), ("b", None), ("nobody", None), ("nobody", "satellite-x")]
)
async def test_a_conversation_whose_owner_cannot_be_told_is_nobodys(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    users: dict[str, str | None],
    caplog: pytest.LogCaptureFixture,
    user: str,
    device: str | None,
) -> None:
    """A conversation id the client chose could have come from anybody: whoever sends it
    after the update (even the user who held it) starts fresh, a warning says why, and
    the earlier conversation stays in threads.db."""
    with caplog.at_level(logging.WARNING):
        await _say(hass, setup_integration, users[user], "What is our PIN hint?", CHOSEN_ID, device)
    request = _last_request(openai_server)
    assert CHOSEN_REQUEST not in request
    assert CHOSEN_ANSWER not in request
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(repr(CHOSEN_ID) in w and "not continued" in w for w in warnings), warnings

    path = Path(hass.config.path(DOMAIN, THREADS_FILE))
    earlier = f"{AGENT_ID}:{CHOSEN_ID}"
    assert await hass.async_add_executor_job(_checkpoints_of, path, earlier) > 0
    # The same party's next turn continues its own new conversation, without a warning
    # (the first turn's queued work is done before its log lines are forgotten).
    await hass.async_block_till_done()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        await _say(hass, setup_integration, users[user], "Anything else?", CHOSEN_ID, device)
    assert "What is our PIN hint?" in _last_request(openai_server)
    assert not [r for r in caplog.records if "not continued" in r.getMessage()]
