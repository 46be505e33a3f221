"""Event-loop stall probe and resident memory, for the fresh-process figures."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
import logging
import os
import time

INTERVAL = 0.010  # the probe's resolution: it asks to wake up every 10 ms


@dataclass
class LoopLagProbe:
    """A task that sleeps 10 ms at a time and records how late each wake-up is.

    A wake-up `lag` seconds late means the loop ran something else, without yielding, for
    about that long: the stall a voice satellite or any other integration would feel.
    """

    samples: list[tuple[float, float]] = field(default_factory=list)  # (woke, lag)
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Begin probing on the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-lag-probe")

    async def stop(self) -> None:
        """End probing."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(INTERVAL)
            woke = time.perf_counter()
            self.samples.append((woke, max(0.0, woke - asked - INTERVAL)))

    def max_lag(self, start: float, end: float) -> float:
        """The longest stall whose wake-up fell in [start, end] (perf_counter seconds).

        The wake-up that ends a stall may come just after `end`; one interval of slack
        catches it.
        """
        lags = [lag for woke, lag in self.samples if start <= woke <= end + INTERVAL * 2]
        return max(lags, default=0.0)


class BlockingCallCounter(logging.Handler):
    """Counts Home Assistant's "Detected blocking call" reports (any logger)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the first line of each report."""
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001  a broken record is not a report
            return
        if "Detected blocking call" in message:
            self.messages.append(message.splitlines()[0][:400])


def rss_bytes() -> int:
    """Resident set size of this process, from /proc (no extra package)."""
    with open(f"/proc/{os.getpid()}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("VmRSS not found in /proc/self/status")
