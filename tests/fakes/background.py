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
import threading

from aiohttp import web

# How long the synchronous start may wait for the port (binding is instant).
_START_TIMEOUT = 10.0


class BackgroundServer:
    """An aiohttp app listening on a free port of `host`, run by its own thread.

    start()/stop() are for async tests; start_sync()/stop_sync() for plain scripts.
    stop() ends requests still being answered, closes every connection and joins
    the thread, so nothing is left running (Home Assistant's test harness checks).
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
            # asyncio.run also cancels and awaits whatever task is left at the end.
            asyncio.run(self._serve(started))
        finally:
            finished.set_result(None)

    async def _serve(self, started: Future[int]) -> None:
        # handler_cancellation: a client that hangs up (its timeout, say) cancels the
        # handler at once instead of leaving it sleeping through a scripted delay.
        runner = web.AppRunner(self._app, access_log=None, handler_cancellation=True)
        try:
            await runner.setup()
            site = web.TCPSite(runner, self._host, 0)
            await site.start()
        except BaseException as err:
            started.set_exception(err)
            await runner.cleanup()
            raise
        self._loop = asyncio.get_running_loop()
        self._stop_requested = asyncio.Event()
        started.set_result(runner.addresses[0][1])
        try:
            await self._stop_requested.wait()
        finally:
            # Responses still in progress (a scripted delay, a slow stream) would hold
            # the graceful shutdown; the test is done with them, so end them now.
            current = asyncio.current_task()
            others = [task for task in asyncio.all_tasks() if task is not current]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            await runner.cleanup()
