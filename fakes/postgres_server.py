"""A real PostgreSQL server for development: Debian's build, throwaway, on 127.0.0.1.

scripts/test installs Debian's `postgresql` (and its pgvector build) into each leg's root
filesystem (scripts/lib/legs.sh); `start_server` starts a server from it with its data
directory in a temporary folder, listening on a Unix socket in that folder and on
127.0.0.1 (the connection tests need TCP: TLS and passwords), with fixed roles and
passwords and fsync off: a stand-in for a household's database server, never for data
that matters. The tests (tests/postgres.py's fixtures, one server per session) and bench
figure 5 (scripts/bench_lib/storage.py) start it; `RunningServer.stop` ends it.

pg_ctl starts the server detached from the process that asked for it, so a pytest or a
bench that is killed (SIGKILL, an out-of-memory kill) would leave it running. A watchdog
process started with it waits for that parent's end and then stops the server and removes
its folder; `stop` stops the watchdog first (tests/test_postgres_watchdog.py kills a
pytest-like parent).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
import os
from pathlib import Path
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from urllib.parse import quote

SUPERUSER_PASSWORD = "pg-super-0123456789"
# The role the integration connects as: owns its databases, nothing else.
APP_ROLE = "lgc"
APP_PASSWORD = "lgc-secret-0123456789"
# A role that may connect to its database but create nothing in it.
GUEST_ROLE = "guest"
GUEST_PASSWORD = "guest-secret-0123456789"
LOCKED_DATABASE = "locked"
_PORT_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class PostgresServer:
    """A running server: where it listens and what it offers."""

    port: int
    socket_dir: Path
    bin_dir: Path
    # Whether the pgvector extension is installed (created in each test database).
    has_vector: bool

    def url(
        self,
        database: str,
        *,
        user: str = APP_ROLE,
        password: str = APP_PASSWORD,
        port: int | None = None,
        query: str = "",
    ) -> str:
        """A connection URL over 127.0.0.1 (TCP, password authentication)."""
        credentials = f"{quote(user, safe='')}:{quote(password, safe='')}"
        address = f"127.0.0.1:{port or self.port}"
        return f"postgresql://{credentials}@{address}/{database}{'?' + query if query else ''}"

    def sql(self, statement: str, *, database: str = "postgres") -> str:
        """Runs one statement as the superuser over the Unix socket; returns psql's output."""
        return _run(
            [
                str(self.bin_dir / "psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                str(self.socket_dir),
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                database,
                "-c",
                statement,
            ]
        ).strip()


def _server_user() -> str | None:
    """PostgreSQL refuses to run as root: as root, the server runs as Debian's `postgres`."""
    return "postgres" if os.geteuid() == 0 else None


def _run(command: list[str]) -> str:
    result = subprocess.run(
        command, user=_server_user(), capture_output=True, text=True, check=False, timeout=120
    )
    if result.returncode != 0:
        raise RuntimeError(f"{Path(command[0]).name} failed: {result.stderr.strip()}")
    return result.stdout


def installed_bin_dir() -> Path | None:
    """The newest installed server's programs (Debian keeps them per major version)."""
    candidates = sorted(
        (path.parent for path in Path("/usr/lib/postgresql").glob("*/bin/initdb")),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
    )
    return candidates[-1] if candidates else None


def _ports() -> Iterator[int]:
    """Ports to try, one after another: the server's start fails on one that is taken.

    (Probing with a socket is not possible here: Home Assistant's test plugin forbids
    sockets outside tests that ask for them.)
    """
    generator = random.Random()
    for _ in range(_PORT_ATTEMPTS):
        yield generator.randrange(20000, 60000)


def _log_tail(root: Path) -> str:
    try:
        return (root / "server.log").read_text(errors="replace")[-2000:]
    except OSError:
        return ""


class ServerUnavailable(Exception):
    """No PostgreSQL could be started here (the reason is the message)."""


# The watchdog: a separate interpreter that notices its parent's end (it is re-parented,
# so getppid() changes) and then stops the server and removes its folder. Plain Python,
# no import of this package: it runs when everything else is gone.
_WATCHDOG = """
import os, shutil, subprocess, sys, time
parent, pg_ctl, data, root, user = sys.argv[1:6]
while os.getppid() == int(parent):
    time.sleep(0.2)
subprocess.run([pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], user=user or None,
               capture_output=True, check=False, timeout=60)
shutil.rmtree(root, ignore_errors=True)
"""


@dataclass(slots=True)
class RunningServer:
    """A started server, its folder and its watchdog; `stop` ends all three."""

    server: PostgresServer
    root: Path
    watchdog: subprocess.Popen[bytes]

    @property
    def data(self) -> Path:
        return self.root / "data"

    def pause(self) -> None:
        """Stop the server as an administrator or a crash would (open connections are
        cut at once); its data stays for `resume`."""
        _run(self._stop_command())

    def _stop_command(self) -> list[str]:
        """pg_ctl's immediate stop of this server (connections cut, nothing flushed)."""
        return [
            str(self.server.bin_dir / "pg_ctl"),
            "-D",
            str(self.data),
            "-m",
            "immediate",
            "-w",
            "stop",
        ]

    def resume(self) -> None:
        """Start the paused server again on its port, with its data."""
        _start_at(self.server.bin_dir, self.root, self.server.port)

    def stop(self) -> None:
        # The watchdog goes first (by its own pid): it must not act on a later server.
        self.watchdog.send_signal(signal.SIGKILL)
        self.watchdog.wait(timeout=60)
        subprocess.run(
            self._stop_command(),
            user=_server_user(),
            capture_output=True,
            check=False,
            timeout=60,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def _init_data_folder(bin_dir: Path, root: Path, user: str | None) -> None:
    """initdb into root/data: UTF-8, no locale, trust on the socket, passwords over TCP."""
    password_file = root / "superuser-password"
    password_file.write_text(SUPERUSER_PASSWORD + "\n")
    if user:
        shutil.chown(password_file, user)
    _run(
        [
            str(bin_dir / "initdb"),
            "-D",
            str(root / "data"),
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-locale",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            f"--pwfile={password_file}",
        ]
    )


def _start_on_a_free_port(bin_dir: Path, root: Path) -> int:
    """Starts the server on the first of _ports() that is free; returns that port."""
    for port in _ports():
        try:
            _start_at(bin_dir, root, port)
        except RuntimeError:
            if "already in use" in _log_tail(root):
                continue
            raise
        return port
    raise ServerUnavailable(f"no free port after {_PORT_ATTEMPTS} tries")


def _start_at(bin_dir: Path, root: Path, port: int) -> None:
    """Starts the server of root/data on `port` and waits until it accepts connections."""
    # Durability is not under test: no fsync keeps the shared disk calm.
    options = f"-k {root} -h 127.0.0.1 -p {port} -c fsync=off -c ssl=off"
    _run(
        [
            str(bin_dir / "pg_ctl"),
            "-D",
            str(root / "data"),
            "-l",
            str(root / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        ]
    )


def _start_watchdog(bin_dir: Path, root: Path, user: str | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _WATCHDOG,
            str(os.getpid()),
            str(bin_dir / "pg_ctl"),
            str(root / "data"),
            str(root),
            user or "",
        ],
        # No pipe of the parent's stays open through it (a runner reading pytest's output
        # would wait for the watchdog too).
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Its own session: a Ctrl-C meant for the parent must not end it before the parent.
        start_new_session=True,
    )


def _create_roles(server: PostgresServer) -> bool:
    """The integration's role, the guest and its locked database; whether pgvector is
    installed."""
    server.sql(f"CREATE ROLE {APP_ROLE} LOGIN PASSWORD '{APP_PASSWORD}'")
    server.sql(f"CREATE ROLE {GUEST_ROLE} LOGIN PASSWORD '{GUEST_PASSWORD}'")
    # The guest may connect to this database but not create tables in it (since
    # PostgreSQL 15 only the owner creates in the public schema).
    server.sql(f"CREATE DATABASE {LOCKED_DATABASE}")
    available = server.sql("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
    return available == "1"


def start_server() -> RunningServer:
    """Initialise a data folder, start a server on a free port with its watchdog and the
    roles; raises ServerUnavailable with the reason when that is not possible."""
    bin_dir = installed_bin_dir()
    if bin_dir is None:
        raise ServerUnavailable(
            "Debian's postgresql package is not installed (/usr/lib/postgresql/*/bin)"
        )
    root = Path(tempfile.mkdtemp(prefix="lgc-postgres-"))
    if user := _server_user():
        shutil.chown(root, user)
    try:
        _init_data_folder(bin_dir, root, user)
        port = _start_on_a_free_port(bin_dir, root)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as err:
        log_tail = _log_tail(root)  # read before the folder goes
        shutil.rmtree(root, ignore_errors=True)
        raise ServerUnavailable(f"{err}; server log: {log_tail}") from err
    except ServerUnavailable:
        shutil.rmtree(root, ignore_errors=True)
        raise
    watchdog = _start_watchdog(bin_dir, root, user)
    running = RunningServer(PostgresServer(port, root, bin_dir, has_vector=False), root, watchdog)
    try:
        has_vector = _create_roles(running.server)
    except BaseException:
        running.stop()
        raise
    running.server = PostgresServer(port, root, bin_dir, has_vector=has_vector)
    return running
