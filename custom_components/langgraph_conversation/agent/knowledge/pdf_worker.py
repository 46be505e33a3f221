"""A PDF's text, extracted in a process of its own: run as a script by `pdf_text.py`.

pypdf can spend minutes on a small hostile file (pages that all show one large content
stream, forms nested in forms), and a thread cannot be stopped; a process can be killed.
This script imports nothing of the integration (running it must not import Home
Assistant), reads the PDF's bytes from stdin and writes one JSON object a line to stdout:

    {"text": "..."}    the text of one page, as soon as it is extracted
    {"note": "..."}    why the rest of the file was left out (a budget ran out)
    {"error": "..."}   why the file cannot be read at all
    {"done": true}     the end

Its budgets: pages, characters (per page and in all), bytes of page content parsed (the
work pypdf does grows with them), and address space and CPU time as limits of the process,
so it ends even if its parent is gone.

Arguments: <folder holding pypdf> <max pages> <max chars> <max chars per page>
<max content bytes> <address space bytes> <cpu seconds>.
"""

from io import BytesIO
import json
import os
import resource
import sys
from typing import Any, TextIO

# The protocol's own channel: main makes it a copy of stdout, then points file descriptor
# 1 and sys.stdout at stderr, so a stray print from a library cannot break a line.
_OUT: TextIO = sys.stdout


def _emit(**message: Any) -> None:
    _OUT.write(json.dumps(message) + "\n")
    _OUT.flush()


def _streams(page: Any, form_type: Any, indirect_type: Any) -> list[Any]:
    """The content streams a page's text is drawn from: its /Contents and every form
    XObject reachable from its resources (pypdf parses forms where they are drawn)."""
    found: list[Any] = []
    seen: set[Any] = set()

    def add(raw: Any) -> None:
        key = (raw.idnum, raw.generation) if isinstance(raw, indirect_type) else id(raw)
        if key in seen:
            return
        seen.add(key)
        obj = raw.get_object()
        if isinstance(obj, list):
            for item in list.__iter__(obj):
                add(item)
            return
        found.append((key, obj))
        resources = obj.get("/Resources") if hasattr(obj, "get") else None
        add_forms(resources)

    def add_forms(resources: Any) -> None:
        resources = resources.get_object() if resources is not None else None
        xobjects = resources.get("/XObject") if hasattr(resources, "get") else None
        xobjects = xobjects.get_object() if xobjects is not None else None
        if not hasattr(xobjects, "raw_get"):
            return
        for name in list(xobjects.keys()):
            raw = xobjects.raw_get(name)
            obj = raw.get_object()
            if hasattr(obj, "get") and obj.get("/Subtype") == form_type:
                add(raw)

    if "/Contents" in page:
        add(page.raw_get("/Contents"))
    add_forms(page.get("/Resources"))
    return found


def _clean(text: str) -> str:
    # Lone surrogates (broken font maps) cannot be stored as UTF-8.
    return text.encode("utf-8", "replace").decode("utf-8")


def extract(
    data: bytes, max_pages: int, max_chars: int, max_page_chars: int, max_content: int
) -> None:
    """Write the text of the PDF in `data`, page by page, within the budgets."""
    from pypdf import PdfReader
    from pypdf.generic import IndirectObject, NameObject

    reader = PdfReader(BytesIO(data))
    if reader.is_encrypted:
        _emit(error="the PDF is encrypted")
        return
    form = NameObject("/Form")
    seen: set[Any] = set()
    chars = content = 0
    for number, page in enumerate(reader.pages):
        if number >= max_pages:
            _emit(note=f"only the first {max_pages} pages were read")
            return
        streams = _streams(page, form, IndirectObject)
        keys = {key for key, _ in streams}
        if keys and keys <= seen:
            # It shows nothing that an earlier page did not: parsing it again would
            # multiply the work (a large stream shared by every page) for no new text.
            continue
        seen |= keys
        content += sum(len(stream.get_data()) for _, stream in streams)
        if content > max_content:
            _emit(note=f"stopped at page {number + 1}: over {max_content // 2**20} MB of content")
            return
        text = _clean((page.extract_text() or "")[:max_page_chars])
        if chars + len(text) > max_chars:
            _emit(text=text[: max_chars - chars])
            _emit(note=f"stopped at page {number + 1}: over {max_chars} characters")
            return
        chars += len(text)
        _emit(text=text)


def _limit(kind: int, value: int) -> None:
    """Lower a limit of this process to `value` (never above what it may have)."""
    _soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, hard))


def main() -> None:
    """Set the process limits, then extract from stdin."""
    pypdf_folder, *numbers = sys.argv[1:]
    max_pages, max_chars, max_page_chars, max_content, memory, cpu = map(int, numbers)
    _limit(resource.RLIMIT_AS, memory)
    _limit(resource.RLIMIT_CPU, cpu)
    # Last: the interpreter's own site-packages come first; this is for a pypdf that Home
    # Assistant installed elsewhere (<config>/deps).
    sys.path.append(pypdf_folder)
    global _OUT
    _OUT = os.fdopen(os.dup(1), "w", encoding="ascii")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    data = sys.stdin.buffer.read()
    try:
        extract(data, max_pages, max_chars, max_page_chars, max_content)
    except MemoryError:
        _emit(error="it needs too much memory")
    except Exception as err:  # noqa: BLE001  whatever pypdf raises is a broken file
        _emit(error=str(err) or type(err).__name__)
    _emit(done=True)


if __name__ == "__main__":
    main()
