"""What an image is, read from its bytes, and which links a provider's answer may make us
fetch: generated images of many sizes in every format an image model makes."""

from __future__ import annotations

import io
import random

import httpx
from PIL import Image
import pytest

from custom_components.langgraph_conversation.agent.models.image_bytes import (
    ImageProblem,
    download_image,
    image_facts,
    may_download,
)
from fakes import FakeOpenAIServer, png_image

from ...loop_closings import nothing_left_for_the_loop

RNG = random.Random(2026)
SIZES = [(RNG.randint(1, 2048), RNG.randint(1, 2048)) for _ in range(6)] + [(1, 1)]


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_png_size(width: int, height: int) -> None:
    facts = image_facts(png_image(width, height))
    assert (facts.mime_type, facts.width, facts.height) == ("image/png", width, height)


@pytest.mark.parametrize(
    ("fmt", "mime", "options"),
    [
        ("JPEG", "image/jpeg", {}),
        ("JPEG", "image/jpeg", {"progressive": True}),
        ("WEBP", "image/webp", {"lossless": False}),
        ("WEBP", "image/webp", {"lossless": True}),
        ("GIF", "image/gif", {}),
    ],
)
@pytest.mark.parametrize(("width", "height"), SIZES[:4])
def test_other_formats(
    fmt: str, mime: str, options: dict[str, object], width: int, height: int
) -> None:
    """Pillow writes the file; the header reader must agree on type and size."""
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buffer, fmt, **options)
    facts = image_facts(buffer.getvalue())
    assert (facts.mime_type, facts.width, facts.height) == (mime, width, height)


@pytest.mark.parametrize(
    "data", [b"", b"not an image", b"<html></html>", b"%PDF-1.7\n", RNG.randbytes(64)]
)
def test_not_an_image(data: bytes) -> None:
    with pytest.raises(ImageProblem, match="not an image"):
        image_facts(data)


BASE = "http://127.0.0.1:8080/v1"


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        # Public storage over https.
        ("https://files.example.com/img/1.png?sig=abc", True),
        ("https://203.0.113.7/x.png", False),  # documentation range: not global
        ("https://8.8.8.8/x.png", True),
        # The configured server itself, whatever its address.
        ("http://127.0.0.1:8080/files/images/1.png", True),
        # Anything else on this host or a private network, or not http(s).
        ("http://127.0.0.1:9999/x.png", False),
        ("https://127.0.0.1/x.png", False),
        ("https://localhost/x.png", False),
        ("https://printer.localhost/x.png", False),
        ("http://files.example.com/x.png", False),
        ("https://10.1.2.3/x.png", False),
        ("https://192.168.1.20/x.png", False),
        ("https://[::1]/x.png", False),
        ("https://169.254.169.254/latest/meta-data", False),
        ("file:///etc/passwd", False),
        ("ftp://files.example.com/x.png", False),
        ("https:///x.png", False),
        ("http://[::1/x.png", False),
    ],
)
def test_which_links_are_fetched(url: str, allowed: bool) -> None:
    assert may_download(url, BASE) is allowed


@pytest.mark.parametrize("octets", [[RNG.randint(0, 255) for _ in range(3)] for _ in range(8)])
def test_private_addresses_are_never_fetched(octets: list[int]) -> None:
    """Generated addresses in each private range, without a configured server."""
    a, b, c = octets
    for host in (
        f"10.{a}.{b}.{c}",
        f"192.168.{b}.{c}",
        f"172.{16 + a % 16}.{b}.{c}",
        f"127.{a}.{b}.{c}",
    ):
        assert not may_download(f"https://{host}/image.png", None), host


@pytest.mark.parametrize("chunked", [False, True])
async def test_download_is_bounded(openai_server: FakeOpenAIServer, chunked: bool) -> None:
    """A linked image is read up to the limit, whether its length is declared or not;
    beyond it, and for an answer other than 200, the download fails with a reason."""
    image = png_image(64, 64, seed=4)
    url = openai_server.serve_image(image, chunked=chunked)
    async with httpx.AsyncClient() as client:
        assert await download_image(client, url, limit=len(image)) == image
        # Cut at the limit, the download leaves no generator for the event loop to close.
        with nothing_left_for_the_loop(), pytest.raises(ImageProblem, match="larger than"):
            await download_image(client, url, limit=len(image) - 1)
        with pytest.raises(ImageProblem, match="HTTP 404"):
            await download_image(client, url + ".missing")
