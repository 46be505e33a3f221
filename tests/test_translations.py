"""Every shipped translation is complete and loads as itself in Home Assistant.

Generated over every file and every string: the same keys as en.json (the source, equal to
strings.json), the same placeholders, plain non-empty strings without references, and no
string left in English where English words would be wrong. Then Home Assistant's own
translation loader reads each language, and every string must come back as written (the
loader silently puts English in place of a string whose placeholders differ).
"""

from __future__ import annotations

import json
from pathlib import Path
import re
from typing import Any

import pytest

from custom_components.langgraph_conversation.const import DOMAIN
from homeassistant.core import HomeAssistant
from homeassistant.helpers.translation import async_get_translations

TRANSLATIONS = Path(__file__).parents[1] / "custom_components/langgraph_conversation/translations"
# The languages the README promises, besides English.
PROMISED = {
    "de", "fr", "es", "it", "nl", "pl", "pt", "pt-BR", "sv", "da", "nb", "fi", "cs", "ru",
    "uk", "zh-Hans",
}  # fmt: skip
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
# Strings that are the same in every language: names of products and formats.
SAME_EVERYWHERE = {
    "LangGraph Conversation", "PostgreSQL", "SQLite", "LiteLLM", "Ollama", "URL", "API",
    "Assist", "OK", "{service} ({name})", "{first}, {rest}", "Name", "Prompt", "Token", "Text",
}  # fmt: skip
# An English word of four letters or more: a string made only of such words and names
# would be untranslated.
ENGLISH_WORD = re.compile(r"[A-Za-z]{4,}")


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            flat.update(_flatten(value, path))
        else:
            flat[path] = value
    return flat


def _load(language: str) -> dict[str, Any]:
    return json.loads((TRANSLATIONS / f"{language}.json").read_text(encoding="utf-8"))


ENGLISH = _flatten(_load("en"))
LANGUAGES = sorted(path.stem for path in TRANSLATIONS.glob("*.json") if path.stem != "en")


def test_every_promised_language_is_shipped() -> None:
    """The README's list and the files agree."""
    assert set(LANGUAGES) == PROMISED


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_translation_has_every_key_and_placeholder(language: str) -> None:
    """Same keys as English, every value a non-empty plain string with the same placeholders,
    no references, and no string left in English."""
    text = (TRANSLATIONS / f"{language}.json").read_text(encoding="utf-8")
    assert text.endswith("\n")
    assert "[%key:" not in text
    translated = _flatten(json.loads(text))
    assert sorted(set(ENGLISH) - set(translated)) == [], "missing"
    assert sorted(set(translated) - set(ENGLISH)) == [], "not in English"
    left_in_english = []
    for key, english in ENGLISH.items():
        value = translated[key]
        assert isinstance(value, str), key
        assert value.strip(), key
        assert value == value.strip() or english != english.strip(), key
        assert sorted(PLACEHOLDER.findall(value)) == sorted(PLACEHOLDER.findall(english)), key
        if value == english and value not in SAME_EVERYWHERE and ENGLISH_WORD.search(english):
            left_in_english.append(key)
    assert left_in_english == []


@pytest.mark.parametrize("language", LANGUAGES)
async def test_home_assistant_loads_each_string_as_written(
    hass: HomeAssistant, language: str
) -> None:
    """Home Assistant's loader keeps every string of the language (none replaced by English
    for a placeholder it would reject)."""
    translated = _flatten(_load(language))
    for category in sorted({key.split(".", 1)[0] for key in translated}):
        loaded = await async_get_translations(hass, language, category, {DOMAIN})
        for key, value in translated.items():
            if key.startswith(f"{category}."):
                assert loaded[f"component.{DOMAIN}.{key}"] == value, key
