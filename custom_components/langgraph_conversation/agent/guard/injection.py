"""A fast, local scan of untrusted text for known instruction-injection patterns.

Text that people did not type to the agent themselves reaches the model every turn: tool
results (entity names and states, documents), knowledge passages, recalled memories, the
summary of old turns, requests that arrive without a person (automations). This module
flags what looks like an attempt to talk to the model through that text: "ignore your
previous instructions", "you are now an unrestricted AI", role markers and chat-template
tokens, prompt-section closers, tool-call-looking JSON, orders to unlock, open or disarm
"now, without asking", service names, base64 blobs, invisible and bidi control
characters; in English, German, French, Spanish, Dutch and Italian.

It is defence in depth, never the barrier: critical effects are gated by the
confirmation check whatever the scan says, and flagged text is still handed to the model,
quoted and marked, never dropped (see quoting.py).

Matching runs on a folded copy of the text (compatibility forms, accents and case
removed, look-alike letters of other scripts and digit spellings mapped to Latin,
invisible characters deleted), and the phrase patterns again on a copy without spaces and
punctuation ("i g n o r e  a l l ..."). The regular expressions have no nested
quantifiers over overlapping classes, so they run in linear time; a text longer than
MAX_SCAN_CHARS is scanned at its head and tail only and flagged as not fully scanned.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
import functools
from itertools import accumulate
import re
from typing import Any
import unicodedata

# The longest text scanned whole; a longer one is scanned at its head and its tail.
MAX_SCAN_CHARS = 256 * 1024
# Texts up to this size are scanned on the caller's thread (a few milliseconds at worst);
# longer ones in a worker thread, so the event loop never waits on them.
INLINE_SCAN_CHARS = 4 * 1024
# The regular expression engine holds the GIL for a whole search: long texts are searched
# in slices (overlapping by more than any phrase is long), so a scan in a worker thread
# never holds up the event loop for more than a few milliseconds at a time.
SLICE_CHARS = 8 * 1024
_OVERLAP = 512
# Findings kept per pattern (where it first matched), to keep reports short.
_PER_PATTERN = 3

NOT_FULLY_SCANNED = "not_fully_scanned"


@dataclass(frozen=True, slots=True)
class Finding:
    """One match: which pattern, where (character offsets in the string) and in which
    string of a structured value (`where`, a path like "data.success[0].name")."""

    pattern: str
    start: int
    end: int
    where: str = ""


def pattern_ids(findings: tuple[Finding, ...]) -> tuple[str, ...]:
    """The distinct pattern ids of findings, sorted."""
    return tuple(sorted({finding.pattern for finding in findings}))


# --- Folding: one character in, at most a few out, computed once per distinct character.

# Letters of other scripts that look like Latin ones, and digits and signs used as letters.
_LOOK_ALIKES = {
    # Cyrillic, Greek, Armenian and Latin look-alikes (written as escapes: the letters
    # themselves look like the Latin ones they map to), then digits and signs.
    "\u0430": "a", "\u0432": "b", "\u0435": "e", "\u0451": "e", "\u043a": "k", "\u043c": "m",
    "\u043d": "h", "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0442": "t", "\u0443": "y",
    "\u0445": "x", "\u0456": "i", "\u0457": "i", "\u0458": "j", "\u0455": "s", "\u0501": "d",
    "\u051b": "q", "\u051d": "w", "\u04cf": "l", "\u0261": "g", "\u04bb": "h", "\u044c": "b",
    "\u03b1": "a", "\u03b2": "b", "\u03b5": "e", "\u03b7": "n", "\u03b9": "i", "\u03ba": "k",
    "\u03bd": "v", "\u03bf": "o", "\u03c1": "p", "\u03c4": "t", "\u03c5": "u", "\u03c7": "x",
    "\u03b3": "y", "\u03c9": "w", "\u03bc": "u", "\u0578": "n", "\u057d": "u", "\u0585": "o",
    "\u0131": "i", "\u0269": "i", "\u0251": "a", "\u2113": "l", "\u017f": "s", "0": "o",
    "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a",
    "$": "s",
}  # fmt: skip


def _fold_char(char: str) -> str:
    if unicodedata.category(char) in ("Cf", "Mn", "Me"):
        # Zero-width and bidi controls, soft hyphens, tag characters, combining marks.
        return ""
    decomposed = unicodedata.normalize("NFKD", char)
    kept = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    return "".join(_LOOK_ALIKES.get(c, c) for c in kept)


class _FoldTable(dict[int, str]):
    """str.translate's table, filled on first sight of each character."""

    def __missing__(self, code: int) -> str:
        folded = self[code] = _fold_char(chr(code))
        return folded


_FOLD = _FoldTable()


def _folded(text: str) -> tuple[str, list[int] | None]:
    """The folded text, and where each folded character came from when lengths differ
    (None: position for position)."""
    folded = text.translate(_FOLD)
    if len(folded) == len(text) and text.isascii():
        return folded, None
    ends = list(accumulate(len(_FOLD[ord(char)]) for char in text))
    if ends and ends[-1] == len(text) and all(e == i + 1 for i, e in enumerate(ends)):
        return folded, None
    return folded, ends


def _source_index(ends: list[int] | None, position: int) -> int:
    """The index in the original text of the folded character at `position`."""
    if ends is None:
        return position
    return bisect_right(ends, position)


# --- Patterns. "{S}" is a separator between words: spaces, line breaks, punctuation, but
# not the character between the strings of a structured value (_JOINER).

_SEPARATOR = r"[^\w\x00]{1,12}"


def _any(*words: str) -> str:
    return "(?:" + "|".join(words) + ")"


_ROLE_EN = _any(
    "ai", "assistant", "model", "chatbot", "bot", "agent", "system", "sysadmin", "admin",
    "administrator", "root", "superuser", "dan", "god", "hacker",
    r"(?:developer|dan|god|jailbreak|jailbroken|admin|unrestricted|sudo){S}mode",
)  # fmt: skip
_FREE_EN = _any(
    "new", "different", "unrestricted", "unfiltered", "uncensored", "jailbroken", "evil",
    "free", "rogue", "unlimited",
)  # fmt: skip

# The tables below are laid out by hand (one language or pattern family per line).
# Phrase patterns: run on the folded text and again on it without separators.
# fmt: off
_PHRASES: dict[str, list[str]] = {
    "ignore_instructions": [
        # en
        r"\b{V}{S}(?:(?:all|any|every)(?:{S}of)?(?:{S}(?:the|your|these|those|my))?(?:{S}{Q})?"
        r"|(?:(?:the|your|my|these|those){S})?{Q}|your|my){S}{N}\b".format(
            V=_any("ignore", "disregard", "forget", "skip", "override", "bypass", "neglect"),
            Q=_any(
                "previous", "prior", "above", "earlier", "preceding", "former", "original",
                "initial", "system", "safety", "security", "foregoing",
            ),
            N=_any(
                r"instructions?", r"rules?", r"directions?", r"directives?", r"prompts?",
                r"guidelines?", r"commands?", r"constraints?", "polic(?:y|ies)", r"guardrails?",
                "programming", r"restrictions?", "context",
            ),
            S="{S}",
        ),
        # de
        r"\b{V}(?:{S}sie)?{S}(?:alle(?:{S}(?:deine|die|ihre|eure))?(?:{S}{Q})?"
        r"|(?:(?:die|deine|ihre|eure){S})?{Q}|deine|ihre|eure){S}{N}\b".format(
            V=_any("ignoriere", "ignorier", "ignorieren", "vergiss", "vergessen", "missachte",
                   "missachten", "ubergehe", "ubergehen"),
            Q=_any("vorherigen", "bisherigen", "vorigen", "obigen", "fruheren",
                   "ursprunglichen", "system"),
            N=_any("anweisungen", "instruktionen", "regeln", "vorgaben", "befehle",
                   "richtlinien", "systemanweisungen", "anweisung"),
            S="{S}",
        ),
        # fr
        r"\b{V}{S}(?:toutes{S}(?:les|tes|vos|ces){S}{N}|(?:tes|vos){S}{N}|(?:les|ces){S}{N}{S}{Q})".format(
            V=_any("ignore", "ignorez", "ignorer", "oublie", "oubliez", "oublier", "neglige",
                   "negligez"),
            Q=_any("precedentes", "anterieures", "ci{S}dessus", "du{S}systeme", "initiales",
                   "d{S}origine"),
            N=_any("instructions", "consignes", "regles", "directives"),
            S="{S}",
        ),
        # es
        r"\b{V}{S}(?:todas{S}(?:las|tus|sus){S}{N}|(?:tus|sus){S}{N}|las{S}{N}{S}{Q})".format(
            V=_any("ignora", "ignore", "ignorad", "ignorar", "olvida", "olvide", "olvidad",
                   "olvidar", "omite", "descarta"),
            Q=_any("anteriores", "previas", "de{S}arriba", "del{S}sistema", "iniciales",
                   "originales"),
            N=_any("instrucciones", "reglas", "indicaciones", "directrices", "ordenes"),
            S="{S}",
        ),
        # nl
        r"\b{V}{S}(?:alle(?:{S}(?:je|jouw|uw|de))?(?:{S}{Q})?|(?:(?:je|jouw|uw|de){S})?{Q}"
        r"|je|jouw|uw){S}{N}\b".format(
            V=_any("negeer", "negeren", "vergeet", "vergeten"),
            Q=_any("vorige", "eerdere", "voorgaande", "bovenstaande", "oorspronkelijke"),
            N=_any("instructies", "instructie", "regels", "opdrachten", "richtlijnen",
                   "aanwijzingen"),
            S="{S}",
        ),
        # it
        r"\b{V}{S}(?:tutte{S}(?:le{S})?(?:tue|sue|le){S}{N}|(?:le{S})?(?:tue|sue){S}{N}"
        r"|le{S}{N}{S}{Q})".format(
            V=_any("ignora", "ignori", "ignorate", "ignorare", "dimentica", "dimentichi",
                   "dimenticate", "trascura"),
            Q=_any("precedenti", "di{S}sopra", "iniziali", "originali", "del{S}sistema"),
            N=_any("istruzioni", "regole", "indicazioni", "direttive"),
            S="{S}",
        ),
    ],
    "role_override": [
        r"\byou{S}are{S}now{S}(?:(?:a|an|the|my|in){S})?(?:{F}{S})?{R}\b".format(
            F=_FREE_EN, R=_ROLE_EN, S="{S}"
        ),
        r"\bfrom{S}now{S}on{S}you{S}(?:are|will{S}be|act{S}as){S}(?:(?:a|an|the|my){S})?"
        r"(?:{F}{S})?{R}\b".format(F=_FREE_EN, R=_ROLE_EN, S="{S}"),
        r"\b(?:act|behave|respond){S}as{S}(?:(?:a|an|if{S}you{S}were{S}(?:a|an)?){S})?"
        r"(?:unrestricted|unfiltered|uncensored|jailbroken|evil|dan|root|sysadmin)\b",
        r"\bpretend{S}(?:to{S}be|you{S}are|that{S}you{S}are){S}(?:(?:a|an|the){S})?"
        r"(?:{F}{S})?{R}\b".format(F=_FREE_EN, R=_ROLE_EN, S="{S}"),
        r"\b(?:dan|god|jailbreak){S}mode{S}(?:is{S})?(?:enabled|activated|on)\b",
        # de
        r"\b(?:du{S}bist|sie{S}sind){S}(?:jetzt|nun|ab{S}sofort|ab{S}jetzt|von{S}nun{S}an)"
        r"{S}(?:(?:ein|eine|der|die|mein|meine){S})?(?:(?:neuer|neue|uneingeschrankter|"
        r"uneingeschrankte|freier|freie|boser|bose){S})?{R}\b".format(
            R=_any("ki", "assistent", "assistentin", "modell", "bot", "chatbot", "system",
                   "administrator", "admin", "root", "agent", "dan"),
            S="{S}",
        ),
        r"\bab{S}(?:jetzt|sofort){S}bist{S}du{S}(?:(?:ein|eine|der|die){S})?(?:\w+{S})?"
        r"(?:ki|assistent|modell|bot|system|administrator|admin|root|dan)\b",
        # fr
        r"\b(?:tu{S}es|vous{S}etes){S}(?:maintenant|desormais|a{S}partir{S}de{S}maintenant)"
        r"{S}(?:(?:un|une|le|la|mon|l){S})?(?:(?:nouvel|nouveau|nouvelle|libre){S})?{R}\b".format(
            R=_any("ia", "assistant", "assistante", "modele", "bot", "chatbot", "systeme",
                   "administrateur", "admin", "root", "agent", "dan"),
            S="{S}",
        ),
        # es
        r"\b(?:ahora|a{S}partir{S}de{S}ahora|desde{S}ahora)(?:{S}(?:tu|usted))?{S}"
        r"(?:eres|seras|es){S}(?:(?:un|una|el|la|mi){S})?(?:(?:nuevo|nueva|libre){S})?{R}\b".format(
            R=_any("ia", "asistente", "modelo", "bot", "chatbot", "sistema", "administrador",
                   "admin", "root", "agente", "dan"),
            S="{S}",
        ),
        # nl
        r"\b(?:(?:je|jij|u){S}bent{S}(?:nu|vanaf{S}nu)|vanaf{S}nu{S}ben{S}(?:je|jij))"
        r"{S}(?:(?:een|de|het|mijn){S})?(?:(?:nieuwe|nieuw|vrije|onbeperkte){S})?{R}\b".format(
            R=_any("ai", "ki", "assistent", "model", "bot", "chatbot", "systeem", "beheerder",
                   "admin", "root", "agent", "dan"),
            S="{S}",
        ),
        # it
        r"\b(?:ora|adesso|da{S}ora{S}in{S}poi|d{S}ora{S}in{S}poi)(?:{S}tu)?{S}sei{S}"
        r"(?:(?:un|una|il|la|lo|mio|l){S})?(?:(?:nuovo|nuova|libero){S})?{R}\b".format(
            R=_any("ia", "assistente", "modello", "bot", "chatbot", "sistema",
                   "amministratore", "admin", "root", "agente", "dan"),
            S="{S}",
        ),
    ],
    "skip_confirmation": [
        r"\bthe{S}(?:user|owner|person|homeowner|resident)s?{S}(?:has{S}|have{S})?already{S}"
        r"(?:agreed|confirmed|approved|consented|authori[sz]ed|said{S}yes|given{S}"
        r"(?:consent|permission))",
        r"\b(?:do{S}not|don(?:{S})?t|never|no{S}need{S}to){S}(?:ask|request|wait{S}for|seek)"
        r"(?:{S}(?:the{S}user|anyone|me|them|for)){0,2}{S}(?:confirmation|permission|approval|"
        r"consent)",
        r"\bwithout{S}(?:asking|confirming|checking{S}with){S}(?:the{S}user|anyone|first|"
        r"for{S}(?:confirmation|permission))",
        r"\b(?:confirmation|permission|approval){S}(?:is{S})?(?:already{S})?granted\b",
        # de
        r"\bohne{S}(?:den{S}(?:nutzer|benutzer){S})?(?:zu{S}fragen|nachzufragen|ruckfrage{S}"
        r"beim{S}(?:nutzer|benutzer))",
        r"\bder{S}(?:nutzer|benutzer|besitzer){S}hat{S}(?:bereits|schon){S}(?:zugestimmt|"
        r"bestatigt|ja{S}gesagt)",
        # fr
        r"\bsans{S}(?:demander|confirmation{S}de{S}l{S}utilisateur|lui{S}demander)",
        r"\bl{S}utilisateur{S}a{S}deja{S}(?:accepte|confirme|approuve|dit{S}oui)",
        # es
        r"\bsin{S}(?:preguntar|pedir{S}confirmacion|confirmacion{S}del{S}usuario)",
        r"\bel{S}usuario{S}ya{S}(?:acepto|confirmo|aprobo|dijo{S}que{S}si)",
        # nl
        r"\bzonder{S}(?:te{S}vragen|bevestiging{S}van{S}de{S}gebruiker|het{S}te{S}vragen)",
        r"\bde{S}gebruiker{S}heeft{S}al{S}(?:ingestemd|bevestigd|ja{S}gezegd)",
        # it
        r"\bsenza{S}(?:chiedere|conferma{S}dell{S}utente)",
        r"\bl{S}utente{S}ha{S}gia{S}(?:accettato|confermato|approvato|detto{S}di{S}si)",
    ],
    "new_instructions": [
        r"\b(?:new|updated|real|actual|hidden|secret|override){S}(?:system{S})?"
        r"(?:instructions|directives|prompt|orders)[\s_\-]{0,8}:",
        r"\bsystem{S}(?:prompt|instructions|override)[\s_\-]{0,8}:",
        r"\b(?:reveal|show|print|output|repeat|leak|send|tell{S}me){S}(?:me{S})?(?:your|the{S}"
        r"(?:system|hidden|secret|initial)){S}(?:system{S})?(?:prompt|instructions|api(?:{S})?key|"
        r"password|secrets|credentials|token)\b",
        r"\bneue{S}(?:system)?anweisungen[\s_\-]{0,8}:",
        r"\bnouvelles{S}(?:instructions|consignes)[\s_\-]{0,8}:",
        r"\bnuevas{S}instrucciones[\s_\-]{0,8}:",
        r"\bnieuwe{S}instructies[\s_\-]{0,8}:",
        r"\bnuove{S}istruzioni[\s_\-]{0,8}:",
    ],
}

_URGENT_AFTER = {
    "en": r"(?:immediately|right{S}(?:now|away)|at{S}once|asap|without{S}(?:asking|"
    r"confirmation|confirming|permission|delay|hesitation)|now(?=[ \t]*(?:[.!]|$)))",
    "de": r"(?:sofort|umgehend|unverzuglich|ohne{S}(?:zu{S}fragen|nachzufragen))",
    "fr": r"(?:immediatement|tout{S}de{S}suite|sans{S}(?:demander|confirmation|attendre)|"
    r"maintenant(?=[ \t]*(?:[.!]|$)))",
    "es": r"(?:inmediatamente|ahora{S}mismo|enseguida|sin{S}(?:preguntar|confirmacion)|"
    r"ya(?=[ \t]*(?:[.!]|$)))",
    "nl": r"(?:onmiddellijk|meteen|zonder{S}(?:te{S}vragen|bevestiging)|nu(?=[ \t]*(?:[.!]|$)))",
    "it": r"(?:immediatamente|subito|senza{S}(?:chiedere|conferma)|ora(?=[ \t]*(?:[.!]|$)))",
}
_URGENT_BEFORE = {
    "en": r"(?:immediately|urgently|right{S}now|you{S}(?:must|should|need{S}to|have{S}to|are{S}"
    r"(?:required|instructed){S}to)|(?:assistant|ai|agent|model|bot)[ \t]*[,:]|i{S}(?:order|"
    r"command|instruct|tell){S}you{S}to|make{S}sure{S}(?:to|you))",
    "de": r"(?:du{S}musst|sie{S}mussen|sofort|umgehend)",
    "fr": r"(?:tu{S}dois|vous{S}devez|il{S}faut|immediatement)",
    "es": r"(?:debes|tienes{S}que|inmediatamente)",
    "nl": r"(?:je{S}moet|u{S}moet|onmiddellijk)",
    "it": r"(?:devi|dovete|immediatamente|subito)",
}
_ACTIONS = {
    "en": (
        _any("unlock", "disarm", "deactivate", "disable", "open", r"turn{S}off", r"switch{S}off",
             r"shut{S}(?:off|down)"),
        r"(?:(?:all|every)(?:{S}(?:of{S})?the)?{S}|the{S}|my{S})?(?:(?:front|back|main|garage|"
        r"side|patio|entrance|cellar|basement|house|home|security){S})?(?:doors?|locks?|"
        r"garage(?:{S}doors?)?|gates?|alarms?(?:{S}system)?|security{S}system|alarm{S}panel|"
        r"cameras?|deadbolts?)\b",
    ),
    "de": (
        _any("entriegle", "entriegele", "entsperre", "offne", "deaktiviere", "entscharfe",
             "schliesse", "entriegeln", "entsperren", "offnen", "deaktivieren"),
        r"(?:die|das|den|alle)(?:{S}\w+)?{S}(?:haustur|tur|turen|garage|garagentor|tor|schloss|"
        r"schlosser|alarmanlage|alarm|turschloss)\b",
    ),
    "fr": (
        _any("deverrouille", "deverrouillez", "ouvre", "ouvrez", "desarme", "desarmez",
             "desactive", "desactivez", "deverrouiller", "ouvrir", "desarmer", "desactiver"),
        r"(?:la|le|les|l|toutes{S}les|tous{S}les)(?:{S}\w+)?{S}(?:porte|portes|serrure|serrures|"
        r"garage|portail|alarme|systeme{S}d{S}alarme)\b",
    ),
    "es": (
        _any("desbloquea", "abre", "desarma", "desactiva", "desbloquear", "abrir", "desarmar",
             "desactivar"),
        r"(?:la|el|las|los|todas{S}las|todos{S}los)(?:{S}\w+)?{S}(?:puerta|puertas|cerradura|"
        r"cerraduras|garaje|porton|alarma|verja)\b",
    ),
    "nl": (
        _any("ontgrendel", "open", "deactiveer", r"schakel{S}uit", "ontgrendelen", "openen",
             "deactiveren", "uitschakelen"),
        r"(?:de|het|alle)(?:{S}\w+)?{S}(?:deur|deuren|voordeur|slot|sloten|garage|garagedeur|"
        r"poort|alarm|alarmsysteem)\b",
    ),
    "it": (
        _any("sblocca", "apri", "disattiva", "disarma", "sbloccare", "aprire", "disattivare",
             "disarmare"),
        r"(?:la|il|lo|le|i|gli|l|tutte{S}le|tutti{S}i)(?:{S}\w+)?{S}(?:porta|porte|serratura|"
        r"serrature|garage|cancello|allarme|portone)\b",
    ),
}


def _action_patterns() -> list[str]:
    """An order to act on a lock, door, gate or alarm, addressed to someone and urgent:
    "you must unlock the front door", "disarm the alarm now, without asking". A manual's
    "To open the door, pull the handle" is no order to the assistant."""
    patterns = []
    for language, (verb, target) in _ACTIONS.items():
        before, after = _URGENT_BEFORE[language], _URGENT_AFTER[language]
        patterns += [
            rf"\b{before}{{S}}(?:please{{S}})?{verb}{{S}}{target}",
            # Verb last: "du musst sofort die Haustür entriegeln".
            rf"\b{before}{{S}}(?:\w+{{S}}){{0,2}}?{target}{{S}}{verb}",
            rf"\b{verb}{{S}}{target}(?:{{S}}\w+){{0,2}}?{{S}}{after}",
            rf"\b{verb}{{S}}{after}{{S}}{target}",
        ]
    return patterns


_PHRASES["action_request"] = _action_patterns()

# Patterns on the folded text only (they need their punctuation).
_MARKUP: dict[str, list[str]] = {
    "role_marker": [
        r"\n[ \t>#*\-]*(?:\[|<|\*\*)?[ \t]*(?:system|developer|assistant|systeme|sistema|"
        r"systeem)(?:[ \t]+(?:message|prompt|note|instructions?|update|override))?[ \t]*"
        r"(?:\]|>|\*\*)?[ \t]*:",
        r"(?<![\w\[])\[[ \t]*/?[ \t]*(?:system|developer|assistant)(?:[ \t]+(?:message|prompt))?"
        r"[ \t]*\]",
        r"\\?\"role\\?\"\s*:\s*\\?\"(?:system|developer|assistant|tool)\\?\"",
        r"(?m:^[ \t]*#{1,6}[ \t]*(?:system|developer)[ \t]+(?:prompt|message|instructions?)"
        r"[ \t]*$)",
    ],
    "chat_template_token": [
        r"<\|[a-z_]{2,32}\|>",
        r"\[/?inst\]",
        r"<</?sys>>",
        r"<(?:start|end)_of_turn>",
        r"<\|?(?:begin|end)_of_text\|?>",
    ],
    "section_tag": [
        r"<\s*/?\s*(?:conversation_summary|memories|memory|knowledge|system|system_prompt|"
        r"instructions|context|tool_result|tool_call|function_call|tool_use|documents?|user|"
        r"assistant|developer|prompt|im_start|im_end)\s*/?\s*>",
    ],
    "tool_call_json": [
        # Quotes may come escaped (JSON written inside a JSON string).
        r"\\?\"(?:tool_calls?|function_call|tool_use|tool_name)\\?\"\s*:",
        r"\{\s*\\?\"(?:name|tool|function)\\?\"\s*:\s*\\?\"[^\"\\\n]{1,80}\\?\"\s*,\s*"
        r"\\?\"(?:arguments|parameters|args|input|tool_input)\\?\"\s*:",
        # The same in YAML: "tool: HassTurnOff" and "arguments:" on the next line.
        r"\b(?:tool|function|tool_name)[ \t]*:\s*\S+[ \t]*(?:\n|\\n)[\s>-]*"
        r"(?:arguments|parameters|args)[ \t]*:",
    ],
    "service_call": [
        r"\b(?:lock\.(?:unlock|open)|alarm_control_panel\.alarm_disarm|cover\.(?:open_cover|"
        r"set_cover_position|toggle)|homeassistant\.(?:turn_off|toggle|stop|restart)|"
        r"shell_command\.\w+|rest_command\.\w+|script\.turn_on|button\.press|call_service)\b",
        r"\b(?:call|invoke|execute|run|trigger|use)(?:{S}the)?{S}(?:tool|function|service|action|"
        r"intent){S}(?:hass\w+|\w+\.\w+)",
        r"\bhass[a-z]{3,30}[ \t]*[({]",
    ],
}

# Patterns on the text as it is (case and characters matter).
_RAW: dict[str, re.Pattern[str]] = {
    # A run of 100+ base64 characters; checked further in _blob_findings.
    "base64_blob": re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{100,}={0,2}"),
    # Zero-width characters, bidi overrides and isolates, tag characters ("ASCII
    # smuggling"); a joiner between emoji and a byte order mark at the start are normal.
    "invisible_characters": re.compile(
        "[\u200b\u200c\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufff9-\ufffb"
        "\U000e0000-\U000e007f]|(?<=\\w)\u200d|\u200d(?=\\w)|(?<!^)\ufeff"
    ),
}


# fmt: on


def _compile(
    patterns: dict[str, list[str]], separator: str, boundary: str = r"\b"
) -> dict[str, re.Pattern[str]]:
    compiled = {}
    for pattern_id, alternatives in patterns.items():
        source = "|".join(f"(?:{alternative})" for alternative in alternatives)
        source = source.replace(r"\b", boundary).replace("{S}", separator)
        compiled[pattern_id] = re.compile(source)
    return compiled


# Phrases run on the folded text with "_" as a space ("unlock_the_door_now"): a plain \b,
# which the regular expression engine searches for fast, then separates those words too.
_PHRASE_RE = _compile(_PHRASES, _SEPARATOR)
# Without separators there are no word boundaries either.
_SQUEEZED_RE = _compile({k: _PHRASES[k] for k in ("ignore_instructions", "role_override")}, "", "")
_MARKUP_RE = _compile(_MARKUP, _SEPARATOR)

# Cheap substring checks first: a pattern's expression runs only when one of its words
# occurs in the folded text (most texts skip most patterns).
# fmt: off
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "ignore_instructions": (
        "ignor", "disregard", "forget", "skip", "overrid", "bypass", "neglect", "vergi",
        "missacht", "uberge", "oubli", "neglig", "olvid", "omite", "descarta", "negeer",
        "negeren", "vergeet", "vergeten", "dimentic", "trascura",
    ),
    "role_override": (
        "now", "pretend", "act", "behave", "respond", "mode", "jetzt", "nun", "sofort",
        "maintenant", "desormais", "ahora", "nu", "ora", "adesso",
    ),
    "skip_confirmation": (
        "already", "ask", "request", "wait", "seek", "without", "granted", "ohne", "nutzer",
        "sans", "utilisateur", "sin", "usuario", "zonder", "gebruiker", "senza", "utente",
    ),
    "new_instructions": (
        ":", "reveal", "show", "print", "output", "repeat", "leak", "send", "tell",
    ),
    "action_request": (
        "unlock", "disarm", "deactiv", "disabl", "open", "off", "shut", "entrieg", "entsperr",
        "offne", "deaktiv", "entscharf", "schliess", "deverrouill", "ouvr", "desarm", "desactiv",
        "desbloque", "abr", "ontgrendel", "schakel", "sblocca", "apri", "disattiv", "disarma",
    ),
    "role_marker": ("system", "developer", "assistant", "sistema", "systeem", '"role"'),
    "chat_template_token": ("<|", "inst]", "<<sys", "_of_turn>", "_of_text"),
    "section_tag": ("<",),
    "tool_call_json": ('"', "tool", "function"),
    "service_call": (".", "hass", "call_service"),
}
_SQUEEZED_TRIGGERS: dict[str, tuple[str, ...]] = {
    "ignore_instructions": _TRIGGERS["ignore_instructions"],
    "role_override": _TRIGGERS["role_override"],
}
# fmt: on


def _sliced(expression: re.Pattern[str], text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each match, searched slice by slice (see SLICE_CHARS)."""
    if len(text) <= SLICE_CHARS + _OVERLAP:
        for match in expression.finditer(text):
            yield match.start(), match.end()
        return
    for base in range(0, len(text), SLICE_CHARS):
        for match in expression.finditer(text[base : base + SLICE_CHARS + _OVERLAP]):
            if match.start() >= SLICE_CHARS:
                # The next slice finds it (again, whole).
                break
            yield base + match.start(), base + match.end()


def _matches(
    expressions: dict[str, re.Pattern[str]],
    triggers: dict[str, tuple[str, ...]],
    text: str,
    skip: set[str],
) -> Iterator[tuple[str, int, int]]:
    for pattern_id, expression in expressions.items():
        if pattern_id in skip or not any(word in text for word in triggers[pattern_id]):
            continue
        for count, (start, end) in enumerate(_sliced(expression, text)):
            if count == _PER_PATTERN:
                break
            yield pattern_id, start, end


# Any of the invisible characters above, for a fast first look.
_ANY_INVISIBLE = re.compile(
    "[\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def _blob_findings(text: str) -> Iterator[tuple[str, int, int]]:
    """Runs that look like base64: upper, lower case and digits mixed (a hex token or a
    long word is none)."""
    count = 0
    for match in _RAW["base64_blob"].finditer(text):
        run = match.group()
        if (
            any(c.isupper() for c in run)
            and any(c.islower() for c in run)
            and any(c.isdigit() for c in run)
        ):
            yield "base64_blob", match.start(), match.end()
            count += 1
            if count == _PER_PATTERN:
                return


def _scan_window(text: str) -> list[tuple[str, int, int]]:
    """Findings in one text (at most MAX_SCAN_CHARS), as offsets in that text."""
    found: list[tuple[str, int, int]] = list(_blob_findings(text))
    if _ANY_INVISIBLE.search(text):
        found += [
            ("invisible_characters", m.start(), m.end())
            for _, m in zip(
                range(_PER_PATTERN), _RAW["invisible_characters"].finditer(text), strict=False
            )
        ]
    folded, ends = _folded(text)
    # Same length as `folded`: offsets hold for both.
    words = folded.replace("_", " ")
    in_folded = list(_matches(_PHRASE_RE, _TRIGGERS, words, set()))
    in_folded += _matches(_MARKUP_RE, _TRIGGERS, folded, set())
    seen = {pattern_id for pattern_id, _, _ in in_folded}
    if set(_SQUEEZED_RE) - seen:
        in_folded += _squeezed_matches(words, seen)
    found += [
        (pattern_id, _source_index(ends, start), _source_index(ends, end - 1) + 1)
        for pattern_id, start, end in in_folded
    ]
    return found


# What the squeezed copy keeps: letters, digits and the joiner between strings ("_" is
# already a space in the text it is made from).
_WORD_CHARACTER = re.compile(r"[\w\x00]")
_NOT_WORD = re.compile(r"[^\w\x00]+")


def _squeezed_matches(folded: str, seen: set[str]) -> list[tuple[str, int, int]]:
    """Phrase patterns on the folded text without spaces and punctuation, for letters
    spaced out or dotted; offsets in the folded text."""
    squeezed = _NOT_WORD.sub("", folded)
    matches = list(_matches(_SQUEEZED_RE, _SQUEEZED_TRIGGERS, squeezed, seen))
    if not matches:
        return []
    kept = [m.start() for m in _WORD_CHARACTER.finditer(folded)]
    return [(pattern_id, kept[start], kept[end - 1] + 1) for pattern_id, start, end in matches]


def scan_text(text: str) -> tuple[Finding, ...]:
    """Findings in `text`, in the order of the text; () when nothing looks like injection."""
    if not text:
        return ()
    if len(text) <= MAX_SCAN_CHARS:
        found = _scan_window(text)
    else:
        half = MAX_SCAN_CHARS // 2
        tail_start = len(text) - half
        found = _scan_window(text[:half])
        found += [(p, s + tail_start, e + tail_start) for p, s, e in _scan_window(text[-half:])]
        found.append((NOT_FULLY_SCANNED, half, tail_start))
    return tuple(Finding(p, s, e) for p, s, e in sorted(found, key=lambda f: (f[1], f[0])))


# Between the strings of a structured value: a character no pattern matches across.
_JOINER = "\x00"


def _strings(value: Any, path: str, out: list[tuple[str, str]]) -> None:
    if isinstance(value, str):
        out.append((path, value))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            out.append((f"{path}.<key>" if path else "<key>", str(key)))
            _strings(item, f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _strings(item, f"{path}[{index}]", out)


def scan_data(value: Any) -> tuple[Finding, ...]:
    """Findings in every string of a structured value (keys too), each with its path.

    The strings are scanned as one text, joined by a character no pattern crosses.
    """
    if isinstance(value, str):
        return scan_text(value)
    pieces: list[tuple[str, str]] = []
    _strings(value, "", pieces)
    if not pieces:
        return ()
    text = _JOINER.join(piece for _, piece in pieces)
    starts = list(accumulate((len(piece) + 1 for _, piece in pieces), initial=0))
    findings = []
    for finding in scan_text(text):
        index = max(bisect_right(starts, finding.start) - 1, 0)
        offset = starts[index]
        findings.append(
            Finding(
                finding.pattern,
                finding.start - offset,
                max(finding.end - offset, 0),
                pieces[min(index, len(pieces) - 1)][0],
            )
        )
    return tuple(findings)


def _size(value: Any) -> int:
    """A quick upper bound of the characters in a value's strings."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(len(str(k)) + _size(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(_size(item) for item in value)
    return 0


async def scan_data_async(value: Any) -> tuple[Finding, ...]:
    """scan_data, in a worker thread when the value is large (the loop must not wait)."""
    if _size(value) <= INLINE_SCAN_CHARS:
        return scan_data(value)
    return await asyncio.to_thread(scan_data, value)


@functools.lru_cache(maxsize=4096)
def scan_name(name: str) -> tuple[Finding, ...]:
    """scan_text for short texts seen every turn (device, area and entity names)."""
    return scan_text(name)
