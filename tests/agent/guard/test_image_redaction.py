"""Images out of logs and redacted texts: a base64 image data URL keeps its type only."""

from __future__ import annotations

import base64
import json
import logging
import random
from typing import Any

import pytest

from custom_components.langgraph_conversation.agent.guard import redaction


def _images(count: int) -> list[Any]:
    """Seeded images of every format and size, some with bytes that base64 writes as "/"
    and "+" (escaped as "\\/" in JSON)."""
    rng = random.Random(7)
    kinds = ["image/jpeg", "image/png", "image/webp", "image/gif", "image/svg+xml"]
    images = [
        (rng.choice(kinds), bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000))))
        for _ in range(count)
    ]
    return [
        pytest.param(kind, data, id=f"{index}-{kind}-{len(data)}")
        for index, (kind, data) in enumerate(images)
    ]


@pytest.mark.parametrize(("mime_type", "data"), _images(40))
def test_an_image_data_url_keeps_only_its_type(mime_type: str, data: bytes) -> None:
    """As text, in a JSON body (slashes escaped or not) and in a Python repr of a request,
    the image's bytes are gone and the text around it stays."""
    encoded = base64.b64encode(data).decode()
    url = f"data:{mime_type};base64,{encoded}"
    body = {"messages": [{"content": [{"type": "image_url", "image_url": {"url": url}}]}]}
    for text in (
        f"before {url} after",
        json.dumps(body),
        json.dumps(body).replace("/", "\\/"),
        repr(body),
    ):
        redacted = redaction.redact(text).replace("\\/", "/")
        assert encoded[-16:] not in redacted
        assert f"data:{mime_type};base64,{redaction.IMAGE_PLACEHOLDER}" in redacted
    assert redaction.redact(f"before {url} after") == (
        f"before data:{mime_type};base64,{redaction.IMAGE_PLACEHOLDER} after"
    )


def test_text_without_images_is_untouched() -> None:
    """Ordinary base64 (not an image data URL) and words stay as they are."""
    text = "token=abc base64,QUJD data:text/plain;base64,QUJD the base64, encoding"
    assert redaction.redact_images(text) == text


def test_a_log_line_with_an_image_is_cut(caplog: pytest.LogCaptureFixture) -> None:
    """LiteLLM's logger at DEBUG: the record reaching handlers holds no image bytes."""
    redaction.install_redaction()
    encoded = base64.b64encode(bytes(range(256)) * 8).decode()
    logger = logging.getLogger("LiteLLM")
    with caplog.at_level(logging.DEBUG, logger="LiteLLM"):
        logger.debug("POST -d '%s'", {"url": f"data:image/jpeg;base64,{encoded}"})
    assert encoded[:40] not in caplog.text
    assert redaction.IMAGE_PLACEHOLDER in caplog.text
