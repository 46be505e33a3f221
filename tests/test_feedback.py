"""Feedback on answers: rate_answer stores a rating with its answer in threads.db."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
import sqlite3
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import (
    MockConfigEntry,
    MockUser,
    async_capture_events,
)

from custom_components.langgraph_conversation.const import DOMAIN, EVENT_ACTIVITY
from custom_components.langgraph_conversation.diagnostics import (
    async_get_config_entry_diagnostics,
)
from fakes import FakeOpenAIServer
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.exceptions import ServiceValidationError, Unauthorized

from .conftest import agent_entity_id
from .postgres import BOTH_BACKENDS


async def _call(
    hass: HomeAssistant, service: str, data: dict[str, Any], user: MockUser | None
) -> Any:
    return await hass.services.async_call(
        DOMAIN,
        service,
        data,
        blocking=True,
        context=Context(user_id=user.id if user else None),
        return_response=service != "clear_thread",
    )


def _rows(path: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute("SELECT rating, comment FROM answer_ratings").fetchall()


async def test_rating_is_stored_exported_counted_and_reported(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    hass_read_only_user: MockUser,
) -> None:
    """A person rates their own answers; export shows them, diagnostics counts them, an
    activity event reports them without the comment; others need an administrator."""
    agent = agent_entity_id(hass, setup_integration)
    # Recorded by a callback, in the order fired (a plain function would be run in the
    # executor, where two events may be appended in either order).
    events = async_capture_events(hass, EVENT_ACTIVITY)
    person = Context(user_id=hass_read_only_user.id)
    openai_server.add_text("First answer.")
    first = await conversation.async_converse(hass, "One", None, person, agent_id=agent)
    openai_server.add_text("Second answer.")
    await conversation.async_converse(hass, "Two", first.conversation_id, person, agent_id=agent)
    own = {"agent": agent, "conversation_id": first.conversation_id}

    assert await _call(
        hass,
        "rate_answer",
        {**own, "rating": "up", "comment": "SECRET-COMMENT"},
        hass_read_only_user,
    ) == {"turn": 2}
    assert await _call(
        hass, "rate_answer", {**own, "rating": "down", "turn": 1}, hass_read_only_user
    ) == {"turn": 1}
    await hass.async_block_till_done()
    rated = [e.data for e in events if e.data.get("type") == "answer_rated"]
    assert [(e["turn"], e["rating"], e["has_comment"]) for e in rated] == [
        (2, "up", True),
        (1, "down", False),
    ]
    assert "SECRET-COMMENT" not in repr(rated)

    theirs = {**own, "user_id": hass_read_only_user.id}
    exported = (await _call(hass, "export_thread", theirs, hass_admin_user))["messages"]
    assert [(m["content"], m.get("rating")) for m in exported] == [
        ("One", None),
        ("First answer.", {"rating": "down", "comment": ""}),
        ("Two", None),
        ("Second answer.", {"rating": "up", "comment": "SECRET-COMMENT"}),
    ]
    storage = (await async_get_config_entry_diagnostics(hass, setup_integration))["storage"]
    assert (storage["threads"]["answers_rated_up"], storage["threads"]["answers_rated_down"]) == (
        1,
        1,
    )
    assert "SECRET-COMMENT" not in repr(storage)

    # Another person naming this user: refused; an administrator may.
    admin = hass_admin_user
    other = MockUser(name="Someone else").add_to_hass(hass)
    with pytest.raises(Unauthorized):
        await _call(hass, "rate_answer", {**theirs, "rating": "down"}, other)
    await _call(hass, "rate_answer", {**theirs, "rating": "down"}, admin)
    # Another person's own view of that conversation id has nothing to rate.
    with pytest.raises(ServiceValidationError):
        await _call(hass, "rate_answer", {**own, "rating": "up"}, other)
    with pytest.raises(ServiceValidationError):
        await _call(hass, "rate_answer", {**own, "rating": "up", "turn": 3}, hass_read_only_user)

    path = Path(hass.config.path(DOMAIN, "threads.db"))
    assert len(await hass.async_add_executor_job(_rows, path)) == 2
    await _call(hass, "clear_thread", theirs, hass_admin_user)
    assert await hass.async_add_executor_job(_rows, path) == []


async def test_a_linked_conversation_rates_its_thread(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A satellite's new conversation continues its thread: its first answer is there."""
    agent = agent_entity_id(hass, setup_integration)
    openai_server.add_text("Earlier answer.")
    await conversation.async_converse(
        hass, "Earlier", None, Context(), agent_id=agent, device_id="kitchen"
    )
    openai_server.add_text("Later answer.")
    later = await conversation.async_converse(
        hass, "Later", None, Context(), agent_id=agent, device_id="kitchen"
    )
    data = {"agent": agent, "conversation_id": later.conversation_id, "device_id": "kitchen"}
    assert await _call(hass, "rate_answer", {**data, "rating": "up", "turn": 1}, None) == {
        "turn": 1
    }
    exported = (await _call(hass, "export_thread", data, None))["messages"]
    assert [m["content"] for m in exported if "rating" in m] == ["Earlier answer."]


@BOTH_BACKENDS
async def test_a_cleared_conversation_leaves_no_rating_behind(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
) -> None:
    """Clearing a conversation deletes its ratings with it, on SQLite and PostgreSQL;
    another conversation's rating stays."""
    agent = agent_entity_id(hass, setup_integration)
    person = Context(user_id=hass_admin_user.id)
    kept_and_cleared = []
    for text in ("Kept", "Cleared"):
        openai_server.add_text(f"{text} answer.")
        result = await conversation.async_converse(hass, text, None, person, agent_id=agent)
        data = {"agent": agent, "conversation_id": result.conversation_id}
        await _call(hass, "rate_answer", {**data, "rating": "up"}, hass_admin_user)
        kept_and_cleared.append(data)

    async def rated_up() -> int:
        diagnostics = await async_get_config_entry_diagnostics(hass, setup_integration)
        return diagnostics["storage"]["threads"]["answers_rated_up"]

    assert await rated_up() == 2
    await _call(hass, "clear_thread", kept_and_cleared[1], hass_admin_user)
    assert await rated_up() == 1
    exported = (await _call(hass, "export_thread", kept_and_cleared[0], hass_admin_user))[
        "messages"
    ]
    assert [m.get("rating") for m in exported] == [None, {"rating": "up", "comment": ""}]
