"""StorageHealth: its retries, its write-back passes, what it logs and tells.

The parts are stand-ins here (a write-back that counts its calls, fails when told, or
has a write arrive while it runs): the real wrappers are tested beside. Nothing waits on
time: the pauses are tiny or endless, and the tests wait on conditions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
import logging
from typing import Any

import pytest

from custom_components.langgraph_conversation.storage.healing import StorageHealth, health
from custom_components.langgraph_conversation.storage.healing.health import WRITE_BACK_PASSES

from . import DatabaseDown, Switch, wait_for, wait_up

type MakeHealth = Callable[..., StorageHealth]

ENDLESS = (3600.0,)
TASK_NAME = "test database reconnect"


class Part:
    """A wrapper's part as the health sees it: its write-back (failing `failures` times
    with `error`, or recording a new write during its first `writes_meanwhile` calls) and
    its reset."""

    def __init__(
        self,
        owner: StorageHealth,
        *,
        failures: int = 0,
        error: Exception | None = None,
        writes_meanwhile: int = 0,
    ) -> None:
        self.owner, self.failures, self.writes_meanwhile = owner, failures, writes_meanwhile
        self.error = error or DatabaseDown("again")
        self.calls = 0
        self.resets = 0
        self.calls_at_reset: list[int] = []
        owner.add_part(self.write_back, self.reset)

    async def write_back(self) -> dict[str, int]:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        if self.calls <= self.writes_meanwhile:
            self.owner.changes += 1  # a turn wrote to memory while this pass ran
        return {"things": 2}

    def reset(self) -> None:
        self.resets += 1
        self.calls_at_reset.append(self.calls)


async def settle() -> None:
    """Let every ready task run a few steps (no waiting on time)."""
    for _ in range(20):
        await asyncio.sleep(0)


def reconnect_tasks() -> list[asyncio.Task[Any]]:
    return [
        task for task in asyncio.all_tasks() if task.get_name() == TASK_NAME and not task.done()
    ]


async def test_back_off_grows_and_its_last_pause_repeats(
    make_health: MakeHealth, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five failed attempts and a sixth that works: the pauses before them follow the
    delays given, the last repeating; each attempt is counted."""
    paused: list[float] = []
    wait_for_original = asyncio.wait_for

    async def recording(awaitable: Any, timeout: float | None) -> Any:
        if getattr(awaitable, "__qualname__", "") == "Event.wait":
            paused.append(timeout or 0.0)
        return await wait_for_original(awaitable, timeout)

    monkeypatch.setattr(asyncio, "wait_for", recording)
    attempts: list[int] = []

    async def reconnect() -> None:
        attempts.append(len(attempts) + 1)
        if len(attempts) <= 5:
            raise DatabaseDown("still down")

    owner = make_health(Switch(), delays=(0.001, 0.002, 0.003), reconnect=reconnect)
    owner.failed(DatabaseDown("stopped"))
    await wait_up(owner)
    assert paused == [0.001, 0.002, 0.003, 0.003, 0.003, 0.003]
    assert owner.outage.attempts == 6


async def test_nudge_brings_an_attempt_forward(
    make_health: MakeHealth, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an endless pause, a nudge makes the attempt now; a nudge sooner than
    NUDGE_INTERVAL after an attempt waits for the pause, and one while up does nothing."""
    switch = Switch()
    switch.off()
    owner = make_health(switch, delays=ENDLESS)
    owner.nudge()
    await settle()
    assert owner.outage.attempts == 0  # up: nothing to try
    owner.failed(DatabaseDown("stopped"))
    await settle()  # the retry task is in its pause (a nudge before it starts is cleared)
    owner.nudge()
    await wait_for(lambda: owner.outage.attempts == 1, lambda: "the nudge did not try")
    assert not owner.up
    monkeypatch.setattr(health, "NUDGE_INTERVAL", 3600.0)
    switch.switch_on()
    owner.nudge()
    await settle()
    assert (owner.outage.attempts, owner.up) == (1, False)
    monkeypatch.setattr(health, "NUDGE_INTERVAL", 0.0)
    owner.nudge()
    await wait_up(owner)
    assert owner.outage.attempts == 2


async def test_one_log_line_and_one_change_each_way_per_outage(
    make_health: MakeHealth, caplog: pytest.LogCaptureFixture
) -> None:
    """Many failures seen in one outage: one error logged and one change told; coming up:
    one line and one change (None); a second outage again one of each."""
    switch = Switch()
    changes: list[BaseException | None] = []
    owner = make_health(switch, on_change=changes.append)
    Part(owner)
    failures = [DatabaseDown(f"failure {number}") for number in range(2)]
    for outage in failures:
        switch.off()
        for _ in range(5):
            owner.failed(outage)
        switch.switch_on()
        await wait_up(owner)
    assert changes == [failures[0], None, failures[1], None]
    records = [r for r in caplog.records if r.name == health.__name__]
    assert [(r.levelno, r.exc_info) for r in records] == [
        (logging.ERROR, None),
        (logging.WARNING, None),
    ] * 2
    assert "failure 0" in records[0].getMessage()
    assert "2 things" in records[1].getMessage()


async def test_diagnostics_tell_the_last_outage(make_health: MakeHealth) -> None:
    """Up and clean at first; down with when and why; up again with when it recovered,
    the attempts and what was written back, never more."""
    switch = Switch()
    owner = make_health(switch)
    Part(owner)
    assert owner.as_diagnostics() == {
        "state": "up",
        "outages": 0,
        "failed_at": None,
        "recovered_at": None,
        "last_error": None,
        "attempts": 0,
        "written_back": {},
    }
    switch.off()
    owner.failed(DatabaseDown("the server stopped"))
    down = owner.as_diagnostics()
    assert (down["state"], down["outages"], down["last_error"]) == ("down", 1, "the server stopped")
    assert down["failed_at"] is not None
    assert down["recovered_at"] is None
    await wait_for(lambda: owner.outage.attempts >= 2, lambda: "no attempts")
    switch.switch_on()
    await wait_up(owner)
    up = owner.as_diagnostics()
    assert (up["state"], up["outages"], up["written_back"]) == ("up", 1, {"things": 2})
    assert up["failed_at"] == down["failed_at"]
    assert up["recovered_at"] >= up["failed_at"]
    assert up["attempts"] >= 3


async def test_aclose_stops_the_retries(make_health: MakeHealth) -> None:
    """Closing while down cancels the retry task: nothing is left running, closing twice
    is fine, and it stays down."""
    owner = make_health(Switch(), delays=ENDLESS)
    owner.start_down("could not be opened")
    await settle()
    assert len(reconnect_tasks()) == 1
    await owner.aclose()
    await owner.aclose()
    assert reconnect_tasks() == []
    assert not owner.up


@pytest.mark.parametrize("back", [True, False], ids=["back", "still-down"])
async def test_a_last_attempt_as_the_storage_closes(make_health: MakeHealth, back: bool) -> None:
    """Closing with something in memory tries once more, the retries' pause not waited
    for: a database that is back gets the write-back and is up; one still down stays down,
    its memory kept (the caller says it is lost). Without the request, no attempt."""
    switch = Switch()
    owner = make_health(switch, delays=ENDLESS)
    part = Part(owner)
    switch.off()
    owner.failed(DatabaseDown("stopped"))
    await settle()
    assert len(reconnect_tasks()) == 1  # waiting out its (endless) pause
    attempts = owner.outage.attempts
    if back:
        switch.switch_on()
    await owner.aclose(last_attempt=True)
    assert owner.up is back
    assert owner.outage.attempts == attempts + 1
    assert (part.calls, part.resets) == ((1, 1) if back else (0, 0))
    assert reconnect_tasks() == []


async def test_the_last_attempt_is_bounded(
    make_health: MakeHealth, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database that does not answer at all holds the close up for LAST_ATTEMPT_LIMIT at
    most (the limit made tiny here), and the outage says why."""
    never = asyncio.Event()

    async def hangs() -> None:
        await never.wait()

    monkeypatch.setattr(health, "LAST_ATTEMPT_LIMIT", 0.05)
    owner = make_health(Switch(), delays=ENDLESS, reconnect=hangs)
    Part(owner)
    owner.start_down("could not be opened")
    await owner.aclose(last_attempt=True)
    assert not owner.up
    assert owner.outage.error == "no answer within 0.05 s"
    assert [task for task in asyncio.all_tasks() if task.get_coro().__name__ == "hangs"] == []


@pytest.mark.parametrize(
    "error", [DatabaseDown("down again"), ValueError("a bad statement")], ids=["outage", "mistake"]
)
async def test_failed_write_back_keeps_everything_for_the_next_attempt(
    error: Exception, make_health: MakeHealth, caplog: pytest.LogCaptureFixture
) -> None:
    """A write-back that fails (the database again, or a mistake) leaves it down and
    forgets nothing (no reset); the next attempt writes and comes up. Only a mistake is
    logged with its traceback."""
    owner = make_health(Switch())
    part = Part(owner, failures=1, error=error)
    owner.failed(DatabaseDown("stopped"))
    await wait_up(owner)
    assert (part.calls, part.resets, part.calls_at_reset) == (2, 1, [2])
    assert owner.outage.attempts == 2
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == (1 if isinstance(error, ValueError) else 0)


async def test_writes_during_the_write_back_get_another_pass(make_health: MakeHealth) -> None:
    """A write arriving while a pass runs: another pass before coming up, in the same
    attempt; the parts are reset only after the last."""
    owner = make_health(Switch())
    first, second = Part(owner, writes_meanwhile=1), Part(owner)
    owner.failed(DatabaseDown("stopped"))
    await wait_up(owner)
    assert (first.calls, second.calls) == (2, 2)
    assert (first.calls_at_reset, second.calls_at_reset) == ([2], [2])
    assert owner.outage.attempts == 1


async def test_writes_that_keep_arriving_wait_for_the_next_attempt(
    make_health: MakeHealth,
) -> None:
    """Writes arriving during every pass: past WRITE_BACK_PASSES the attempt gives way
    (still down, nothing reset), and a later attempt comes up once a pass saw none."""
    owner = make_health(Switch())
    part = Part(owner, writes_meanwhile=WRITE_BACK_PASSES + 2)
    owner.failed(DatabaseDown("stopped"))
    await wait_up(owner)
    assert part.calls == WRITE_BACK_PASSES + 3
    assert part.calls_at_reset == [WRITE_BACK_PASSES + 3]
    assert owner.outage.attempts == 2
