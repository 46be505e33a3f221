"""Serving an aiohttp application from a private thread with its own event loop.

A fake model server runs apart from the code under test, like a real server in
another process. That matters: LiteLLM's ollama_chat provider makes a synchronous
HTTP request (model info, POST /api/show) from inside the caller's event loop
after each completion; a server on that same loop could never answer it, and the
test would hang.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
import socket
import threading

from aiohttp import web

# How long the synchronous start may wait for the port (binding is instant).
_START_TIMEOUT = 10.0


class BackgroundServer:
    """An aiohttp app listening on a free port of `host`, run by its own thread.

    start()/stop() are for async tests; start_sync()/stop_sync() for plain scripts.
    stop() drops every connection, even mid-response, and joins the thread, so
    nothing is left running (Home Assistant's test harness checks).
    """

    def __init__(self, app: web.Application, host: str, name: str) -> None:
        self._app = app
        self._host = host
        self._name = name
        self._thread: threading.Thread | None = None
        self._finished: Future[None] | None = None
        # Set by the server thread before it reports its port.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested: asyncio.Event | None = None
        # Open connections and what accepts them; only touched on the server's own loop.
        # No acceptor while refusing connections.
        self._connections: set[asyncio.BaseTransport] = set()
        self._acceptor: _Acceptor | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    async def start(self) -> int:
        """Start serving; returns the port."""
        return await asyncio.wrap_future(self._launch())

    def start_sync(self) -> int:
        """start() for code without an event loop."""
        return self._launch().result(timeout=_START_TIMEOUT)

    async def stop(self) -> None:
        """Stop serving and wait for the thread to end; safe to call twice."""
        if (finished := self._request_stop()) is not None:
            await asyncio.wrap_future(finished)
            self._join()

    def stop_sync(self) -> None:
        """stop() for code without an event loop."""
        if self._request_stop() is not None:
            self._join()

    async def drop_connections(self) -> None:
        """Abort every open connection (idle keep-alive ones too); keep listening.

        A client then has to connect afresh for its next request, so a changed name
        resolution or a closed port takes effect at once.
        """
        if self._loop is None:
            return
        done: Future[None] = Future()

        def abort_all() -> None:
            for transport in self._connections:
                transport.abort()
            self._connections.clear()
            done.set_result(None)

        self._loop.call_soon_threadsafe(abort_all)
        await asyncio.wrap_future(done)

    async def refuse_connections(self, refuse: bool) -> None:
        """Stop listening, so connecting is refused, or listen on the same port again.

        Refusing also drops the open connections. In between, the port is free: another
        program could take it, which is unlikely for the short time a test refuses.
        """
        if self._loop is None:
            return
        await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(self._set_listening(not refuse), self._loop)
        )

    async def _set_listening(self, listening: bool) -> None:
        if listening and self._acceptor is None:
            assert self._runner is not None
            assert self._port is not None
            listener = socket.create_server((self._host, self._port))
            self._acceptor = _Acceptor(listener, self._runner, self._connections)
        elif not listening:
            await self._stop_listening()
            for transport in self._connections:
                transport.abort()
            self._connections.clear()

    async def _stop_listening(self) -> None:
        acceptor, self._acceptor = self._acceptor, None
        if acceptor is not None:
            await acceptor.close()

    def _launch(self) -> Future[int]:
        if self._thread is not None:
            raise RuntimeError(f"{self._name} already started")
        started: Future[int] = Future()
        self._finished = Future()
        self._thread = threading.Thread(
            target=self._run, args=(started, self._finished), name=self._name, daemon=True
        )
        self._thread.start()
        return started

    def _request_stop(self) -> Future[None] | None:
        """Ask the server loop to shut down; None if it is not running."""
        if self._thread is None or self._loop is None or self._stop_requested is None:
            return None
        self._loop.call_soon_threadsafe(self._stop_requested.set)
        return self._finished

    def _join(self) -> None:
        assert self._thread is not None
        self._thread.join()
        self._thread = self._loop = self._stop_requested = self._finished = None

    def _run(self, started: Future[int], finished: Future[None]) -> None:
        try:
            # asyncio.run also cancels and awaits any task still left at the end.
            asyncio.run(self._serve(started))
        finally:
            finished.set_result(None)

    async def _serve(self, started: Future[int]) -> None:
        # handler_cancellation: a client that hangs up (its timeout, say) cancels the
        # handler at once instead of leaving it sleeping through a scripted delay.
        runner = web.AppRunner(self._app, access_log=None, handler_cancellation=True)
        listener = socket.create_server((self._host, 0))
        try:
            await runner.setup()
        except BaseException as err:
            listener.close()
            started.set_exception(err)
            raise
        connections = self._connections
        self._runner = runner
        self._port = listener.getsockname()[1]
        self._acceptor = _Acceptor(listener, runner, connections)
        self._loop = asyncio.get_running_loop()
        self._stop_requested = asyncio.Event()
        started.set_result(self._port)
        try:
            await self._stop_requested.wait()
        finally:
            # Stop accepting, then drop every connection, even mid-response: neither a
            # scripted delay nor a client still waiting for an answer may hold the
            # shutdown, and no accepted socket may outlive it (its client would wait
            # forever). aiohttp cancels the handlers of dropped connections.
            await self._stop_listening()
            for transport in connections:
                transport.abort()
            await runner.cleanup()
            self._runner = None


class _Acceptor:
    """Accepts connections for aiohttp, keeping each transport so stop() can drop it.

    Not loop.create_server(): an asyncio Server closed at the instant it accepts a
    connection fails to attach it and leaves that socket open, unanswered (seen
    with LiteLLM's synchronous model-info request racing a test's teardown). Nor a task
    awaiting loop.sock_accept(): cancelled just after the kernel handed it a connection,
    it drops that socket into the cancelled await, where it stays open until the cyclic
    collector runs; a client blocked on it (that same synchronous request, on the test's
    loop) waits forever and the collector never runs. Here the listener is read in a
    plain callback: every accepted socket is at once either being attached (close()
    cancels that, and the socket is closed) or in `connections`.
    """

    def __init__(
        self,
        listener: socket.socket,
        runner: web.AppRunner,
        connections: set[asyncio.BaseTransport],
    ) -> None:
        self._listener = listener
        self._runner = runner
        self._connections = connections
        # Sockets accepted and not yet attached, by the task attaching each.
        self._attaching: dict[asyncio.Task[None], socket.socket] = {}
        self._loop = asyncio.get_running_loop()
        listener.setblocking(False)
        self._loop.add_reader(listener.fileno(), self._accept_waiting)

    def _accept_waiting(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            conn.setblocking(False)
            task = self._loop.create_task(self._attach(conn))
            self._attaching[task] = conn
            task.add_done_callback(self._attached)

    def _attached(self, task: asyncio.Task[None]) -> None:
        conn = self._attaching.pop(task)
        if task.cancelled() or task.exception() is not None:
            conn.close()

    async def _attach(self, conn: socket.socket) -> None:
        server = self._runner.server
        assert server is not None
        transport, _ = await self._loop.connect_accepted_socket(server, conn)
        self._connections.difference_update([t for t in self._connections if t.is_closing()])
        self._connections.add(transport)

    async def close(self) -> None:
        """Stop accepting; a connection accepted but not yet attached is closed."""
        self._loop.remove_reader(self._listener.fileno())
        self._listener.close()
        # A task cancelled before its first step never runs its body: its done callback
        # (_attached) closes the socket either way.
        attaching = list(self._attaching)
        for task in attaching:
            task.cancel()
        await asyncio.gather(*attaching, return_exceptions=True)
