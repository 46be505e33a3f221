"""A small MCP server on 127.0.0.1, for Home Assistant's MCP client integration.

It is the `mcp` package's own server (FastMCP in mcp 1, MCPServer in mcp 2; streamable
HTTP, the transport Home Assistant's client tries first), served by uvicorn from a private
thread with its own event loop, like a real server in another process. Each tool call it
receives is recorded (`calls`), so a test asserts on what the server actually got.

Import this module only where the `mcp` package is installed (the test legs pin the
version their Home Assistant's mcp integration requires).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import uvicorn

try:  # mcp 2 (Home Assistant 2026.11)
    from mcp.server.mcpserver import MCPServer
except ImportError:  # mcp 1 (2026.2, 2026.10)
    MCPServer = None

HOST = "127.0.0.1"
# How long start() waits for the server to listen, and stop() for its thread to end.
_WAIT_SECONDS = 30.0
# The garden beds the soil tool knows, and what it says of each.
SOIL_MOISTURE = {"roses": 31, "herbs": 48}


class GardenMcpServer:
    """An MCP server with one read tool, `soil_moisture(bed)`, and one that answers
    "unknown bed" for anything else. Use `async with GardenMcpServer() as server:`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        if MCPServer is not None:
            self._mcp: Any = MCPServer("Garden")
            self._app_options = {"stateless_http": True, "json_response": True, "host": HOST}
        else:
            from mcp.server.fastmcp import FastMCP

            self._mcp = FastMCP("Garden", host=HOST, stateless_http=True, json_response=True)
            self._app_options = {}
        self._mcp.tool(
            name="soil_moisture", description="The soil moisture of a garden bed, in percent."
        )(self._soil_moisture)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    def _soil_moisture(self, bed: str) -> str:
        self.calls.append(("soil_moisture", {"bed": bed}))
        if (value := SOIL_MOISTURE.get(bed.strip().lower())) is None:
            return f"unknown bed {bed!r}"
        return f"{bed}: {value} % soil moisture"

    @property
    def url(self) -> str:
        """Where Home Assistant's MCP client reaches the server."""
        assert self._port is not None, "not started"
        return f"http://{HOST}:{self._port}/mcp"

    async def __aenter__(self) -> GardenMcpServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Listen on a free port and serve from the private thread."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((HOST, 0))
        listener.listen(64)
        self._port = listener.getsockname()[1]
        config = uvicorn.Config(
            self._mcp.streamable_http_app(**self._app_options),
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        server = self._server

        def serve() -> None:
            asyncio.run(server.serve(sockets=[listener]))
            listener.close()

        self._thread = threading.Thread(target=serve, name="mcp-garden", daemon=True)
        self._thread.start()
        # Connections wait in the listen queue until uvicorn accepts them; waiting for
        # the start keeps a failure to start apart from a failing test.
        for _ in range(int(_WAIT_SECONDS / 0.05)):
            if server.started or not self._thread.is_alive():
                break
            await asyncio.sleep(0.05)
        if not server.started:
            raise RuntimeError("the MCP server did not start")

    async def stop(self) -> None:
        """Stop serving and wait for the thread; safe to call twice."""
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        thread, self._thread = self._thread, None
        # Polled, not joined: the test's event loop stays free meanwhile.
        for _ in range(int(_WAIT_SECONDS / 0.05)):
            if not thread.is_alive():
                break
            await asyncio.sleep(0.05)
        thread.join(timeout=1)
