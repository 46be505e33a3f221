"""What someone with write access to a knowledge folder could put there: links leading out,
FIFOs, sockets, devices. Each maker builds its case (blocking: call it in an executor from
a test with a running Home Assistant) and returns the name the index should report."""

from __future__ import annotations

from collections.abc import Callable
import os
from pathlib import Path
import socket

import pytest

# A link maker gets the knowledge folder and a secret file outside it.
LinkMaker = Callable[[Path, Path], str]


def _absolute_link(folder: Path, secret: Path) -> str:
    (folder / "secrets.md").symlink_to(secret)
    return "secrets.md"


def _relative_link(folder: Path, secret: Path) -> str:
    (folder / "secrets.md").symlink_to(os.path.relpath(secret, folder))
    return "secrets.md"


def _through_linked_folder(folder: Path, secret: Path) -> str:
    # The link's own target is written as a path inside the folder ("conf/…"), but conf
    # is a link to the folder holding the secret.
    (folder / "conf").symlink_to(secret.parent, target_is_directory=True)
    (folder / "secrets.md").symlink_to(Path("conf", secret.name))
    return "secrets.md"


def _chain(folder: Path, secret: Path) -> str:
    (folder / "second.md").symlink_to(secret)
    (folder / "first.md").symlink_to("second.md")
    return "first.md"


def _linked_folder(folder: Path, secret: Path) -> str:
    # A folder outside with a Markdown file of its own, linked in as a subfolder.
    outside = secret.parent / "private"
    outside.mkdir(exist_ok=True)
    (outside / "keys.md").write_text(secret.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "private").symlink_to(outside, target_is_directory=True)
    return "private/"


def _linked_subfolder_inside(folder: Path, secret: Path) -> str:
    # A link that stays inside is skipped too (see knowledge_files.py for why).
    (folder / "notes").mkdir(exist_ok=True)
    (folder / "notes" / "more.md").write_text("More notes.", encoding="utf-8")
    (folder / "again").symlink_to("notes", target_is_directory=True)
    return "again/"


LINK_SHAPES: dict[str, LinkMaker] = {
    "absolute link to a file outside": _absolute_link,
    "relative link to a file outside": _relative_link,
    "link through a linked folder": _through_linked_folder,
    "chain of links leading outside": _chain,
    "linked folder outside": _linked_folder,
    "linked folder inside": _linked_subfolder_inside,
}


def make_fifo(path: Path) -> None:
    """A FIFO: opening it for reading waits for a writer that never comes."""
    os.mkfifo(path)


def make_socket(path: Path) -> None:
    """A Unix socket's file (it stays when the socket is closed)."""
    # Bound through the folder's descriptor: a test's path is longer than the 107 bytes a
    # socket address may have.
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(f"/proc/self/fd/{folder}/{path.name}")
    finally:
        os.close(folder)


def make_device(path: Path) -> None:
    """A character device (the null device's numbers); needs the right to make nodes."""
    try:
        os.mknod(path, 0o600 | 0o020000, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making device nodes needs root (CAP_MKNOD)")


# Kinds of file that are not regular files, and the word the refusal names them with.
SPECIAL_FILES: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (make_fifo, "FIFO"),
    "socket": (make_socket, "socket"),
    "device": (make_device, "device"),
}


def pdf_workers() -> list[int]:
    """The PDF worker processes this test process has running now."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text(encoding="ascii", errors="replace")
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = next(
            (line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), ""
        )
        if parent == str(os.getpid()) and b"pdf_worker.py" in command:
            found.append(int(entry.name))
    return found
