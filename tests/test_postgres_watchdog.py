"""A killed test run leaves no PostgreSQL behind (fakes/postgres_server.py's watchdog).

A child interpreter starts a server exactly as the session fixture does and is then
killed with SIGKILL, as an out-of-memory kill or a hard stop would end pytest; the
server it started must end and its folder must go.
"""

from __future__ import annotations

import os
from pathlib import Path
import signal
import subprocess
import sys
import time

from fakes.postgres_server import installed_bin_dir

ROOT = Path(__file__).resolve().parent.parent
# Started as pytest's session fixture starts it; prints the data folder, then waits.
_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from fakes.postgres_server import start_server
running = start_server()
print(running.data, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (ended, not yet reaped by its new parent) is gone for our purpose.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_until(condition, limit: float) -> bool:
    """Polls `condition` until it holds or `limit` seconds passed (a bound, not a measure)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def test_killed_parent_takes_its_server_along() -> None:
    if installed_bin_dir() is None:
        if os.environ.get("LGC_POSTGRES_REQUIRED") == "1":
            raise AssertionError("PostgreSQL must be installed here")
        import pytest

        pytest.skip("Debian's postgresql package is not installed")
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(ROOT)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        data = Path(child.stdout.readline().strip())
        assert data.name == "data", "the child could not start a server"
        postmaster = int((data / "postmaster.pid").read_text().split()[0])
        assert _alive(postmaster)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert _wait_until(lambda: not _alive(postmaster), 60), "the server outlived its parent"
    assert _wait_until(lambda: not data.parent.exists(), 60), "its folder was left behind"
