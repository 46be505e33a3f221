"""Whether one database works now, and the way back when it does not.

A database that fails (PostgreSQL stopped, an SQLite file locked, full or read-only) is
*down* from the first failure the healing wrappers see (saver.py, store.py, beside.py):
from then on they answer from memory at once, so no turn waits for a connection timeout
again. A task tries the database again with a growing pause (RETRY_DELAYS), sooner when a
turn needs it (`nudge`). When an attempt works, what was kept in memory meanwhile is
written back (each wrapper registers its part), again until nothing new arrived during the
last pass; then, with no await in between, the database is *up* again and the memory side
starts empty. A write-back that fails leaves it down, keeping everything for the next try.

Home Assistant's side (persistence.py) gives the attempt (`reconnect`: reopen what must be
reopened, then prove a write works), a way to start the background task, and hears of each
change (the repair issue comes and goes). Diagnostics read the times of the last outage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
import logging
import time
from typing import Any

_LOGGER = logging.getLogger(__name__)

# Seconds between attempts while the database is down; the last repeats. Capped at 15 s
# so that what was said meanwhile is written back within about that long after the
# database returns, even when nobody speaks (an attempt is one connection or one small
# write: cheap).
RETRY_DELAYS: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 15.0)
# A turn that needs the database brings the next attempt forward, but attempts start at
# most this often (an attempt against an unreachable host can take its connect timeout).
NUDGE_INTERVAL = 2.0
# Write-back passes per attempt: turns that keep arriving during the write-back are
# written in the next pass; past this many, the next attempt goes on.
WRITE_BACK_PASSES = 5
# Seconds the last attempt may take when the storage closes while the database is down
# and something waits in memory (a reload or a stop soon after the database returned,
# before the next retry). It holds up the unload or Home Assistant's stop, so it is
# bounded: a database still away fails faster (refused), or is given up here.
LAST_ATTEMPT_LIMIT = 5.0

type StartTask = Callable[[Coroutine[Any, Any, None], str], asyncio.Task[None]]


@dataclass(slots=True)
class Outage:
    """The figures of a database's outages, for diagnostics (never the data)."""

    failed_at: datetime | None = None
    recovered_at: datetime | None = None
    error: str = ""
    outages: int = 0
    attempts: int = 0
    written_back: dict[str, int] = field(default_factory=dict)


class StorageHealth:
    """One database's state (up or down), its retries and its write-back."""

    def __init__(
        self,
        name: str,
        *,
        is_outage: Callable[[BaseException], bool],
        describe: Callable[[BaseException], str] = str,
        delays: tuple[float, ...] = RETRY_DELAYS,
        reads_while_down: bool = False,
    ) -> None:
        """`is_outage` tells a database failure from a mistake (a bad statement stays an
        error); `describe` words a failure without secrets (PostgreSQL's password);
        `reads_while_down`: the database may still answer reads when it refuses writes (an
        SQLite file: locked, full or read-only), so reads still ask it (a server that
        stopped answering would only make them wait)."""
        self.name = name
        self.reads_while_down = reads_while_down
        self.is_outage = is_outage
        self.describe = describe
        self.outage = Outage()
        # Bumped by every write kept in memory; the write-back ends when a pass saw none.
        self.changes = 0
        self._up = True
        self._delays = delays
        self._reconnect: Callable[[], Awaitable[None]] | None = None
        self._start_task: StartTask | None = None
        self._on_change: Callable[[BaseException | None], None] | None = None
        self._write_backs: list[Callable[[], Awaitable[dict[str, int]]]] = []
        self._resets: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._last_attempt = 0.0

    def connect(
        self,
        reconnect: Callable[[], Awaitable[None]],
        start_task: StartTask,
        on_change: Callable[[BaseException | None], None],
    ) -> None:
        """How to try the database again, how to run the retries in the background, and
        who hears of each change (the failure, or None when it is back)."""
        self._reconnect, self._start_task, self._on_change = reconnect, start_task, on_change

    def add_part(
        self, write_back: Callable[[], Awaitable[dict[str, int]]], reset: Callable[[], None]
    ) -> None:
        """A wrapper's part: write what it kept in memory to the database (counts of what
        went), and forget it once the database is up again."""
        self._write_backs.append(write_back)
        self._resets.append(reset)

    @property
    def up(self) -> bool:
        """Whether the database is used now (else the memory side is)."""
        return self._up

    def failed(self, error: BaseException) -> None:
        """A wrapper met a failure of the database: down from now on (logged once per
        outage, without a traceback: the repair issue says what to do)."""
        if not self._up:
            return
        self._up = False
        outage = self.outage
        outage.failed_at, outage.error = datetime.now(UTC), self.describe(error)
        outage.outages += 1
        outage.written_back = {}
        _LOGGER.error(
            "%s failed (%s); answering from memory and trying it again in the background",
            self.name,
            outage.error,
        )
        if self._on_change is not None:
            self._on_change(error)
        self._start_retries()

    def start_down(self, problem: str) -> None:
        """The database could not be opened (the opener logged it and raised its repair
        issue): down from the start, retried."""
        if not self._up:
            return
        self._up = False
        outage = self.outage
        outage.failed_at, outage.error = datetime.now(UTC), problem
        outage.outages += 1
        outage.written_back = {}
        self._start_retries()

    def nudge(self) -> None:
        """A turn needs the database: try it soon rather than at the end of the pause."""
        if not self._up and time.monotonic() - self._last_attempt >= NUDGE_INTERVAL:
            self._wake.set()

    def _start_retries(self) -> None:
        if self._start_task is None or (self._task is not None and not self._task.done()):
            return
        self._task = self._start_task(self._retry(), f"{self.name} reconnect")

    async def _retry(self) -> None:
        """Try again with growing pauses until the database works and holds what was said
        meanwhile."""
        attempt = 0
        while not self._up:
            delay = self._delays[min(attempt, len(self._delays) - 1)]
            # Cleared once woken, not before the pause: a turn's nudge that came before
            # it (the failing turn's own, or one during an attempt) still counts.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
            self._wake.clear()
            attempt += 1
            self.outage.attempts += 1
            self._last_attempt = time.monotonic()
            if await self._attempt():
                return

    async def _attempt(self) -> bool:
        """One try: reconnect, write back, and come up; whether it is up now."""
        assert self._reconnect is not None
        try:
            await self._reconnect()
            for _ in range(WRITE_BACK_PASSES):
                seen = self.changes
                for write_back in self._write_backs:
                    for part, count in (await write_back()).items():
                        written = self.outage.written_back
                        written[part] = written.get(part, 0) + count
                if self.changes == seen:
                    self._come_up()
                    return True
        except Exception as err:  # any failure: still down, try again later
            if not self.is_outage(err):
                _LOGGER.warning("Writing back to %s failed: %s", self.name, err, exc_info=True)
            self.outage.error = self.describe(err)
        return False

    def _come_up(self) -> None:
        """Everything kept in memory is in the database: use it again (no await here, so
        no write slips in between)."""
        self._up = True
        self.outage.recovered_at = datetime.now(UTC)
        for reset in self._resets:
            reset()
        _LOGGER.warning(
            "%s works again; what was said meanwhile is written back (%s)",
            self.name,
            ", ".join(f"{count} {part}" for part, count in self.outage.written_back.items())
            or "nothing to write",
        )
        if self._on_change is not None:
            self._on_change(None)

    def as_diagnostics(self) -> dict[str, Any]:
        """State and times of the last outage, never data or secrets."""
        outage = self.outage
        return {
            "state": "up" if self._up else "down",
            "outages": outage.outages,
            "failed_at": outage.failed_at.isoformat() if outage.failed_at else None,
            "recovered_at": outage.recovered_at.isoformat() if outage.recovered_at else None,
            "last_error": outage.error or None,
            "attempts": outage.attempts,
            "written_back": dict(outage.written_back),
        }

    async def aclose(self, *, last_attempt: bool = False) -> None:
        """Stop retrying (the storage closes). With `last_attempt` (something waits in
        memory) a database that is down is tried once more first, within
        LAST_ATTEMPT_LIMIT: what was said meanwhile is written back if it has returned."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if not last_attempt or self._up or self._reconnect is None:
            return
        self.outage.attempts += 1
        try:
            async with asyncio.timeout(LAST_ATTEMPT_LIMIT):
                await self._attempt()
        except TimeoutError:
            self.outage.error = f"no answer within {LAST_ATTEMPT_LIMIT:g} s"
