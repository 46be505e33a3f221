"""Watching which async generators the event loop has to close.

Python hands an async generator that is dropped while suspended to the event loop's
finalizer hook, which closes it later in a task of its own: after the code that opened it
has returned (and, in a test on a busy machine, sometimes after the test). The tests of
streams use this to check that every generator is closed by whoever read it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
import gc
import sys
from typing import Any


class LoopClosings:
    """The async generators handed to the event loop to close, while watched."""

    def __init__(self) -> None:
        self.generators: list[str] = []

    def record(self, generator: Any) -> None:
        code = generator.ag_code
        self.generators.append(f"{code.co_filename.rsplit('/', 2)[-1]}:{code.co_qualname}")


@contextmanager
def watch_loop_closings() -> Iterator[LoopClosings]:
    """Wrap the running loop's asyncgen finalizer hook: it still closes, and we see what.

    Used inside a test's body: the loop installs its hooks each time it starts running,
    so a fixture's would be gone by the time the test runs.
    """
    gc.collect()  # generators abandoned before the watch are not the watched code's
    first_iter, finalizer = sys.get_asyncgen_hooks()
    assert finalizer is not None, "no running event loop's hook to watch"
    closings = LoopClosings()

    def watched(generator: Any) -> None:
        closings.record(generator)
        finalizer(generator)

    sys.set_asyncgen_hooks(first_iter, watched)
    try:
        yield closings
        # A generator in a reference cycle reaches the hook only when the collector runs.
        gc.collect()
    finally:
        sys.set_asyncgen_hooks(first_iter, finalizer)


@contextmanager
def nothing_left_for_the_loop() -> Iterator[None]:
    """Fail if the code inside leaves any async generator for the event loop to close."""
    with watch_loop_closings() as closings:
        yield
    assert closings.generators == [], f"left for the event loop: {closings.generators}"
