"""agent/upstream/heap.py: LiteLLM's heap is frozen once, never again at a reload.

Every options change reloads an entry. A freeze at each setup also froze what the
unloaded runtime had left for the garbage collector, for good (scripts/bench figure 12).
"""

from __future__ import annotations

import gc
import weakref

from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.agent.upstream import heap
from homeassistant.core import HomeAssistant


def test_litellm_was_imported_into_a_frozen_heap() -> None:
    assert gc.get_freeze_count() > 0
    assert gc.isenabled()


def test_the_warm_up_freezes_once_per_process() -> None:
    heap.freeze_after_first_warm_up()  # the first, if no setup ran yet in this process
    frozen = gc.get_freeze_count()
    assert heap.freeze_after_first_warm_up() is False
    # Frozen objects freed by reference counting may lower the count; nothing raises it.
    assert gc.get_freeze_count() <= frozen


async def test_reloads_freeze_nothing_and_free_the_old_runtimes(
    hass: HomeAssistant, setup_integration: MockConfigEntry
) -> None:
    entry = setup_integration
    frozen = gc.get_freeze_count()
    unloaded = []
    for reload in range(3):
        unloaded.append(weakref.ref(entry.runtime_data.runtime))
        # What an options change does: the entry's update listener reloads it.
        hass.config_entries.async_update_entry(entry, options={"reload": reload})
        await hass.async_block_till_done()
    # Frozen objects freed by reference counting may lower the count; a freeze would have
    # added thousands (what the unloaded runtime left for the collector, and more).
    assert gc.get_freeze_count() <= frozen
    gc.collect()
    assert [ref() for ref in unloaded] == [None, None, None]
