"""Storage faults: locked, disk full, read-only, corrupted, deleted while running.

For each: a repair issue explains it, the agent still answers (what is said meanwhile is
kept in memory), and once the fault is cleared the file heals by itself, without a
reload: what was said meanwhile is written to it, the repair issue goes away, and nothing
stored earlier is lost (memories are recalled and the conversation goes on with its whole
history, also after a restart).

Disk full and read-only are real: a size-limited tmpfs and a read-only bind mount (root
ignores file modes, so chmod would prove nothing). scripts/test runs the tests as root in a
private mount namespace, where these mounts are allowed and vanish with the run; there they
must work (the tests fail otherwise), elsewhere they are skipped with the reason.

Not covered: a filesystem turning read-only under files already open for writing. Linux
refuses such a remount (EBUSY) unless it does it itself after a disk error, which a test
cannot cause; such an error reaches us as the write errors tested here.
"""

from __future__ import annotations

from collections.abc import Iterator
import ctypes
import errno
import json
import os
from pathlib import Path
import shutil
import subprocess
import sys
from typing import Any, BinaryIO

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.const import DOMAIN
from custom_components.langgraph_conversation.storage.sqlite import database as sqlite_database
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import issue_registry as ir
from homeassistant.setup import async_setup_component

from ..conftest import agent_entity_id
from ..helpers import (
    conversations_written,
    messages_of,
    prompt_text,
    storage_down,
    text_of,
    wait_until_healed,
)

SPARE_KEY = "The spare key is under the blue pot"
GARAGE_KEY = "The garage key hangs by the back door"
QUESTION = "Where is the spare key and the garage key?"

_ISSUES = json.loads(
    (Path(__file__).parents[2] / "custom_components" / DOMAIN / "translations" / "en.json")
    .read_text(encoding="utf-8")
    .replace("\r\n", "\n")
)["issues"]

# mount(2) flags.
_MS_RDONLY = 1
_MS_REMOUNT = 32
_MS_BIND = 4096
_MNT_DETACH = 2

# A second program holding write locks on SQLite files until told to let go.
_LOCKER = """
import sqlite3, sys
holders = []
for path in sys.argv[1:]:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("BEGIN EXCLUSIVE")
    holders.append(connection)
print("locked", flush=True)
sys.stdin.readline()
"""


class Mounts:
    """mount(2) through libc; everything mounted is detached at the end of the test."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._mounted: list[str] = []

    def _mount(self, source: str, target: str, fstype: str | None, flags: int, data: str) -> None:
        result = self._libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        )
        if result != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error), target)

    def tmpfs(self, target: Path, size: str) -> None:
        """A filesystem of `size` bytes (tmpfs syntax: 2m, 64k) at `target`."""
        self._mount("tmpfs", str(target), "tmpfs", 0, f"size={size}")
        self._mounted.append(str(target))

    def read_only(self, target: Path) -> None:
        """Make `target` (a directory or a file) read-only: a read-only bind onto itself."""
        self._mount(str(target), str(target), None, _MS_BIND, "")
        self._mounted.append(str(target))
        self._mount("none", str(target), None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY, "")

    def unmount(self, target: Path) -> None:
        """Detach the last mount on `target`."""
        self._mounted.remove(str(target))
        if self._libc.umount2(str(target).encode(), _MNT_DETACH) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error), str(target))

    def unmount_all(self) -> None:
        while self._mounted:
            self.unmount(Path(self._mounted[-1]))


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[Mounts]:
    """Mounting, where allowed; under scripts/test it must be."""
    mounts = Mounts()
    probe = tmp_path / "mount-probe"
    probe.mkdir()
    try:
        mounts.tmpfs(probe, "64k")
        mounts.unmount(probe)
    except OSError as err:
        if os.environ.get("LGC_CACHE") == "/opt/lgc":  # inside scripts/test's leg
            pytest.fail(f"scripts/test runs in a mount namespace, yet mounting failed: {err}")
        pytest.skip(f"needs root in a private mount namespace, as scripts/test gives: {err}")
    try:
        yield mounts
    finally:
        mounts.unmount_all()


def _storage_dir(hass: HomeAssistant) -> Path:
    return Path(hass.config.path(DOMAIN))


async def _start(hass: HomeAssistant, entry: MockConfigEntry) -> None:
    for component in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, component, {})
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()


async def _reload(hass: HomeAssistant, entry: MockConfigEntry) -> None:
    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()


async def _ask(
    hass: HomeAssistant, entry: MockConfigEntry, text: str, conversation_id: str | None
) -> conversation.ConversationResult:
    return await conversation.async_converse(
        hass, text, conversation_id, Context(), agent_id=agent_entity_id(hass, entry)
    )


async def _remember(
    hass: HomeAssistant,
    entry: MockConfigEntry,
    server: FakeOpenAIServer,
    fact: str,
    conversation_id: str | None = None,
) -> conversation.ConversationResult:
    """A turn in which the model saves `fact`; it answers "Noted." whatever happened."""
    server.add_tool_calls([ToolCall("memory", {"action": "remember", "text": fact})])
    server.add_text("Noted.")
    result = await _ask(hass, entry, f"Remember: {fact}", conversation_id)
    assert result.response.speech["plain"]["speech"] == "Noted."
    # Written (or, in a fault, in memory) before a test brings the next fault: a turn
    # answers while its checkpoint is written.
    await conversations_written(hass)
    return result


def _last_tool_result(server: FakeOpenAIServer) -> str:
    return text_of(messages_of(server.requests[-1], "tool")[-1])


def _issue_text(hass: HomeAssistant, issue_id: str) -> str:
    """The repair issue as the user reads it (its translated description, filled in)."""
    issue = ir.async_get(hass).async_get_issue(DOMAIN, issue_id)
    assert issue is not None, f"no repair issue {issue_id}"
    assert issue.translation_key == issue_id
    return _ISSUES[issue_id]["description"].format(**(issue.translation_placeholders or {}))


def _has_issue(hass: HomeAssistant, issue_id: str) -> bool:
    return ir.async_get(hass).async_get_issue(DOMAIN, issue_id) is not None


def _history(request: dict[str, Any]) -> list[tuple[str, str]]:
    """The conversation the model was sent, without the system prompt and the context."""
    return [
        (m["role"], text_of(m))
        for m in request["messages"]
        if m["role"] != "system" and not text_of(m).startswith("[Context for the request")
    ]


def _memory_texts(directory: Path) -> set[str]:
    """The memory texts memory.db holds now, read by another connection (the effect)."""
    import sqlite3

    connection = sqlite3.connect(directory / "memory.db")
    try:
        rows = connection.execute("SELECT value FROM items").fetchall()
    finally:
        connection.close()
    return {json.loads(value).get("text", "") for (value,) in rows}


async def _assert_history_kept(
    hass: HomeAssistant, entry: MockConfigEntry, server: FakeOpenAIServer, conversation_id: str
) -> None:
    """A turn now still sends the conversation's first request to the model."""
    server.add_text("Still here.")
    result = await _ask(hass, entry, "Are you there?", conversation_id)
    assert result.response.speech["plain"]["speech"] == "Still here."
    assert _history(server.requests[-1])[0] == ("user", f"Remember: {SPARE_KEY}")


async def _assert_nothing_lost(
    hass: HomeAssistant,
    entry: MockConfigEntry,
    server: FakeOpenAIServer,
    conversation_id: str,
    facts: list[str],
) -> None:
    """Memories saved before are recalled; the conversation has its earlier turns."""
    server.add_text("Under the blue pot, and by the back door.")
    result = await _ask(hass, entry, QUESTION, conversation_id)
    assert result.response.speech["plain"]["speech"] == "Under the blue pot, and by the back door."
    request = server.requests[-1]
    system = prompt_text(request)
    for fact in facts:
        assert fact in system
    history = _history(request)
    assert history[0] == ("user", f"Remember: {SPARE_KEY}")
    assert ("assistant", "Noted.") in history
    assert history[-1] == ("user", QUESTION)
    for issue_id in ("memory_unavailable", "memory_failed", "threads_unavailable"):
        assert not _has_issue(hass, issue_id), issue_id


# -- locked by another program ---------------------------------------------------------

# How long a write waits for another program's lock before the file counts as down, in
# these tests. The files' own wait (busy_timeout, 5 s: storage/sqlite/database.py) is
# for a program that lets go soon; the locker here holds on until told, so every write
# that meets it fails either way, only later. The integration has one connection per file,
# so nothing of its own waits on this timeout.
SHORT_BUSY_TIMEOUT_MS = 300


@pytest.fixture
def short_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The files' connections wait SHORT_BUSY_TIMEOUT_MS for a lock (set before the
    entry opens them)."""
    pragmas = tuple(
        f"PRAGMA busy_timeout = {SHORT_BUSY_TIMEOUT_MS}" if "busy_timeout" in pragma else pragma
        for pragma in sqlite_database._PRAGMAS
    )
    assert pragmas != sqlite_database._PRAGMAS
    monkeypatch.setattr(sqlite_database, "_PRAGMAS", pragmas)


def _lock(paths: list[Path]) -> subprocess.Popen[str]:
    locker = subprocess.Popen(
        [sys.executable, "-c", _LOCKER, *map(str, paths)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert locker.stdout is not None
    assert locker.stdout.readline().strip() == "locked"
    return locker


def _unlock(locker: subprocess.Popen[str]) -> None:
    assert locker.stdin is not None
    locker.stdin.write("\n")
    locker.stdin.close()
    assert locker.wait(timeout=30) == 0
    assert locker.stdout is not None
    locker.stdout.close()


async def test_files_locked_by_another_program_while_running(
    short_busy_timeout: None,
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
) -> None:
    """Another program holds both files: issues, answers from memory, and once it lets go
    everything said meanwhile is in the files without a reload."""
    entry = setup_integration
    first = await _remember(hass, entry, openai_server, SPARE_KEY)
    directory = _storage_dir(hass)
    locker = await hass.async_add_executor_job(
        _lock, [directory / "memory.db", directory / "threads.db"]
    )
    try:
        await _remember(hass, entry, openai_server, GARAGE_KEY, first.conversation_id)
        # Kept in memory while the file is locked, for the write-back.
        assert '"saved"' in _last_tool_result(openai_server)
        assert storage_down(hass) == {"conversations", "memory"}
        assert "locked" in _issue_text(hass, "memory_failed")
        description = _issue_text(hass, "threads_unavailable")
        assert "locked" in description
        assert str(directory / "threads.db") in description
        # The conversation goes on with its history while the file is locked.
        await _assert_history_kept(hass, entry, openai_server, first.conversation_id)
    finally:
        await hass.async_add_executor_job(_unlock, locker)

    await wait_until_healed(hass)
    assert not _has_issue(hass, "memory_failed")
    assert await hass.async_add_executor_job(_memory_texts, directory) >= {SPARE_KEY, GARAGE_KEY}
    await _assert_nothing_lost(
        hass, entry, openai_server, first.conversation_id, [SPARE_KEY, GARAGE_KEY]
    )
    await _reload(hass, entry)
    await _assert_nothing_lost(
        hass, entry, openai_server, first.conversation_id, [SPARE_KEY, GARAGE_KEY]
    )


async def test_files_locked_by_another_program_at_start(
    short_busy_timeout: None,
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
) -> None:
    """Locked while the entry sets up: it starts in memory and picks the files up by itself
    once they are free, the turn of the outage after the files' own history."""
    entry = setup_integration
    first = await _remember(hass, entry, openai_server, SPARE_KEY)
    assert await hass.config_entries.async_unload(entry.entry_id)
    directory = _storage_dir(hass)
    locker = await hass.async_add_executor_job(
        _lock, [directory / "memory.db", directory / "threads.db"]
    )
    try:
        assert await hass.config_entries.async_setup(entry.entry_id)
        await hass.async_block_till_done()
        assert "locked" in _issue_text(hass, "memory_unavailable")
        assert "locked" in _issue_text(hass, "threads_unavailable")
        openai_server.add_text("Hello without my files.")
        result = await _ask(hass, entry, "Hello", first.conversation_id)
        assert result.response.speech["plain"]["speech"] == "Hello without my files."
    finally:
        await hass.async_add_executor_job(_unlock, locker)
    await wait_until_healed(hass)
    for issue_id in ("memory_unavailable", "threads_unavailable"):
        assert not _has_issue(hass, issue_id), issue_id
    await _assert_nothing_lost(hass, entry, openai_server, first.conversation_id, [SPARE_KEY])
    assert ("user", "Hello") in _history(openai_server.requests[-1])
    await _reload(hass, entry)
    await _assert_nothing_lost(hass, entry, openai_server, first.conversation_id, [SPARE_KEY])
    assert ("assistant", "Hello without my files.") in _history(openai_server.requests[-1])


async def test_closing_during_a_fault_says_what_was_not_written(
    short_busy_timeout: None,
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Home Assistant stops while the files are locked: what was said meanwhile lives in
    memory only, and the log says how much of it ends there."""
    entry = setup_integration
    directory = _storage_dir(hass)
    locker = await hass.async_add_executor_job(
        _lock, [directory / "memory.db", directory / "threads.db"]
    )
    try:
        await _remember(hass, entry, openai_server, GARAGE_KEY)
        assert storage_down(hass) == {"conversations", "memory"}
        assert await hass.config_entries.async_unload(entry.entry_id)
    finally:
        await hass.async_add_executor_job(_unlock, locker)
    closing = [r.message for r in caplog.records if "could not be written" in r.message]
    assert len(closing) == 1
    assert "1 conversations" in closing[0]
    assert "1 memory writes" in closing[0]


# -- disk full -------------------------------------------------------------------------


def _write_until_full(file: BinaryIO, size: int) -> None:
    try:
        while True:
            file.write(b"\0" * size)
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise


def _fill(directory: Path) -> Path:
    """Write a file until the filesystem has no room left."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as file:
        _write_until_full(file, 65536)
        _write_until_full(file, 512)
    return filler


async def test_disk_full_while_running(
    hass: HomeAssistant,
    config_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    mounts: Mounts,
) -> None:
    """No space left: issues, an answer, and everything back once space is freed."""
    directory = _storage_dir(hass)
    await hass.async_add_executor_job(directory.mkdir)
    await hass.async_add_executor_job(mounts.tmpfs, directory, "8m")
    await _start(hass, config_entry)
    first = await _remember(hass, config_entry, openai_server, SPARE_KEY)

    filler = await hass.async_add_executor_job(_fill, directory)
    await _remember(hass, config_entry, openai_server, GARAGE_KEY, first.conversation_id)
    assert '"saved"' in _last_tool_result(openai_server)
    assert "full" in _issue_text(hass, "memory_failed")
    assert "full" in _issue_text(hass, "threads_unavailable")

    await hass.async_add_executor_job(filler.unlink)
    await wait_until_healed(hass)
    assert not _has_issue(hass, "memory_failed")
    assert await hass.async_add_executor_job(_memory_texts, directory) >= {SPARE_KEY, GARAGE_KEY}
    await _reload(hass, config_entry)
    await _assert_nothing_lost(
        hass, config_entry, openai_server, first.conversation_id, [SPARE_KEY, GARAGE_KEY]
    )


# -- read-only -------------------------------------------------------------------------


async def test_read_only_directory(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    mounts: Mounts,
) -> None:
    """The directory is read-only at the next start: issues, answers; then writable again."""
    entry = setup_integration
    first = await _remember(hass, entry, openai_server, SPARE_KEY)
    assert await hass.config_entries.async_unload(entry.entry_id)
    directory = _storage_dir(hass)
    await hass.async_add_executor_job(mounts.read_only, directory)

    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    for issue_id in ("memory_unavailable", "threads_unavailable"):
        description = _issue_text(hass, issue_id)
        assert "unable to open database file" in description
        assert "writable" in description
    openai_server.add_text("Hello anyway.")
    result = await _ask(hass, entry, "Hello", None)
    assert result.response.speech["plain"]["speech"] == "Hello anyway."

    await hass.async_add_executor_job(mounts.unmount, directory)
    await _reload(hass, entry)
    await _assert_nothing_lost(hass, entry, openai_server, first.conversation_id, [SPARE_KEY])


async def test_read_only_memory_file(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    mounts: Mounts,
) -> None:
    """SQLite opens a read-only file read-only: memories are recalled, one saved meanwhile
    is kept in memory and reaches the file once it is writable again."""
    entry = setup_integration
    first = await _remember(hass, entry, openai_server, SPARE_KEY)
    assert await hass.config_entries.async_unload(entry.entry_id)
    memory_file = _storage_dir(hass) / "memory.db"
    await hass.async_add_executor_job(mounts.read_only, memory_file)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()

    await _remember(hass, entry, openai_server, GARAGE_KEY, first.conversation_id)
    assert '"saved"' in _last_tool_result(openai_server)
    assert SPARE_KEY in prompt_text(openai_server.requests[-2])
    assert "readonly" in _issue_text(hass, "memory_failed")
    assert not _has_issue(hass, "threads_unavailable")
    assert storage_down(hass) == {"memory"}

    await hass.async_add_executor_job(mounts.unmount, memory_file)
    await wait_until_healed(hass)
    directory = _storage_dir(hass)
    assert await hass.async_add_executor_job(_memory_texts, directory) >= {SPARE_KEY, GARAGE_KEY}
    await _reload(hass, entry)
    await _assert_nothing_lost(
        hass, entry, openai_server, first.conversation_id, [SPARE_KEY, GARAGE_KEY]
    )


# -- corrupted -------------------------------------------------------------------------


def _corrupt(directory: Path, backup: Path) -> dict[str, bytes]:
    """Keep good copies aside, then overwrite both files with garbage of the same size."""
    backup.mkdir()
    garbage: dict[str, bytes] = {}
    for name in ("memory.db", "threads.db"):
        shutil.copy2(directory / name, backup / name)
        size = (directory / name).stat().st_size
        garbage[name] = (b"not a database, someone's data " * (size // 31 + 1))[:size]
        (directory / name).write_bytes(garbage[name])
    return garbage


def _restore(directory: Path, backup: Path) -> dict[str, bytes]:
    contents = {name: (directory / name).read_bytes() for name in ("memory.db", "threads.db")}
    for name in contents:
        shutil.copy2(backup / name, directory / name)
    return contents


async def test_corrupted_files_are_left_alone_until_restored(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    tmp_path: Path,
) -> None:
    """Damaged files: issues, answers, files untouched; a restored backup brings all back."""
    entry = setup_integration
    first = await _remember(hass, entry, openai_server, SPARE_KEY)
    assert await hass.config_entries.async_unload(entry.entry_id)
    directory = _storage_dir(hass)
    garbage = await hass.async_add_executor_job(_corrupt, directory, tmp_path / "backup")

    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    assert "not a database" in _issue_text(hass, "memory_unavailable")
    assert "not a database" in _issue_text(hass, "threads_unavailable")
    openai_server.add_text("Hello anyway.")
    result = await _ask(hass, entry, "Hello", None)
    assert result.response.speech["plain"]["speech"] == "Hello anyway."

    # What the user restores from their backup is what was there: nothing was written.
    assert await hass.async_add_executor_job(_restore, directory, tmp_path / "backup") == garbage
    await _reload(hass, entry)
    await _assert_nothing_lost(hass, entry, openai_server, first.conversation_id, [SPARE_KEY])


# -- deleted while running -------------------------------------------------------------


async def test_directory_deleted_while_running_is_written_back(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """SQLite would go on writing into the deleted files; they are written back instead."""
    entry = setup_integration
    first = await _remember(hass, entry, openai_server, SPARE_KEY)
    directory = _storage_dir(hass)
    await hass.async_add_executor_job(shutil.rmtree, directory)

    await _remember(hass, entry, openai_server, GARAGE_KEY, first.conversation_id)
    assert '"saved"' in _last_tool_result(openai_server)
    description = _issue_text(hass, "storage_restored")
    assert "no conversation or memory was lost" in description
    files = await hass.async_add_executor_job(lambda: sorted(p.name for p in directory.iterdir()))
    assert {"memory.db", "threads.db"} <= set(files)

    # Deleted again, and Home Assistant stops before anything is written: closing writes
    # the files back too.
    await hass.async_add_executor_job(shutil.rmtree, directory)
    await _reload(hass, entry)
    await _assert_nothing_lost(
        hass, entry, openai_server, first.conversation_id, [SPARE_KEY, GARAGE_KEY]
    )
    history: list[Any] = [text_of(m) for m in openai_server.requests[-1]["messages"]]
    assert f"Remember: {GARAGE_KEY}" in history
