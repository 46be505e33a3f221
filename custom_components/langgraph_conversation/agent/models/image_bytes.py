"""What a generated image is: its type and size read from its own bytes, and a bounded
download for the providers that answer with a link instead of the bytes.

Providers do not say reliably what they sent: LiteLLM drops Gemini's `mimeType`, OpenAI's
`gpt-image-1` answers PNG unless asked otherwise. The first bytes of the file say it
for every format an image model makes (PNG, JPEG, WebP, GIF); anything else is refused,
so Home Assistant never stores and serves a file that is not an image.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
import ipaddress
import struct
from urllib.parse import urlsplit

import httpx

from ..upstream import stream_ends

# Largest image accepted, from a provider's base64 or from a download (a 4096x4096 PNG
# of noise is about 50 MB; models make 1-4 megapixel images of a few megabytes).
MAX_IMAGE_BYTES = 32 * 1024 * 1024
# Longest a download of a linked image may take, on top of the generation's own timeout.
DOWNLOAD_TIMEOUT = 60.0


class ImageProblem(Exception):
    """The provider's answer holds no usable image; the text says why (no secrets)."""


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """What the bytes say: MIME type, and the size in pixels when the header holds it."""

    mime_type: str
    width: int | None = None
    height: int | None = None


def image_facts(data: bytes) -> ImageFacts:
    """The type and size of an image, from its header; ImageProblem for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        # The IHDR chunk comes first: width and height as big-endian 32-bit numbers.
        if len(data) >= 24 and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            return ImageFacts("image/png", width, height)
        return ImageFacts("image/png")
    if data.startswith(b"\xff\xd8\xff"):
        return ImageFacts("image/jpeg", *_jpeg_size(data))
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ImageFacts("image/webp", *_webp_size(data))
    if data[:6] in (b"GIF87a", b"GIF89a"):
        width, height = struct.unpack("<HH", data[6:10]) if len(data) >= 10 else (None, None)
        return ImageFacts("image/gif", width, height)
    raise ImageProblem(f"the model returned {len(data)} bytes that are not an image")


# JPEG start-of-frame markers (baseline, progressive, ...): they carry the size. Not the
# DHT (C4), JPG (C8) and DAC (CC) markers, which share the range.
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int | None, int | None]:
    """Width and height from the first start-of-frame segment, walking the segments."""
    offset = 2
    while offset + 4 <= len(data):
        if data[offset] != 0xFF:
            return None, None
        marker = data[offset + 1]
        if marker == 0xFF:  # fill byte
            offset += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length field
            offset += 2
            continue
        (length,) = struct.unpack(">H", data[offset + 2 : offset + 4])
        if marker in _SOF_MARKERS and offset + 9 <= len(data):
            height, width = struct.unpack(">HH", data[offset + 5 : offset + 9])
            return width, height
        offset += 2 + length
    return None, None


def _webp_size(data: bytes) -> tuple[int | None, int | None]:
    """Width and height of the three WebP kinds (lossy VP8, lossless VP8L, extended VP8X)."""
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    return None, None


def may_download(url: str, api_base: str | None) -> bool:
    """Whether a link in a provider's answer may be fetched.

    The link comes from the provider, not from the person asking, but a provider (or a
    proxy in between) must not make Home Assistant read its own network: http(s) only,
    and an address of this host or a private network only on the server the model is
    configured at (a local image server answering with its own links). Host names are
    not resolved here; a public provider's links name public storage.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not host:
        return False
    same_server = False
    if api_base:
        try:
            base = urlsplit(api_base)
            same_server = (base.hostname, base.port) == (host, port)
        except ValueError:
            same_server = False
    if same_server:
        return True
    if parts.scheme != "https" or host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return True  # a name: see above
    return address.is_global


async def download_image(
    client: httpx.AsyncClient,
    url: str,
    *,
    timeout: float = DOWNLOAD_TIMEOUT,
    limit: int = MAX_IMAGE_BYTES,
) -> bytes:
    """The bytes behind a link, at most `limit`, within `timeout` seconds.

    Redirects are not followed: each hop would need the check of `may_download` again.
    """
    try:
        async with (
            asyncio.timeout(timeout),
            client.stream("GET", url, follow_redirects=False) as response,
        ):
            if response.status_code != 200:
                raise ImageProblem(f"the image link answered HTTP {response.status_code}")
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                raise ImageProblem(f"the linked image is larger than {limit} bytes")
            chunks: list[bytes] = []
            size = 0
            body = response.aiter_bytes()
            try:
                async for chunk in body:
                    size += len(chunk)
                    if size > limit:
                        raise ImageProblem(f"the linked image is larger than {limit} bytes")
                    chunks.append(chunk)
            finally:
                # A read cut short (too large, too slow) ends httpx's generators here, not
                # later in tasks of the event loop's (upstream/stream_ends.py).
                await stream_ends.close_early(response, body)
    except TimeoutError:
        raise ImageProblem(f"the image link did not answer within {timeout:g} s") from None
    except httpx.HTTPError as err:
        raise ImageProblem(f"the image link failed: {type(err).__name__}") from None
    return b"".join(chunks)
