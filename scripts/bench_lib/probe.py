"""Event-loop stall probe and resident memory, for the fresh-process figures."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
import gc
import logging
import os
import threading
import time

INTERVAL = 0.010  # the probe's resolution: it asks to wake up every 10 ms


@dataclass
class LoopLagProbe:
    """A task that sleeps 10 ms at a time and records how late each wake-up is.

    A wake-up `lag` seconds late means the loop ran something else, without yielding, for
    about that long: the stall a voice satellite or any other integration would feel.
    """

    samples: list[tuple[float, float]] = field(default_factory=list)  # (woke, lag)
    interval: float = INTERVAL  # how often it asks to wake (figure 14 asks every 5 ms)
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
            await asyncio.sleep(self.interval)
            woke = time.perf_counter()
            self.samples.append((woke, max(0.0, woke - asked - self.interval)))

    def max_lag(self, start: float, end: float) -> float:
        """The longest stall whose wake-up fell in [start, end] (perf_counter seconds).

        The wake-up that ends a stall may come just after `end`; one interval of slack
        catches it.
        """
        lags = [lag for woke, lag in self.samples if start <= woke <= end + self.interval * 2]
        return max(lags, default=0.0)


@dataclass
class GcPauses:
    """Every cyclic garbage collection: when it ended, how long it took, which generation,
    and whether it ran on the event loop's thread (a collection holds the GIL, so one on
    another thread stalls the loop just the same)."""

    samples: list[tuple[float, float, int, bool]] = field(default_factory=list)
    _started: float = 0.0
    _loop_thread: int = field(default_factory=threading.get_ident)

    def start(self) -> None:
        """Begin recording (call on the loop's thread)."""
        self._loop_thread = threading.get_ident()
        gc.callbacks.append(self._callback)

    def stop(self) -> None:
        """End recording."""
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._started = now
            return
        on_loop = threading.get_ident() == self._loop_thread
        self.samples.append((now, now - self._started, info["generation"], on_loop))

    def longest(self, start: float, end: float) -> dict[str, float | int | bool] | None:
        """The longest collection that ended in [start, end]."""
        found = [s for s in self.samples if start <= s[0] <= end]
        if not found:
            return None
        _, seconds, generation, on_loop = max(found, key=lambda s: s[1])
        return {
            "ms": round(seconds * 1000, 1),
            "generation": generation,
            "on_loop_thread": on_loop,
            "collections": len(found),
        }


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
