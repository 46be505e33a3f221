"""LiteLLM's heap, taken out of the cyclic garbage collector's walk once per process.

Behaviour worked around (LiteLLM 1.83.0 with the OpenAI SDK, CPython 3.13 and 3.14):
importing LiteLLM brings about 2,000 modules (a few hundred megabytes of objects:
modules, classes, functions, pydantic schemas) that live as long as the process. Each
full collection walks all of them: 200-400 ms holding the GIL, so Home Assistant's event
loop stands still, during the import (in the executor) and later, every few turns, on the
loop itself. `gc.freeze()` moves the objects that exist at that moment to the permanent
generation, which collections skip; objects created later are collected as always.
Nothing in the library stack offers this; it is the standard library's own remedy for
large long-lived heaps, and no private member is touched (no version check: the
standard library's documented API on every Python Home Assistant runs on).

The one hazard: a frozen object is never collected, reference cycles included. Every
options change reloads an entry; freezing at each setup also froze whatever the unloaded
runtime had left for the collector, for the life of the process (scripts/bench figure 12).
So the heap is frozen twice per process, both times before any runtime of ours can have
been unloaded: once LiteLLM has been imported, and after the first warm-up (the provider
modules it imported). Later warm-ups (another provider) freeze nothing: their modules are
walked by full collections, which costs time, never memory.
"""

from __future__ import annotations

import gc
import importlib
import threading
from types import ModuleType

_lock = threading.Lock()
_warm_up_frozen = False


def import_frozen(name: str) -> ModuleType:
    """Import a module with the collector paused, then freeze everything alive.

    No collection while it loads (it would walk a heap that is still growing, holding
    the GIL); the objects are frozen once it has loaded, so none later either.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module(name)
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


def freeze_after_first_warm_up() -> bool:
    """Freeze what the first warm-up imported; later calls do nothing. True if it froze."""
    global _warm_up_frozen
    with _lock:
        if _warm_up_frozen:
            return False
        _warm_up_frozen = True
        gc.freeze()
        return True
