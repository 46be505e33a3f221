"""Whose key the image models get (agent/models/images.py `image_models`): the roles' rule,
and the image fallback borrowing the image model's key where it goes to the same place."""

from __future__ import annotations

import pytest

from custom_components.langgraph_conversation.agent.models import ModelAccess, image_models

ENTRY = ModelAccess("openai/gpt-4o-mini", "sk-entry", None)
LOCAL = ModelAccess("openai/llama", "sk-local", "http://192.168.1.10:8000/v1")
NONE = (None, None, None)


@pytest.mark.parametrize(
    ("entry", "image", "expected"),
    [
        # Same provider, no base URL of its own: the entry's key (and base URL).
        (ENTRY, ("openai/gpt-image-1", None, None), ModelAccess("openai/gpt-image-1", "sk-entry")),
        (LOCAL, ("openai/sd", " ", ""), ModelAccess("openai/sd", "sk-local", LOCAL.api_base)),
        # Another provider or another server: no key from the entry.
        (
            ENTRY,
            ("gemini/imagen-4.0-generate-001", None, None),
            ModelAccess("gemini/imagen-4.0-generate-001"),
        ),
        (
            ENTRY,
            ("openai/sd", None, "http://10.0.0.2/v1"),
            ModelAccess("openai/sd", None, "http://10.0.0.2/v1"),
        ),
        # A key of its own is kept, trimmed.
        (ENTRY, (" gemini/x ", " gm ", None), ModelAccess("gemini/x", "gm")),
    ],
)
def test_image_model_key(
    entry: ModelAccess, image: tuple[str | None, ...], expected: ModelAccess
) -> None:
    models = image_models(entry, image)  # type: ignore[arg-type]
    assert models is not None
    assert models.main == expected
    assert models.fallback is None


@pytest.mark.parametrize("image", [NONE, ("", "sk", "http://x"), ("  ", None, None)])
def test_no_image_model_no_images(image: tuple[str | None, ...]) -> None:
    """Without an image model there are no images, whatever the fallback says."""
    assert image_models(ENTRY, image, ("openai/dall-e-3", None, None)) is None  # type: ignore[arg-type]


GEMINI_BASE = "http://127.0.0.1:9000/v1beta"


@pytest.mark.parametrize(
    ("fallback", "expected"),
    [
        # The entry's provider and place: the entry's key.
        (("openai/dall-e-3", None, None), ModelAccess("openai/dall-e-3", "sk-entry")),
        # The image model's provider and server: the image model's key and base URL.
        (
            ("gemini/gemini-2.5-flash-image", None, None),
            ModelAccess("gemini/gemini-2.5-flash-image", "gm", GEMINI_BASE),
        ),
        (
            ("gemini/gemini-2.5-flash-image", None, GEMINI_BASE + "/"),
            ModelAccess("gemini/gemini-2.5-flash-image", "gm", GEMINI_BASE + "/"),
        ),
        # Same provider, another server: nobody's key.
        (
            ("gemini/imagen-3", None, "http://10.9.9.9/v1beta"),
            ModelAccess("gemini/imagen-3", None, "http://10.9.9.9/v1beta"),
        ),
        # Its own key wins.
        (("gemini/imagen-3", "gm-2", None), ModelAccess("gemini/imagen-3", "gm-2")),
    ],
)
def test_image_fallback_key(fallback: tuple[str | None, ...], expected: ModelAccess) -> None:
    models = image_models(ENTRY, ("gemini/imagen-4.0-generate-001", "gm", GEMINI_BASE), fallback)  # type: ignore[arg-type]
    assert models is not None
    assert models.main == ModelAccess("gemini/imagen-4.0-generate-001", "gm", GEMINI_BASE)
    assert models.fallback == expected
