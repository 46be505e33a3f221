"""Who is using LiteLLM's shared clients right now, so closing them waits for them.

LiteLLM keeps its HTTP clients in one process-wide cache that every entry and every
config flow shares. The last entry to unload closes them (nothing may linger after an
unload). An entry's own turns end before that, but a flow's check is nobody's: a user
reconfiguring, or adding a second entry, while the only entry reloads had its check cut
off with "Connection error". Calls made outside an entry's turns therefore register
here; closing waits until they are done (up to a bound) and new calls wait until the
closing is over, so they open fresh clients instead of receiving a closed one.

Per event loop: a test suite runs many loops in one process, and a call abandoned with
its loop must not hold up the next loop's closing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
import contextlib
from dataclasses import dataclass, field
import weakref

# Longer than a config flow check may take (its timeout is 30 s), so a check always
# finishes first; a call stuck beyond that no longer holds up an unload.
CLOSING_WAIT = 35.0


@dataclass
class _LoopUsers:
    count: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)  # set while count == 0
    open: asyncio.Event = field(default_factory=asyncio.Event)  # cleared while closing
    closing: asyncio.Lock = field(default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        self.idle.set()
        self.open.set()


class ClientUsers:
    """Counts calls on the shared clients; `closing()` waits for them to end."""

    def __init__(self) -> None:
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopUsers] = (
            weakref.WeakKeyDictionary()
        )

    def _users(self) -> _LoopUsers:
        loop = asyncio.get_running_loop()
        if (users := self._by_loop.get(loop)) is None:
            users = self._by_loop[loop] = _LoopUsers()
        return users

    @property
    def active(self) -> int:
        """Calls in progress on the running loop."""
        return self._users().count

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[None]:
        """One call on the shared clients; waits while they are being closed."""
        users = self._users()
        await users.open.wait()
        users.count += 1
        users.idle.clear()
        try:
            yield
        finally:
            users.count -= 1
            if not users.count:
                users.idle.set()

    @contextlib.asynccontextmanager
    async def closing(self, wait: float = CLOSING_WAIT) -> AsyncIterator[None]:
        """Hold new calls back, wait for running ones (at most `wait` s), then close."""
        users = self._users()
        async with users.closing:
            users.open.clear()
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await users.idle.wait()
                yield
            finally:
                users.open.set()


SHARED_CLIENT_USERS = ClientUsers()
