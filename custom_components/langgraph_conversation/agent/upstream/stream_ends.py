"""Ending a chain of async generators whose HTTP response was closed under it.

httpx reads a response through nested async generators (lines over text over bytes over
raw bytes, over httpcore's), and each `async for` over the next one leaves it suspended
when the outer one is closed early: Python then hands every inner link to the event loop,
which closes them in tasks of their own after the answer has returned. Reading the outer
generator once more after its connection was closed makes the innermost read fail, and
the error ends every link on its way out: nothing is left for the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
import logging
from typing import Any

_LOGGER = logging.getLogger(__name__)

# Seconds the rest of a closed (or finished) response may take to end the chain. Normally
# immediate; past this the read is cancelled, which ends the links just as well.
CLOSE_GRACE = 5.0


async def read_to_end(chain: AsyncIterator[Any]) -> None:
    """Read `chain` until it ends, or fails because its connection was closed."""
    try:
        async with asyncio.timeout(CLOSE_GRACE):
            async for _item in chain:
                pass
    except Exception as err:  # noqa: BLE001  a closed connection ends the chain like this
        _LOGGER.debug("The rest of a closed model stream ended with: %r", err)


async def close_early(response: Any, chain: AsyncIterator[Any]) -> None:
    """Close an httpx `response` read through the generator `chain`, and end the chain.

    For a chain read to its end both steps find nothing left to do.
    """
    await response.aclose()
    await read_to_end(chain)
