"""The agent's stack, loaded and built off the setup's critical path.

Importing LiteLLM, LangGraph and the OpenAI SDK takes seconds and about 150 MiB, and
LiteLLM imports a provider's modules again on its first call. Done in an entry's setup, that
work delayed every entry and Home Assistant's start (the "Integration startup times" list).
Now the setup imports nothing heavy: it creates the entities with an `EntryStack` as the
entry's runtime data, and the stack loads in the background once Home Assistant has
started (at once when it already runs: a reload, an entry added later, the tests): the
heavy modules and LiteLLM's first-call warm-up in the executor, then, on the loop, the
storage is acquired and the `AgentRuntime` built. A turn (or an action) that arrives
earlier starts that same build and waits for it, so the imports never run on the event loop
and never run twice. Unloading the entry cancels the build and closes what it built.

The integration's modules that import the heavy libraries are listed in `STACK_MODULES`;
the light modules (the entry's, the entities', the config flow's) import them only inside
functions that run after `async_runtime()` has returned, when they are already loaded
(tests/test_light_setup.py checks both).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
import contextlib
from functools import partial
import importlib
import logging
import sys
from typing import TYPE_CHECKING

from homeassistant.config_entries import ConfigEntry
from homeassistant.core import HomeAssistant, callback
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers.start import async_at_started

from .const import DOMAIN

if TYPE_CHECKING:
    from .agent.models import ModelAccess
    from .agent.runtime import AgentRuntime

_LOGGER = logging.getLogger(__name__)

# The integration's own modules that import the agent's libraries (LangGraph,
# langchain-core), loaded by the stack in the executor...
STACK_MODULES = (
    "persistence",
    "migrate",
    "parties",
    "activity",
    "turn_assembly",
    "task_assembly",
    "tools.all_tools",
    "tools.effects",
    "tools.ha_llm_api",
    "tools.people",
    "tools.web_search",
    "agent.runtime.agent_runtime",
    "agent.runtime.thread_directory",
    "agent.models.lifecycle",
    "agent.models.ollama_chat",
    "agent.models.one_shot",
    "agent.models.images",
    "agent.models.embeddings",
    "agent.models.web_search",
    "service_actions",
    "agent.guard.safety",
)
# ...and those that import LiteLLM and the OpenAI SDK, loaded too when a model of the entry
# needs LiteLLM (every provider but Ollama's native API).
LITELLM_MODULES = ("agent.models.litellm_chat",)


# How long closing waits for a load still running in the executor (imports and LiteLLM's
# warm-up take seconds on a small box; a hung one must not hold Home Assistant's stop).
LOAD_END_WAIT = 60.0


class StackFailed(HomeAssistantError):
    """The entry's stack could not be built (the log says why); the next caller tries again."""


class EntryStack:
    """One entry's runtime data: its model access at once, its `AgentRuntime` once built."""

    def __init__(
        self,
        hass: HomeAssistant,
        # runtime_entry.LangGraphConfigEntry names this class: spelled out here, so that
        # this module needs nothing of that one (no import circle, not even for types).
        entry: ConfigEntry[EntryStack],
        access: ModelAccess,
        accesses: Sequence[ModelAccess],
    ) -> None:
        """`accesses`: every distinct model the entry's agents call (warmed up first)."""
        self.access = access
        self._hass = hass
        self._entry = entry
        self._accesses = tuple(accesses)
        self._task: asyncio.Task[AgentRuntime] | None = None
        self._runtime: AgentRuntime | None = None
        self._closed = False
        self._holds_storage = False
        # The executor's part of the build (imports, warm-up): it cannot be stopped once
        # running, so closing waits for it (nothing it starts may outlive an unload).
        self._loading: asyncio.Future[None] | None = None
        # Set by the executor's thread itself when its part ends: Home Assistant's stop
        # cancels the executor futures it tracks, `_loading` among them, while the
        # thread goes on.
        self._load_ended = asyncio.Event()

    @property
    def runtime(self) -> AgentRuntime:
        """The built runtime; only once `async_runtime()` has returned (or the build ended)."""
        if self._runtime is None:
            raise RuntimeError("the agent's stack has not been built yet")
        return self._runtime

    @property
    def built(self) -> bool:
        """Whether the runtime is built."""
        return self._runtime is not None

    @property
    def started(self) -> bool:
        """Whether the build has been started."""
        return self._task is not None

    @callback
    def start(self) -> asyncio.Task[AgentRuntime]:
        """The build, started now unless it already runs or succeeded; a failed build is
        tried again by the next caller."""
        if self._closed:
            raise HomeAssistantError(translation_domain=DOMAIN, translation_key="turn_unloading")
        task = self._task
        if task is None or (task.done() and (task.cancelled() or task.exception())):
            # A tracked task of the entry: Home Assistant's block_till_done waits for it,
            # and unloading awaits it after async_unload_entry has cancelled it.
            task = self._task = self._entry.async_create_task(
                self._hass, self._build(), f"{DOMAIN} stack {self._entry.entry_id}"
            )
        return task

    @callback
    def async_at_started(self, _hass: HomeAssistant) -> None:
        """Home Assistant has started (or was running): build now."""
        if not self._closed:
            self.start()

    async def async_runtime(self) -> AgentRuntime:
        """The runtime, built now if needed; a caller's cancellation leaves the build running.

        Raises `StackFailed` when the build failed, and a `HomeAssistantError` saying so
        once the entry unloads: their messages are sentences.
        """
        if self._runtime is not None:
            return self._runtime
        build = self.start()
        try:
            return await asyncio.shield(build)
        except Exception as err:
            # The log has the build's exception (_build); the next caller tries again.
            raise StackFailed(translation_domain=DOMAIN, translation_key="stack_failed") from err

    async def async_built(self) -> bool:
        """Whether the runtime is built, once the build (started now, or tried again, if
        needed) has ended: False when it failed (logged) or the entry unloads. For an
        action over every entry, which goes on without this one."""
        try:
            await self.async_runtime()
        except HomeAssistantError:
            return False
        return True

    async def aclose(self) -> None:
        """End the runtime's turns and close it; a build still running is cancelled."""
        self._closed = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            # The build releases what it took when cancelled (_build).
            await asyncio.gather(task, return_exceptions=True)
        if self._loading is not None and not self._load_ended.is_set():
            # A warm-up still running would start LiteLLM's logging thread after the
            # shared clients were closed: the unload (or the stop) waits for its end.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LOAD_END_WAIT):
                    await self._load_ended.wait()
        if self._runtime is not None:
            await self._runtime.aclose()

    async def async_release_storage(self) -> None:
        """The entry no longer uses the shared storage (after `aclose`); the last closes it."""
        if not self._holds_storage:
            return
        self._holds_storage = False
        from .persistence import async_release_storage  # loaded by the build

        await async_release_storage(self._hass, self._entry)

    async def _build(self) -> AgentRuntime:
        hass, entry = self._hass, self._entry
        self._loading = hass.async_add_executor_job(
            _load_then_tell, self._accesses, hass.loop, self._load_ended
        )
        try:
            # Shielded: a cancelled build leaves the executor's job to finish, and aclose
            # awaits it.
            await asyncio.shield(self._loading)
        except Exception:
            _LOGGER.exception("Loading the agent's libraries for %s failed", entry.title)
            raise
        try:
            return await self._assemble()
        except Exception:
            # Logged here, as the loading is: nobody may await the build (it starts when
            # Home Assistant has started), and a caller gets only a sentence.
            _LOGGER.exception("Building the agent for %s failed", entry.title)
            raise

    async def _assemble(self) -> AgentRuntime:
        """The runtime over the shared storage, once the libraries are loaded."""
        hass, entry = self._hass, self._entry
        # Loaded by _load in the executor: these imports only look them up.
        from .agent.guard import install_redaction
        from .agent.runtime import MEMORY_THREADS, AgentRuntime, memory_checkpointer
        from .persistence import async_acquire_storage, report_threads_failure
        from .tools.effects import EffectGate

        # Set first: acquiring registers the entry even when opening then fails.
        self._holds_storage = True
        storage = await async_acquire_storage(hass, entry)
        # Critical effects of the agents' tool calls wait for a yes (tools/effects.py).
        entry.async_on_unload(EffectGate.acquire(hass).release_use)
        # The storage's parts heal (storage/healing/): while a database is down they go on
        # in memory by themselves and write back when it works again.
        checkpointer = storage.threads
        if checkpointer is None:
            # Nothing holds the conversations (the storage is closing): memory, bounded.
            checkpointer, max_threads = memory_checkpointer(), MEMORY_THREADS
        else:
            max_threads = None
        self._runtime = AgentRuntime(
            self.access,
            checkpointer,
            store=storage.memory,
            max_threads=max_threads,
            links=storage.links,
            ratings=storage.ratings,
            storage_errors=storage.errors,
            on_storage_error=partial(report_threads_failure, hass),
        )
        # Now every module the stack loaded has its logger: keys stay out of them too.
        install_redaction()
        return self._runtime


def _import_modules(*, litellm: bool) -> None:
    """Import the stack's modules, with LiteLLM's chat if `litellm` (blocking: the executor)."""
    if litellm:
        # LiteLLM first, so its import is the one with the frozen heap
        # (agent/models/library.py).
        from .agent.models import load_model_library

        load_model_library()
    for name in STACK_MODULES + (LITELLM_MODULES if litellm else ()):
        importlib.import_module(f"{__package__}.{name}")


def modules_loaded(*, litellm: bool = True) -> bool:
    """Whether the stack's modules (with LiteLLM's chat) are loaded in this process."""
    names = STACK_MODULES + (LITELLM_MODULES if litellm else ())
    return all(f"{__package__}.{name}" in sys.modules for name in names)


async def async_load_modules(hass: HomeAssistant, *, litellm: bool = True) -> None:
    """The stack's modules, with LiteLLM's chat unless told not to, imported in the
    executor unless they already are: the config flow's checks and forms may name any
    provider, maybe before any entry's stack is built; the actions need no model."""
    if not modules_loaded(litellm=litellm):
        await hass.async_add_executor_job(partial(_import_modules, litellm=litellm))


def _load_then_tell(
    accesses: Sequence[ModelAccess], loop: asyncio.AbstractEventLoop, ended: asyncio.Event
) -> None:
    """`_load`, then `ended` set on the loop, however the load ended."""
    try:
        _load(accesses)
    finally:
        # The loop may be gone when a load outlives Home Assistant's stop.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(ended.set)


def _load(accesses: Sequence[ModelAccess]) -> None:
    """Import the stack and warm its models up (blocking: the executor). LiteLLM only if
    one of the models needs it: an Ollama setup never loads it (agent/models/chat.py)."""
    from .agent.models import needs_litellm

    _import_modules(litellm=any(needs_litellm(access.model) for access in accesses))
    from .agent.models import resolve_langchain_exports, warm_up

    # Compiling the graphs imports langchain-core's lazy exports on first use.
    resolve_langchain_exports()
    for access in accesses:
        try:
            warm_up(access)
        except Exception:
            # The turn's real call reports a bad model or a missing SDK in its own words.
            _LOGGER.exception("Warming up %s failed", access.model)


@callback
def async_start_stack(hass: HomeAssistant, entry: ConfigEntry[EntryStack]) -> None:
    """Build the entry's stack when Home Assistant has started (now, if it runs)."""
    entry.async_on_unload(async_at_started(hass, entry.runtime_data.async_at_started))


def library_loaded() -> bool:
    """Whether this process has loaded the agent's model modules (a stack, or the config
    flow's key check): only then are there shared clients to close."""
    return f"{__package__}.agent.models.lifecycle" in sys.modules
