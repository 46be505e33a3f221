"""Which files of a knowledge folder are read, and reading them without leaving the folder.

The folder is a place other people and programs put files into (a network share, an editor
add-on), so what lies there is not trusted: a symbolic link must not carry another file of
the configuration (secrets.yaml) to the model, and a FIFO, a device or a socket must not
hang or flood the reader.

- Only regular files are read. Every symbolic link below the folder is skipped, one that
  stays inside included: whether a link stays inside is only known by resolving it, and it
  can be pointed elsewhere between that check and the open. Walking the folder through
  directory descriptors and opening each name with O_NOFOLLOW relative to its parent
  cannot be raced that way. (A link that stays inside would also index one text twice.)
- The folder itself must not be a link either (who can write next to it could point it at
  the configuration folder); the folders above it are Home Assistant's own and may be
  (a configuration folder on another disk). A share is brought in with a bind mount.
- Files are opened with O_NONBLOCK: a FIFO swapped in between the scan and the open opens
  at once instead of waiting for a writer, and the `fstat` after the open refuses it.

Everything here blocks: run it in a worker thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
import os
from pathlib import Path
import stat

_NOT_REGULAR = (
    (stat.S_ISLNK, "a symbolic link (links are not followed)"),
    (stat.S_ISFIFO, "a FIFO, not a regular file"),
    (stat.S_ISSOCK, "a socket, not a regular file"),
    (stat.S_ISCHR, "a device, not a regular file"),
    (stat.S_ISBLK, "a device, not a regular file"),
    (stat.S_ISDIR, "a folder, not a regular file"),
)
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class RefusedFile(OSError):
    """A file that is not read, and why (a sentence for the log and the reindex report)."""


@dataclass(frozen=True, slots=True)
class FileState:
    """What the scan saw of one name: its size and modification time, and the reason it is
    refused (None for a regular file that will be read)."""

    size: int
    mtime_ns: int
    refused: str | None = None


def refusal(mode: int) -> str | None:
    """Why a file of this mode (from `lstat`) is not read; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((reason for is_kind, reason in _NOT_REGULAR if is_kind(mode)), "not a regular file")


def real_folder(directory: Path) -> Path:
    """The folder's real path, created when missing so the user finds where files go.

    Raises RefusedFile when the folder itself is a link.
    """
    directory.mkdir(parents=True, exist_ok=True)
    real = os.path.realpath(directory)
    if real != os.path.join(os.path.realpath(directory.parent), directory.name):
        raise RefusedFile("the folder is a symbolic link (links are not followed)")
    return Path(real)


def scan_folder(directory: Path, wanted: Iterable[str] | None = None) -> dict[str, FileState]:
    """Files under `directory` by relative path, with their state.

    Hidden names (a leading dot) are left out; so are files whose suffix is not in
    `wanted` (lower case, with the dot), unless `wanted` is None. A symbolic link to a
    folder is listed with a trailing "/" and refused; it is never entered.
    """
    suffixes = None if wanted is None else frozenset(wanted)
    root = real_folder(directory)
    found: dict[str, FileState] = {}
    # fwalk without following links: each folder is opened relative to its parent's
    # descriptor and only entered when it is the very folder `lstat` saw.
    for folder, dirs, files, folder_fd in os.fwalk(root, follow_symlinks=False):
        relative = Path(folder).relative_to(root)
        entered: list[str] = []
        for name in sorted(dirs):
            if name.startswith("."):
                continue
            try:
                info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                entered.append(name)
            else:  # a link to a folder: reported, and not even opened
                found[(relative / name).as_posix() + "/"] = FileState(
                    info.st_size, info.st_mtime_ns, refusal(info.st_mode)
                )
        dirs[:] = entered
        for name in sorted(files):
            if name.startswith("."):
                continue
            if suffixes is not None and Path(name).suffix.lower() not in suffixes:
                continue
            try:
                info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
            except OSError:
                continue
            found[(relative / name).as_posix()] = FileState(
                info.st_size, info.st_mtime_ns, refusal(info.st_mode)
            )
    return found


def read_inside(directory: Path, name: str, max_bytes: int) -> bytes:
    """The bytes of the regular file `name` (relative, "/"-separated) inside `directory`.

    Raises RefusedFile when a part of the path is a link, the file is not a regular file,
    or it is larger than `max_bytes`.
    """
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise RefusedFile(f"not a plain relative name: {name!r}")
    # O_NOFOLLOW: the folder turned into a link after real_folder's check is refused too.
    folder_fd = os.open(real_folder(directory), _OPEN_FOLDER)
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, _OPEN_FOLDER, dir_fd=folder_fd)
            except OSError as err:
                raise RefusedFile(f"{part!r} is not a folder inside ({err.strerror})") from err
            os.close(folder_fd)
            folder_fd = inner
        try:
            file_fd = os.open(parts[-1], _OPEN_FILE, dir_fd=folder_fd)
        except OSError as err:
            # ELOOP: O_NOFOLLOW met a link; ENXIO: a socket (or a FIFO without a writer).
            info = _lstat_or_none(parts[-1], folder_fd)
            reason = refusal(info.st_mode) if info is not None else None
            if reason is not None:
                raise RefusedFile(reason) from err
            raise
    finally:
        os.close(folder_fd)
    try:
        info = os.fstat(file_fd)
        if (reason := refusal(info.st_mode)) is not None:
            raise RefusedFile(reason)
        if info.st_size > max_bytes:
            raise RefusedFile(f"larger than {max_bytes // (1024 * 1024)} MB")
        # Read at most one byte more than allowed: a file that grows while being read is
        # still refused instead of read without end.
        data = bytearray()
        while len(data) <= max_bytes and (block := os.read(file_fd, 1 << 20)):
            data += block
        if len(data) > max_bytes:
            raise RefusedFile(f"larger than {max_bytes // (1024 * 1024)} MB")
        return bytes(data)
    finally:
        os.close(file_fd)


def _lstat_or_none(name: str, folder_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except OSError:
        return None
