"""Every health a test makes is closed after it, also when the test fails (a retry task
left running would fail the next check of lingering tasks)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from custom_components.langgraph_conversation.storage.healing import StorageHealth

from . import new_health


@pytest.fixture
async def make_health() -> AsyncIterator[Callable[..., StorageHealth]]:
    """new_health (see __init__.py), each closed at the end of the test."""
    made: list[StorageHealth] = []

    def make(*args: Any, **kwargs: Any) -> StorageHealth:
        made.append(new_health(*args, **kwargs))
        return made[-1]

    yield make
    for health in made:
        await health.aclose()
