"""LiteLLM's first-call warm-up, off the setup's critical path.

LiteLLM imports a provider's modules (and may build a tokenizer) on its first call. Done in
the entry's setup, that work delayed every entry, and Home Assistant's start with it. Now
the setup only registers one warm-up per entry; it runs in the executor as a background
task once Home Assistant has started (at once when it is already running: a reload, an
entry added later). A turn that arrives earlier starts that same warm-up and waits for it,
so the imports never run on the event loop and never run twice. Unloading the entry
cancels the waiting (Home Assistant cancels an entry's background tasks).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
import logging

from homeassistant.core import HomeAssistant, callback
from homeassistant.helpers.start import async_at_started
from homeassistant.util.hass_dict import HassKey

from .agent.guard import install_redaction
from .agent.models import ModelAccess, warm_up
from .const import DOMAIN
from .runtime_entry import LangGraphConfigEntry

_LOGGER = logging.getLogger(__name__)

DATA_WARM_UPS: HassKey[dict[str, StackWarmUp]] = HassKey(f"{DOMAIN}_warm_ups")


class StackWarmUp:
    """One entry's warm-up: started once, awaited by every early turn."""

    def __init__(
        self, hass: HomeAssistant, entry: LangGraphConfigEntry, accesses: Sequence[ModelAccess]
    ) -> None:
        """`accesses`: every distinct model the entry's agents call."""
        self._hass = hass
        self._entry = entry
        self._accesses = tuple(accesses)
        self._task: asyncio.Task[None] | None = None

    @property
    def done(self) -> bool:
        """Whether the warm-up has finished (or failed, or was cancelled)."""
        return self._task is not None and self._task.done()

    @property
    def started(self) -> bool:
        """Whether the warm-up has been started."""
        return self._task is not None

    @callback
    def start(self) -> asyncio.Task[None]:
        """The one warm-up task, started now unless it already was."""
        if self._task is None:
            self._task = self._entry.async_create_background_task(
                self._hass, self._run(), f"{DOMAIN} warm-up {self._entry.entry_id}"
            )
        return self._task

    @callback
    def async_at_started(self, _hass: HomeAssistant) -> None:
        """Home Assistant has started (or was running): warm up now."""
        self.start()

    async def wait(self) -> None:
        """Return when the warm-up is done; a turn's cancellation leaves it running."""
        await asyncio.shield(self.start())

    async def _run(self) -> None:
        try:
            await self._hass.async_add_executor_job(_warm_up_all, self._accesses)
        except Exception:
            # The turn's real call reports a bad model or a missing SDK in its own words.
            _LOGGER.exception("Warming up LiteLLM for %s failed", self._entry.title)
        # Now every module the warm-up loaded has its logger: keys stay out of them too.
        install_redaction()


def _warm_up_all(accesses: Sequence[ModelAccess]) -> None:
    for access in accesses:
        warm_up(access)


@callback
def async_start_warm_up(
    hass: HomeAssistant, entry: LangGraphConfigEntry, accesses: Sequence[ModelAccess]
) -> None:
    """Register the entry's warm-up; it starts when Home Assistant has started."""
    warm_ups = hass.data.setdefault(DATA_WARM_UPS, {})
    warm_ups[entry.entry_id] = stack = StackWarmUp(hass, entry, accesses)
    entry.async_on_unload(lambda: _forget(hass, entry.entry_id, stack))
    entry.async_on_unload(async_at_started(hass, stack.async_at_started))


def _forget(hass: HomeAssistant, entry_id: str, stack: StackWarmUp) -> None:
    warm_ups = hass.data.get(DATA_WARM_UPS, {})
    if warm_ups.get(entry_id) is stack:
        del warm_ups[entry_id]


async def async_wait_warm_up(hass: HomeAssistant, entry: LangGraphConfigEntry) -> None:
    """Before an entry's first model call: its warm-up has run (started now if needed)."""
    stack = hass.data.get(DATA_WARM_UPS, {}).get(entry.entry_id)
    if stack is not None and not stack.done:
        await stack.wait()


def warm_up_of(hass: HomeAssistant, entry: LangGraphConfigEntry) -> StackWarmUp | None:
    """The entry's warm-up, while the entry is loaded (diagnostics and tests read it)."""
    return hass.data.get(DATA_WARM_UPS, {}).get(entry.entry_id)
