"""What a fake image model answers, shared by the OpenAI and Gemini image fakes: scripted
images (real PNG files made here, of any size), errors and damaged bodies, in order.

A test queues one reply per image request it expects; each request takes the next. An
empty queue asks the `responder` (the offline stand-in draws a picture there), or without
one answers HTTP 500, saying the request was not scripted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
import random
import struct
import zlib

from .script import ErrorReply


def _png(width: int, height: int, rows: bytes) -> bytes:
    """A PNG file (8-bit RGB) of the given filtered scanlines."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        body = kind + payload
        return struct.pack(">I", len(payload)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 1))
        + chunk(b"IEND", b"")
    )


def png_image(width: int, height: int, seed: int = 0) -> bytes:
    """A real PNG (8-bit RGB) of `width` x `height` pixels of seeded noise."""
    rng = random.Random(seed)
    return _png(width, height, b"".join(b"\x00" + rng.randbytes(3 * width) for _ in range(height)))


def png_bands(labels: list[str], size: int) -> bytes:
    """A square PNG of `size` pixels with one horizontal band of colour per label, each
    colour made from the label (the offline stand-in's "picture")."""
    colours = [zlib.crc32(label.encode()).to_bytes(4, "big")[:3] for label in labels]
    colours = colours or [b"\x80\x80\x80"]
    rows = b"".join(b"\x00" + colours[row * len(colours) // size] * size for row in range(size))
    return _png(size, size, rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageReply:
    """An image the model makes; `as_link` answers with a URL to it instead of base64
    (served by the same fake, as a provider's storage would)."""

    data: bytes
    revised_prompt: str | None = None
    as_link: bool = False
    # An extra text part (Gemini's generateContent answers words beside the image).
    text: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RawReply:
    """A body sent as is with HTTP 200 (a damaged or unexpected answer)."""

    body: bytes
    content_type: str = "application/json"


AnyImageReply = ImageReply | RawReply | ErrorReply


@dataclass
class ImageScript:
    """The queue of image replies, and every image request as it arrived."""

    replies: deque[AnyImageReply] = field(default_factory=deque)
    # Request bodies (JSON), the path each went to, and its credentials header.
    requests: list[dict] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    credentials: list[str | None] = field(default_factory=list)
    # Answers a request body when the queue is empty.
    responder: Callable[[dict], AnyImageReply] | None = None

    def add_image(self, data: bytes, **options: object) -> None:
        """Queue an image (ImageReply fields as options)."""
        self.replies.append(ImageReply(data=data, **options))  # type: ignore[arg-type]

    def add_error(
        self, status: int, message: str = "error scripted by the test", **options: object
    ) -> None:
        """Queue an HTTP error in the provider's own format."""
        self.replies.append(ErrorReply(status=status, message=message, **options))  # type: ignore[arg-type]

    def add_raw(self, body: bytes, content_type: str = "application/json") -> None:
        """Queue a 200 answer with this body, as is."""
        self.replies.append(RawReply(body=body, content_type=content_type))

    def next_reply(self) -> AnyImageReply:
        """The next scripted reply, else the responder's for the last request; a 500 that
        says so when there is neither."""
        if self.replies:
            return self.replies.popleft()
        if self.responder is not None and self.requests:
            return self.responder(self.requests[-1])
        return ErrorReply(
            status=500,
            message=f"fake server: image request #{len(self.requests)} was not scripted",
        )
