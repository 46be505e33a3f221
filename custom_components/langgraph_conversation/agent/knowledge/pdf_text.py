"""A PDF's text, extracted by `pdf_worker.py` in a process of its own, within budgets.

A process, not a thread: a thread running away in pypdf cannot be stopped, a process is
killed when the file's time is up (or the index closes), and what it extracted until then
is kept. The worker is a fresh interpreter started with `sys.executable -I` (no fork of
Home Assistant's memory; about 0.1 s to start and import pypdf), fed the file's bytes on
stdin: it opens no path itself.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
import importlib.util
import json
from pathlib import Path
import sys

# The budgets of one file. Pages: a manual has a few dozen; characters: half of what a
# knowledge base holds in all (1000 chunks of 1000); per page: a dense page of small print
# has under 10,000; content bytes: what pypdf parses grows with them, about a second per
# MB on a desktop processor; time: the hard stop, whatever the file does.
PDF_MAX_PAGES = 200
PDF_MAX_CHARS = 500_000
PDF_MAX_PAGE_CHARS = 20_000
PDF_MAX_CONTENT_BYTES = 16 * 2**20
PDF_SECONDS = 30.0
# Limits of the worker process: address space (a decompression bomb ends in MemoryError)
# and CPU time (it ends by itself even if Home Assistant is gone).
PDF_MEMORY_BYTES = 512 * 2**20
_CPU_SECONDS_OVER = 5

_WORKER = Path(__file__).with_name("pdf_worker.py")
# One line of the worker's output is one page's text, JSON-escaped (up to 12 bytes a
# character for what is outside the BMP).
_LINE_LIMIT = 12 * PDF_MAX_PAGE_CHARS + 4096


def _pypdf_folder() -> str | None:
    """The folder pypdf is installed in, for the worker's path: Home Assistant may have
    installed it into <config>/deps, which a fresh interpreter does not know."""
    spec = importlib.util.find_spec("pypdf")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(next(iter(spec.submodule_search_locations))).parent)


# Looked up once, when Home Assistant imports the integration (in its executor).
_PYPDF_FOLDER = _pypdf_folder()


class PdfError(ValueError):
    """The PDF gave no text: why, as a sentence for the log and the reindex report."""


@dataclass(frozen=True, slots=True)
class PdfText:
    """The text of a PDF's pages, and why the rest was left out when a budget ran out."""

    pages: tuple[str, ...]
    note: str | None = None

    @property
    def text(self) -> str:
        """The pages' text, a paragraph break between pages."""
        return "\n\n".join(self.pages)


async def extract_pdf_text(data: bytes) -> PdfText:
    """The text of the PDF in `data`; PdfError when there is none to be had."""
    if _PYPDF_FOLDER is None:
        raise PdfError("pypdf is not installed")
    limits = (
        PDF_MAX_PAGES,
        PDF_MAX_CHARS,
        PDF_MAX_PAGE_CHARS,
        PDF_MAX_CONTENT_BYTES,
        PDF_MEMORY_BYTES,
        int(PDF_SECONDS) + _CPU_SECONDS_OVER,
    )
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            str(_WORKER),
            _PYPDF_FOLDER,
            *map(str, limits),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=_LINE_LIMIT,
        )
    except OSError as err:
        raise PdfError(f"the PDF reader could not be started ({err})") from err
    pages: list[str] = []
    note: str | None = None
    error: str | None = None
    done = False
    try:
        async with asyncio.timeout(PDF_SECONDS):
            await _feed(process, data)
            assert process.stdout is not None
            while line := await process.stdout.readline():
                message = json.loads(line)
                if isinstance(text := message.get("text"), str):
                    pages.append(text)
                note = message.get("note", note)
                error = message.get("error", error)
                done = done or message.get("done") is True
            await process.wait()
    except TimeoutError:
        note = f"stopped after {PDF_SECONDS:g} seconds, at page {len(pages) + 1}"
    except (ValueError, AttributeError) as err:  # a line over the limit, or not our JSON
        error = f"the PDF reader's output was not understood ({err})"
    finally:
        # Also when the index closes mid-file (cancellation): nothing outlives it.
        if process.returncode is None:
            process.kill()
            await process.wait()
    if error is not None:
        raise PdfError(error)
    if not done and note is None:
        raise PdfError(f"the PDF reader stopped (exit status {process.returncode})")
    if note is not None and not pages:
        raise PdfError(note)
    return PdfText(tuple(pages), note)


async def _feed(process: asyncio.subprocess.Process, data: bytes) -> None:
    """Hand the worker the file, then end its input."""
    assert process.stdin is not None
    try:
        process.stdin.write(data)
        await process.stdin.drain()
        process.stdin.close()
    except ConnectionError:
        pass  # the worker ended before reading it all: its exit status says why
