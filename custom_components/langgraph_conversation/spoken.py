"""The sentences the integration itself speaks, in the language of the request.

The model answers in the person's language by itself; the sentences that are ours (the
confirmation question, a failed model call, the notice that a request was cut, the
window-too-small sentence) come from our translation files. Home Assistant words an
exception's message in English whatever anyone speaks (`async_get_exception_message`), and
a household may talk to an English and a German satellite in the same minute, so each turn
takes a `Phrasebook` for the language of its request (`ConversationInput.language`): that
language if we ship it (or its base language: "de-CH" → "de"), else the server's, else
English. Its sentences come from Home Assistant's own translation cache (English under
every other language for a key a file lacks).

The confirmation question names each held action. In English those are our own words
("unlock Front Door"); in every other language the service's own name from Home
Assistant's translations ("Schloss entriegeln") with the entity's name after it
("Schloss entriegeln (Haustür)"), joined as the language joins a list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
import functools
from pathlib import Path
import re

from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers.translation import async_get_translations

from .const import DOMAIN

ENGLISH = "en"
_TRANSLATIONS = Path(__file__).parent / "translations"

# Requests arrive with BCP 47 tags; our files (like Home Assistant's) are named by the
# tags below. A script or region that names one of them differently maps onto it.
_ALIASES = {
    "zh": "zh-Hans",
    "zh-cn": "zh-Hans",
    "zh-sg": "zh-Hans",
    "zh-hans-cn": "zh-Hans",
    "no": "nb",
    "nn": "nb",
    "nb-no": "nb",
    "pt-pt": "pt",
}

# How each language groups the digits of a large number (English and Chinese: a comma): a
# comma read aloud by a German voice is a decimal point, "8,000" becomes "eight point zero".
_DIGIT_GROUPS = {
    **dict.fromkeys(("de", "da", "nl", "it", "es", "pt", "pt-BR"), "."),
    **dict.fromkeys(("fr", "sv", "nb", "fi", "cs", "pl", "ru", "uk"), "\u00a0"),
}

# The services whose names a question may use: those the effect gate holds (locks, alarm
# panels, covers, the relays beside them, scripts and automations) and any a user marked.
QUESTION_DOMAINS = frozenset(
    {"lock", "alarm_control_panel", "cover", "button", "switch", "script", "automation"}
)


# Our own words for the critical services, where Home Assistant has none in a language.
_OUR_VERBS = {
    ("lock", "unlock"): "unlock",
    ("lock", "open"): "open",
    ("cover", "open_cover"): "open",
    ("alarm_control_panel", "alarm_disarm"): "disarm",
    ("script", "turn_on"): "run",
    ("automation", "trigger"): "run",
}


@functools.cache
def shipped_languages() -> frozenset[str]:
    """The languages we have a translation file for (a directory listing: blocking)."""
    return frozenset(path.stem for path in _TRANSLATIONS.glob("*.json"))


# The listing, once read: the files ship with the integration and change only with an
# update, which restarts Home Assistant. Read per turn it cost an executor round trip.
_shipped: frozenset[str] | None = None


async def async_shipped_languages(hass: HomeAssistant) -> frozenset[str]:
    """`shipped_languages`, read in the executor the first time only."""
    global _shipped
    if _shipped is None:
        _shipped = await hass.async_add_executor_job(shipped_languages)
    return _shipped


def resolve_language(requested: str | None, server: str | None, shipped: Iterable[str]) -> str:
    """The shipped language closest to `requested`, else to the server's, else English."""
    available = {code.casefold(): code for code in shipped}
    for tag in (requested, server):
        if not isinstance(tag, str) or not tag.strip():
            continue
        tag = tag.strip().replace("_", "-").casefold()
        base = tag.split("-", 1)[0]
        for candidate in (tag, _ALIASES.get(tag, ""), base, _ALIASES.get(base, "")):
            if candidate and candidate.casefold() in available:
                return available[candidate.casefold()]
    return ENGLISH


# A BCP 47 language tag as requests carry them ("de", "pt-BR", "zh-Hans", "de_CH"): a
# language, then short subtags of letters and digits.
_LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8}){0,3}")


def language_line(requested: str | None) -> str | None:
    """The prompt's line asking for answers in the request's language, or None in English.

    The model usually answers in the language it was spoken to, but not always where the
    request does not show it: a short "OK", a name, a request from an automation, tool
    results in English. A few tokens say it for every other language; English, every
    model's default, costs none. The language comes with the request (any API caller may
    send any text there), so only a language tag is written into the prompt, never text.
    """
    if not isinstance(requested, str) or not _LANGUAGE_TAG.fullmatch(tag := requested.strip()):
        return None
    if tag.replace("_", "-").split("-", 1)[0].casefold() == ENGLISH:
        return None
    return f"Answer in the language of the request ({tag})."


@dataclass(frozen=True, slots=True)
class Phrasebook:
    """Our sentences and the held actions' words in one language."""

    language: str
    # Flattened translations as Home Assistant caches them: our exceptions, and the
    # services of QUESTION_DOMAINS (English under the language for what a file lacks).
    ours: Mapping[str, str] = field(default_factory=dict)
    services: Mapping[str, str] = field(default_factory=dict)
    # The same services' English names: a name equal to its English one is Home
    # Assistant's fallback for a translation it lacks (Italian has none for locks).
    english_services: Mapping[str, str] = field(default_factory=dict)

    def sentence(self, key: str, placeholders: Mapping[str, str] | None = None) -> str:
        """One of our sentences (`exceptions.<key>.message`), filled in."""
        message = self.ours.get(f"component.{DOMAIN}.exceptions.{key}.message")
        if not message:
            return key
        try:
            return message.format(**(placeholders or {}))
        except (KeyError, IndexError, ValueError):
            # A translation with a broken placeholder must not break the turn.
            return message

    def error(self, key: str, placeholders: Mapping[str, str] | None = None) -> HomeAssistantError:
        """An error whose message is our sentence in this language.

        The translation key stays on it for anything that reads keys; the message is what
        Home Assistant speaks (its conversation agent manager says `str(err)`). Like Home
        Assistant's own exception messages, it drops a final full stop.
        """
        return HomeAssistantError(
            self.sentence(key, placeholders).rstrip("."),
            translation_domain=DOMAIN,
            translation_key=key,
            translation_placeholders=dict(placeholders or {}),
        )

    def number(self, value: int) -> str:
        """A whole number as this language writes it: 8,000 / 8.000 / 8 000."""
        return f"{value:,}".replace(",", _DIGIT_GROUPS.get(self.language, ","))

    def join(self, items: Iterable[str]) -> str:
        """A list as this language writes one: "A, B and C" / "A, B und C" / "A、B和C"."""
        items = list(items)
        if not items:
            return ""
        joined = items[-1]
        if len(items) > 1:
            joined = self.sentence("list_pair", {"first": items[-2], "second": joined})
        for item in reversed(items[:-2]):
            joined = self.sentence("list_more", {"first": item, "rest": joined})
        return joined

    def question(self, actions: Iterable[str]) -> str:
        """The question that asks for a yes to the held actions."""
        return self.sentence("confirm_actions", {"actions": self.join(actions)})

    def action(
        self, domain: str, service: str, name: str, detail: Iterable[str] = ()
    ) -> str | None:
        """How the question names one effect outside English: the service's own name and
        the entity's ("Schloss entriegeln (Haustür)"); `detail` names what a script would
        touch. None in English (the effect gate's own words: "unlock Front Door") or where
        Home Assistant has no name for the service."""
        if self.language == ENGLISH:
            return None
        key = f"component.{domain}.services.{service}.name"
        service_name = self.services.get(key)
        if not service_name or service_name == self.english_services.get(key):
            # Home Assistant has no name for it in this language: our own verb, if any.
            verb = _OUR_VERBS.get((domain, service))
            service_name = self.sentence(f"verb_{verb}") if verb else None
        if not service_name:
            return None
        if detail := list(detail):
            name = f"{name}: {self.join(detail)}"
        return self.sentence("confirm_action", {"service": service_name, "name": name})


async def async_phrasebook(
    hass: HomeAssistant, requested: str | None, marked: Iterable[str] = ()
) -> Phrasebook:
    """The phrasebook for a request in `requested` (None: the server's language), with the
    service names of the domains of `marked` entities (those the user marked "always needs
    my yes") too.

    Home Assistant's translation cache loads each language once; later turns read it.
    """
    shipped = await async_shipped_languages(hass)
    language = resolve_language(requested, hass.config.language, shipped)
    ours = await async_get_translations(hass, language, "exceptions", {DOMAIN})
    domains = (QUESTION_DOMAINS | {entity_id.split(".", 1)[0] for entity_id in marked}) & (
        hass.config.components
    )
    if not domains or language == ENGLISH:
        return Phrasebook(language, ours)
    services = await async_get_translations(hass, language, "services", domains)
    english = await async_get_translations(hass, ENGLISH, "services", domains)
    return Phrasebook(language, ours, services, english)
