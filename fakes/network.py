"""Name resolution faults: a made-up host name whose resolution a test controls.

A model reached as `http://<FakeResolver.HOST>:<port>/v1` normally resolves to the fake
server on 127.0.0.1. A test switches the name to fail the way DNS fails (no such name)
at any moment, also in the middle of a turn. Only this one name is affected; every
other lookup goes to the real resolver. Name resolution is the operating system's, so
this stands in for the network, not for any code of ours. (For a refused connection,
see FakeModelServer.refuse_connections.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
import contextlib
from enum import Enum
import socket
from typing import Any, Final


class NetworkMode(Enum):
    """What a lookup of the fake host name gives."""

    UP = "up"  # the fake server's address
    NO_SUCH_NAME = "no_such_name"  # DNS answers that the name does not exist


class FakeResolver:
    """Resolves HOST to 127.0.0.1, or fails, as `mode` says (thread-safe reads)."""

    HOST: Final = "model.lgc-test"

    def __init__(self) -> None:
        self.mode = NetworkMode.UP
        self.lookups = 0

    def url(self, port: int, path: str = "/v1") -> str:
        """The base URL of a server on `port`, through the fake name."""
        return f"http://{self.HOST}:{port}{path}"

    def _getaddrinfo(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            name = host.decode() if isinstance(host, bytes) else host
            if name != self.HOST:
                return real(host, port, *args, **kwargs)
            self.lookups += 1
            if self.mode is NetworkMode.NO_SUCH_NAME:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return real("127.0.0.1", port, *args, **kwargs)

        return getaddrinfo

    @contextlib.contextmanager
    def installed(self) -> Iterator[FakeResolver]:
        """Answer lookups of HOST while inside the block."""
        real = socket.getaddrinfo
        socket.getaddrinfo = self._getaddrinfo(real)
        try:
            yield self
        finally:
            socket.getaddrinfo = real
