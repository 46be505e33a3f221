"""PDF files written by hand for the knowledge tests: small files that cost pypdf much work.

Objects are numbered from 1 in the order given; the catalog is object 1, the page tree
object 2, Helvetica object 3.
"""

from __future__ import annotations

from collections.abc import Callable
import zlib

# One line of text drawn by a content stream; repeated, it makes a stream that pypdf
# needs about a second per MB to parse while it compresses to almost nothing.
LINE = b"(word number here and there) Tj 0 -1 Td "
_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
_PAGE = (
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %s"
    b" /Resources << /Font << /F1 3 0 R >>%s >> >>"
)


def stream(content: bytes, *, compress: bool = True, extra: bytes = b"") -> bytes:
    """A stream object's body; Flate-compressed unless told otherwise."""
    if compress:
        content = zlib.compress(content, 9)
        extra += b" /Filter /FlateDecode"
    return b"<< /Length %d%s >>\nstream\n" % (len(content), extra) + content + b"\nendstream"


def text_stream(*lines: str, repeat: int = 1) -> bytes:
    """A content stream showing each line (and `repeat` times the filler line)."""
    shown = b"".join(b"(%s) Tj 0 -14 Td " % line.encode() for line in lines)
    return stream(b"BT /F1 12 Tf 72 720 Td " + shown + LINE * repeat + b"ET")


def document(pages: list[tuple[bytes, bytes]], others: list[bytes]) -> bytes:
    """A PDF of `pages` (their /Contents value and extra resources) and other objects,
    numbered from 4 in the order of `others`; the pages come after them."""
    first_page = 4 + len(others)
    kids = b" ".join(b"%d 0 R" % (first_page + n) for n in range(len(pages)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(pages)),
        _FONT,
        *others,
        *(_PAGE % (contents, resources) for contents, resources in pages),
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out


def numbered_pages(count: int, *, repeat: int = 0) -> bytes:
    """`count` pages, each with its own stream saying "Page marker <n>" (and `repeat`
    filler lines, to make each page costly)."""
    others = [text_stream(f"Page marker {n}", repeat=repeat) for n in range(count)]
    return document([(b"%d 0 R" % (4 + n), b"") for n in range(count)], others)


def _same_stream(count: int, shared: bytes) -> bytes:
    return document([(b"4 0 R", b"")] * count, [shared])


def _repeated_in_arrays(count: int, shared: bytes) -> bytes:
    # Every page's /Contents is its own array, naming the one stream twice.
    return document([(b"[4 0 R 4 0 R]", b"")] * count, [shared])


def _shared_form(count: int, shared: bytes) -> bytes:
    # Every page has a tiny stream of its own that draws one large shared form.
    form = shared.replace(
        b"<< /Length",
        b"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792]"
        b" /Resources << /Font << /F1 3 0 R >> >> /Length",
        1,
    )
    others = [form] + [stream(b"/X0 Do", compress=False) for _ in range(count)]
    return document(
        [(b"%d 0 R" % (5 + n), b" /XObject << /X0 4 0 R >>") for n in range(count)], others
    )


# Ways for many pages to show one large content stream.
SHARING: dict[str, Callable[[int, bytes], bytes]] = {
    "same stream": _same_stream,
    "arrays repeating it": _repeated_in_arrays,
    "shared form": _shared_form,
}


def shared_content(shape: str, pages: int, repeat: int, marker: str) -> bytes:
    """`pages` pages all showing one stream of `repeat` filler lines after `marker`."""
    return SHARING[shape](pages, text_stream(marker, repeat=repeat))


def inflating(streams: int, megabytes: int) -> bytes:
    """One page drawn from `streams` streams of `megabytes` MB of spaces each, compressed
    to about a thousandth of that: what it needs in memory, not what it weighs."""
    # The same bytes in each object: compressed once.
    others = [stream(b" " * (megabytes * 2**20))] * streams
    refs = b" ".join(b"%d 0 R" % (4 + n) for n in range(streams))
    return document([(b"[%s]" % refs, b"")], others)
