"""A scripted stand-in model for trying the integration offline. It is NOT a language model.

`scripts/develop --offline-model` and `scripts/e2e` run it next to Home Assistant so that
the agent can be tried, and tested in a browser, without an API key or a model server. It
speaks OpenAI chat completions through FakeOpenAIServer (the wire format of the tests,
streamed like OpenAI's), but instead of a queue of replies scripted by a test it picks
each reply from the request itself:

- a handful of demo phrases (lights, weather, music, locks and the garage door, remember
  and recall) become real tool calls, named from the `tools` the request offers: our own
  `home_*` tools when the agent has them, else Home Assistant's Assist intents
  ("HassTurnOn", or "intent__HassTurnOn" where Home Assistant prefixes them);
- once the tool results are back, it answers with a sentence made from them;
- anything else gets a plain answer: it is a scripted stand-in, and what it understands;
- an image request (POST /v1/images/generations, any model name) gets a picture drawn
  from the prompt's words: coloured bands, one per word, not an image of anything.

Names of lights, locks and players come from the entity listing Home Assistant puts into
the system prompt, matched by words; "it" and "them" mean what the conversation last
switched. "Remember that ..." goes to the agent's memory tool (action "remember") when it has one;
"what colour is my bike?" is answered from the memories the agent puts into the prompt and
from what the user said earlier in the conversation (the request carries both), else with
its "recall" action. "Who is at the front door?" (or any question naming a camera) calls
the camera tool when the agent may look through cameras; asked as the looking model, the
stand-in cannot see, so it says what the picture's header tells (format, size). "Search
the web for ..." calls the web search tool when the agent may search the web; asked as
the searching model (a request with `web_search_options`), the stand-in cannot reach the
web, so it says so, citing one page (Home Assistant's site) the way OpenAI's search models
cite. "Every weekday at seven turn on the kitchen lights" drafts that automation for the
automation tool when the agent may create automations (the agent asks before it is
created), and "what automations did you make?" lists them. The stand-in itself keeps
nothing between requests.

Run it with `python -m fakes.offline_model` from the repository: it listens on a
free port of 127.0.0.1 until SIGINT/SIGTERM, or until its parent process ends.
"""

from __future__ import annotations

import argparse
import base64
from collections.abc import Mapping
import contextlib
import contextvars
from dataclasses import dataclass, field
import json
import logging
import os
from pathlib import Path
import re
import signal
import sys
import threading
from typing import Any, Final

from aiohttp import web

from .image_script import ImageReply, png_bands
from .openai_server import FakeOpenAIServer
from .script import AnyReply, Reply, ToolCall

MODEL: Final = "offline-demo"
LITELLM_MODEL: Final = f"openai/{MODEL}"
# A second name in its model list, so the setup form's model picker has a choice (the
# stand-in answers the same to any name).
OTHER_MODEL: Final = "offline-demo-alt"
# The image model name scripts/develop gives the offline AI Task (any name is answered).
IMAGE_MODEL: Final = "offline-demo-image"
# Width and height of the stand-in's pictures.
IMAGE_SIZE: Final = 256

STANDIN_NOTICE: Final = (
    "This is a scripted stand-in for trying the integration offline, not a language model."
)
HELP: Final = (
    "I'm a scripted stand-in for trying LangGraph Conversation offline, not a language "
    "model, so I only understand a few demo phrases: "
    '"turn on the kitchen lights" (or off, or dim them to 30%), '
    '"what\'s the weather?" or "what\'s the forecast?", '
    '"pause the music", "resume the music" or "next song", '
    '"remember that my bike is blue" and later "what colour is my bike?", '
    '"how long were the decorative lights on today?" or "when did the backyard movement change?", '
    '"unlock the front door" (I ask you to confirm first), '
    '"every weekday at seven turn on the kitchen lights" (when the agent may create '
    'automations; I ask you to confirm first) and "what automations did you make?", '
    '"who is at the front door?" (when the agent may look through cameras), '
    'and "search the web for ..." (when the agent may search the web). '
    "For anything else, configure a real model."
)

_LOGGER = logging.getLogger("offline_model")

# The body of the chat request being answered. FakeModelServer reads the body
# (_read_json) and then takes its reply (next_reply) in the same handler task, so a
# context variable hands the body over without touching the shared request flow.
_REQUEST: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "offline_model_request", default=None
)

_WORD = re.compile(r"[a-z0-9%]+")
# Words that say nothing about which thing is meant.
_FILLER = frozenset(
    {
        *("a", "an", "the", "my", "our", "your", "all", "of", "in", "on", "at", "to", "for"),
        *("please", "can", "could", "would", "you", "me", "it", "them", "and"),
        *("turn", "switch", "set", "make", "put", "on", "off", "up", "down"),
        *("light", "lights", "lamp", "lamps", "music", "song", "track", "player"),
    }
)
_COLOURS = frozenset(
    {
        *("red", "green", "blue", "yellow", "orange", "purple", "pink", "white", "warmwhite"),
        *("cyan", "magenta", "violet", "turquoise", "gold", "teal"),
    }
)
_PRONOUNS = frozenset({"it", "them", "those", "these", "again"})
_QUESTION_WORDS = frozenset(
    {
        *("what", "whats", "which", "where", "who", "when", "how", "is", "are", "was"),
        *("colour", "color", "do", "did", "remember", "tell", "told", "about", "i", "know"),
    }
)
# What an Assist intent did, by intent and domain, for the answer.
_DONE_VERBS: Final = {
    ("HassTurnOn", "lock"): "locked",
    ("HassTurnOff", "lock"): "unlocked",
    ("HassTurnOn", "cover"): "opened",
    ("HassTurnOff", "cover"): "closed",
    ("HassTurnOn", ""): "turned on",
    ("HassTurnOff", ""): "turned off",
    ("HassMediaPause", ""): "paused",
    ("HassMediaUnpause", ""): "resumed",
    ("HassMediaNext", ""): "skipped to the next track on",
    ("HassMediaPrevious", ""): "went back a track on",
}
_MEDIA_VERBS: Final = {
    "play": "playing again",
    "pause": "paused",
    "stop": "stopped",
    "next": "on the next track",
    "previous": "back a track",
}


def words(text: str) -> list[str]:
    return _WORD.findall(text.casefold().replace("'", ""))


# --- what the request tells: the home, the tools, the conversation ----------------------------


@dataclass(frozen=True, slots=True)
class Entity:
    """One entity of the listing in Home Assistant's Assist prompt."""

    names: tuple[str, ...]
    domain: str
    areas: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.names[0]


_DENSE_LINE: Final = re.compile(r"^- ([^:;()]+|\(no area\)): ((?:[^;()]+ \([a-z_]+\)(?:; )?)+)$")
_DENSE_ENTITY: Final = re.compile(r"([^;()]+?) \(([a-z_]+)\)")


def home_entities(system_prompt: str) -> list[Entity]:
    """The exposed entities Home Assistant lists in the prompt ("- names: ...", "domain: ...",
    or grouped by area as the agent sends the listing).

    The compact home context lists no entities; the caller then passes the user's words on
    and the tools resolve them.
    """
    entities: list[Entity] = []
    current: dict[str, str] = {}

    def flush() -> None:
        if current.get("names") and current.get("domain"):
            entities.append(
                Entity(
                    names=tuple(n.strip() for n in current["names"].split(",") if n.strip()),
                    domain=current["domain"].strip(),
                    areas=tuple(a.strip() for a in current.get("areas", "").split(",") if a),
                )
            )
        current.clear()

    for line in system_prompt.splitlines():
        if dense := _DENSE_LINE.match(line):
            # The listing grouped by area (tools/listing.py): "- Kitchen: Lamp, the lamp
            # (light); Kitchen Temperature (sensor)".
            flush()
            area = "" if dense.group(1) == "(no area)" else dense.group(1)
            for names, domain in _DENSE_ENTITY.findall(dense.group(2)):
                current.update(names=names, domain=domain, areas=area)
                flush()
            continue
        match = re.match(r"^(- |  )(names|domain|areas): (.*)$", line)
        if match is None:
            flush()
            continue
        if match.group(1) == "- ":
            flush()
        current[match.group(2)] = match.group(3).strip().strip("'\"")
    flush()
    return entities


def best_match(text: str, entities: list[Entity], domains: set[str]) -> Entity | None:
    """The entity of `domains` whose name shares the most telling words with `text`."""
    said = set(words(text)) - _FILLER
    best: tuple[float, Entity] | None = None
    for entity in entities:
        if entity.domain not in domains:
            continue
        for name in entity.names:
            telling = set(words(name)) - _FILLER
            if not telling or not (shared := telling & said):
                continue
            # Most shared words first; among equals, the name with fewest other words.
            score = len(shared) - 0.01 * len(telling - shared)
            if best is None or score > best[0]:
                best = (score, entity)
    return best[1] if best else None


def area_match(text: str, entities: list[Entity], domains: set[str]) -> str | None:
    """An area of the home (with entities of `domains`) named in `text`, if any."""
    said = f" {' '.join(words(text))} "
    areas = {area for e in entities if e.domain in domains for area in e.areas}
    for area in sorted(areas, key=len, reverse=True):
        if f" {' '.join(words(area))} " in said:
            return area
    return None


# The prefixes Home Assistant gives Assist's intent tools: the intent integration's
# (2026.8 and later) and the Assist API's, when merged with other APIs (2026.2, 2026.10).
_ASSIST_PREFIXES = frozenset({"assist", "intent"})


class Tools:
    """The tools the request offers, looked up by our name or by Assist intent."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.names: list[str] = [
            str(tool.get("function", {}).get("name", "")) for tool in body.get("tools") or []
        ]

    def own(self, name: str) -> str | None:
        return name if name in self.names else None

    def intent(self, intent: str) -> str | None:
        """The offered name of an Assist intent tool: "HassTurnOn" or "…__HassTurnOn".

        With other APIs merged in, another API's tool may be called "HassTurnOn" or end in
        "__HassTurnOn" too: a name under Assist's own prefixes ("assist", "intent") comes
        first, then the plain name (2026.2 with Assist alone), then any.
        """
        found = [n for n in self.names if n == intent or n.endswith(f"__{intent}")]
        for name in found:
            if name != intent and set(name.split("__")[:-1]) <= _ASSIST_PREFIXES:
                return name
        return intent if intent in found else (found[0] if found else None)


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        ).strip()
    return ""


def calls_of(message: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, name, arguments) of an assistant message's tool calls."""
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {}
        calls.append((str(call.get("id")), str(function.get("name")), arguments))
    return calls


def intent_of(tool_name: str) -> str:
    return tool_name.rsplit("__", 1)[-1]


# --- deciding what to say or call -----------------------------------------------------------


@dataclass
class Turn:
    """The request, seen from its last user message."""

    body: dict[str, Any]
    text: str = ""
    earlier: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    calling: dict[str, Any] | None = None

    @classmethod
    def of(cls, body: dict[str, Any]) -> Turn:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        turn = cls(body=body)
        if last_user >= 0:
            turn.text = text_of(messages[last_user])
            turn.earlier = messages[:last_user]
        after = messages[last_user + 1 :]
        # Tool results after the last assistant message that called tools: time to answer.
        for index in range(len(after) - 1, -1, -1):
            if after[index].get("role") == "assistant" and after[index].get("tool_calls"):
                turn.calling = after[index]
                turn.results = [m for m in after[index + 1 :] if m.get("role") == "tool"]
                break
        return turn

    @property
    def system_prompt(self) -> str:
        messages = self.body.get("messages") or []
        return "\n".join(text_of(m) for m in messages if m.get("role") == "system")


def say(text: str) -> Reply:
    # Small chunks, a little apart: the chat panel and voice satellites see it stream.
    return Reply(text=text, chunk_size=6, chunk_delay=0.01)


def call(name: str, arguments: dict[str, Any]) -> Reply:
    return Reply(tool_calls=(ToolCall(name, arguments),))


def no_tool(what: str) -> Reply:
    return say(
        f"I would {what}, but this agent offers me no tool for it. Let the agent control "
        "Home Assistant (Assist) and use the extra home tools in its settings."
    )


def answer(body: dict[str, Any]) -> Reply:
    """The stand-in's whole behaviour: a reply to one chat completion request."""
    if pictures := images_asked_about(body):
        return say(" ".join(picture_header(picture) for picture in pictures))
    if "web_search_options" in body:
        return say(web_answer(body))
    turn = Turn.of(body)
    if "summary of the conversation" in turn.system_prompt:
        return say(summary(turn.text))
    if turn.calling is not None and turn.results:
        return say(summarise(turn.calling, turn.results))
    text = turn.text.strip()
    if not text:
        return say(HELP)
    said = " ".join(words(text))
    tools = Tools(body)
    home = home_entities(turn.system_prompt)
    handlers = (
        *(remember, web_search, automations, cameras, history, locks, garage, lights),
        *(media, weather, recall, greeting),
    )
    for handler in handlers:
        if (reply := handler(text, said, turn, tools, home)) is not None:
            return reply
    return say(HELP)


_REMEMBER = re.compile(r"^\s*(?:please\s+)?remember\s+(?:that\s+)?(.+?)[.!]*\s*$", re.I)


def summary(request: str) -> str:
    """The agent summarises long threads with the model: keep what was asked, facts verbatim."""
    earlier, _, transcript = request.partition("Conversation:\n")
    earlier = earlier.strip().removeprefix("Earlier summary:").strip()
    asked = []
    for line in transcript.splitlines():
        if line.startswith("Person: "):
            request = line.removeprefix("Person: ").strip().rstrip(".!?")
            kind = "said" if _REMEMBER.match(request) else "asked"
            asked.append(f"The person {kind}: {request}.")
    return " ".join(([earlier] if earlier else []) + asked[-12:]) or "Nothing to summarise."


def remembered(turn: Turn) -> list[str]:
    """Facts the user asked to remember: saved memories the agent put into the prompt,
    earlier turns of this conversation, and the summary of its older turns."""
    facts: list[str] = []
    prompt = turn.system_prompt
    if block := re.search(r"<memories>(.*?)</memories>", prompt, re.S):
        for match in re.finditer(r'^- \[[^\]]*\] (".*")\s*$', block.group(1), re.M):
            with contextlib.suppress(ValueError):
                facts.append(str(json.loads(match.group(1))))
    for match in re.finditer(r"said: remember (?:that )?(.+?)\.(?:\s|$)", prompt):
        facts.append(match.group(1))
    for message in turn.earlier:
        if message.get("role") == "user" and (match := _REMEMBER.match(text_of(message))):
            facts.append(match.group(1))
    unique: dict[str, str] = {}
    for fact in facts:
        fact = fact.strip().rstrip(".!")
        unique.setdefault(fact.casefold(), fact)
    return list(unique.values())


def _asked(text: str) -> set[str]:
    """The telling words of a question about a fact: "what colour is my bike" → {"bike"}."""
    return set(words(text)) - _FILLER - _QUESTION_WORDS


def _about(facts: list[str], question: str) -> list[str]:
    asked = _asked(question)
    return [fact for fact in facts if asked & (set(words(fact)) - _FILLER)]


def remember(text: str, said: str, turn: Turn, tools: Tools, home: list[Entity]) -> Reply | None:
    if (match := _REMEMBER.match(text)) is None:
        return None
    fact = match.group(1)
    if tool := tools.own("memory"):
        # The agent's long-term memory: saved in the user's words.
        return call(tool, {"action": "remember", "text": f"{fact[:1].upper()}{fact[1:]}."})
    return say(f"OK, I'll keep that in mind for this conversation: {second_person(fact)}.")


def second_person(fact: str) -> str:
    """What the user said about themselves, said back: "my bike" → "your bike"."""
    swaps = {"my": "your", "i": "you", "am": "are", "me": "you", "mine": "yours", "i'm": "you're"}
    return " ".join(swaps.get(word.casefold(), word) for word in fact.split()).rstrip(".!")


def recall(text: str, said: str, turn: Turn, tools: Tools, home: list[Entity]) -> Reply | None:
    asks = re.search(r"\b(what|which|where|who|when|how|do you remember|did i)\b", said)
    if asks is None or not re.search(r"\b(my|i|me|remember)\b", said):
        return None
    facts = remembered(turn)
    if relevant := _about(facts, text):
        return say(f"You told me that {second_person(relevant[-1])}.")
    if tool := tools.own("memory"):
        return call(tool, {"action": "recall", "text": " ".join(sorted(_asked(text))) or text})
    if not facts:
        return say(
            "You haven't asked me to remember anything yet. "
            '(Try "remember that my bike is blue" first.)'
        )
    listed = "; ".join(second_person(fact) for fact in facts)
    return say(f"I don't know that. What you told me: {listed}.")


_CAMERA_QUESTION = re.compile(
    r"\b(cameras?|who is at|whos at|who is outside|is there a (car|parcel|package)|"
    r"did the (parcel|package))\b"
)


def cameras(text: str, said: str, turn: Turn, tools: Tools, home: list[Entity]) -> Reply | None:
    if _CAMERA_QUESTION.search(said) is None:
        return None
    tool = tools.own("home_camera_look")
    if tool is None:
        return say(
            "I would look, but this agent may not look through cameras: turn on "
            '"May look through cameras" in its settings (and give it a vision model).'
        )
    listed = [entity for entity in home if entity.domain == "camera"]
    named = best_match(text, home, {"camera"})
    if named is None and len(listed) == 1:
        named = listed[0]
    return call(tool, {"name": named.name if named else "", "question": text})


_WEB_QUESTION = re.compile(r"\b(search the web|on the web|web search|search online|look up)\b")
# The page the stand-in cites as the searching model (it reaches no web).
WEB_SOURCE: Final = ("Home Assistant", "https://www.home-assistant.io/")


def web_search(text: str, said: str, turn: Turn, tools: Tools, home: list[Entity]) -> Reply | None:
    if _WEB_QUESTION.search(said) is None:
        return None
    tool = tools.own("home_web_search")
    if tool is None:
        return say(
            'I would search the web, but this agent may not: turn on "Search the web" in '
            "its settings (and give it a web search model)."
        )
    return call(tool, {"query": text})


def web_answer(body: dict[str, Any]) -> str:
    """The searching model's answer: the stand-in reaches no web, and says so."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    users = [m for m in messages if m.get("role") == "user"]
    asked = text_of(users[-1]) if users else ""
    question = asked.rpartition("Question:")[2].strip() or asked
    return (
        f"I am a scripted stand-in and cannot reach the web, so I found nothing about {question!r}."
    )


_NUMBER_WORDS: Final = {
    word: number
    for number, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        ]
    )
}
# "every weekday at seven turn on the kitchen lights", "every day at 7:30 turn off the porch"
_AUTOMATION_ASK = re.compile(
    r"\bevery (weekday|day)\b.*?\bat (\d{1,2}(?::\d{2})?|[a-z]+)\b(?: ?(am|pm))?\W*"
    r"(?:please )?turn (on|off)\b(.*)$"
)
_DAYS_NAMED: Final = {"weekday": "on weekdays", "day": "daily"}
_AUTOMATION_LIST = re.compile(r"\b(what|which) automations\b")


def _clock(spoken: str, half: str | None) -> str | None:
    """ "seven" or "7" or "7:30" (with am/pm) as HH:MM:00."""
    hour_text, _, minute_text = spoken.partition(":")
    hour = _NUMBER_WORDS.get(hour_text) if not hour_text.isdigit() else int(hour_text)
    if hour is None or hour > 23:
        return None
    if half == "pm" and hour < 12:
        hour += 12
    return f"{hour:02d}:{int(minute_text or 0):02d}:00"


def automations(text: str, said: str, turn: Turn, tools: Tools, home: list[Entity]) -> Reply | None:
    """Drafts an automation in Home Assistant's format (the agent reads it back and asks
    before it creates it), or lists the ones it made."""
    if _AUTOMATION_LIST.search(said):
        tool = tools.own("home_automation_list")
        return call(tool, {}) if tool else no_tool("list the automations I made")
    spoken = re.sub(r"(\d)\s+(\d\d)\b", r"\1:\2", text.lower())
    match = _AUTOMATION_ASK.search(spoken)
    if match is None:
        return None
    tool = tools.own("home_automation_create")
    if tool is None:
        return say(
            "I would set that up, but this agent may not create automations: turn on "
            '"May create automations" in its settings.'
        )
    days, at, half, action, rest = match.groups()
    clock = _clock(at, half)
    light = best_match(rest, home, {"light"})
    if clock is None or light is None:
        return say(
            "Say when and which light, like: every weekday at seven turn on the kitchen lights."
        )
    # The stand-in sees names only; Home Assistant's demo makes entity ids from them.
    entity_id = "light." + "_".join(words(light.name))
    draft: dict[str, Any] = {
        "name": f"{light.name} {action} at {clock[:5]} {_DAYS_NAMED[days]}",
        "triggers": [{"trigger": "time", "at": clock}],
        "actions": [{"action": f"light.turn_{action}", "target": {"entity_id": entity_id}}],
    }
    if days == "weekday":
        draft["conditions"] = [
            {"condition": "time", "weekday": ["mon", "tue", "wed", "thu", "fri"]}
        ]
    return call(tool, draft)


def images_asked_about(body: dict[str, Any]) -> list[bytes]:
    """The pictures in the request's last user message (the looking model's request)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    users = [m for m in messages if m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    pictures = []
    for part in content if isinstance(content, list) else []:
        url = str(((part or {}).get("image_url") or {}).get("url", ""))
        head, _, data = url.partition(";base64,")
        if head.startswith("data:image/") and data:
            with contextlib.suppress(ValueError):
                pictures.append(base64.b64decode(data))
    return pictures


def _dimensions(picture: bytes) -> tuple[str, int, int] | None:
    """Format, width and height from a PNG's or a JPEG's header."""
    if picture.startswith(b"\x89PNG") and len(picture) >= 24:
        return "PNG", int.from_bytes(picture[16:20], "big"), int.from_bytes(picture[20:24], "big")
    if picture.startswith(b"\xff\xd8"):
        index = 2
        while index + 9 <= len(picture) and picture[index] == 0xFF:
            marker, length = (
                picture[index + 1],
                int.from_bytes(picture[index + 2 : index + 4], "big"),
            )
            # Start of frame (not DHT, JPG or DAC, which share the range).
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height = int.from_bytes(picture[index + 5 : index + 7], "big")
                return "JPEG", int.from_bytes(picture[index + 7 : index + 9], "big"), height
            index += 2 + length
    return None


def picture_header(picture: bytes) -> str:
    """What a stand-in that cannot see can say about a picture."""
    found = _dimensions(picture)
    what = f"a {found[0]} picture of {found[1]} by {found[2]} pixels" if found else "a picture"
    return (
        f"I am a scripted stand-in and cannot see: I got {what} ({len(picture):,} bytes). "
        "A model that sees images would describe what it shows."
    )


def greeting(text: str, said: str, turn: Turn, tools: Tools, home: list[Entity]) -> Reply | None:
    if said in {"hi", "hello", "hey", "good morning", "good evening", "hello there"}:
        return say(f"Hello! {HELP}")
    return None


def _last_target(turn: Turn, domain: str) -> dict[str, Any] | None:
    """What the conversation last switched in `domain`: "turn them off again"."""
    for message in reversed(turn.earlier):
        if message.get("role") != "assistant":
            continue
        for _id, name, arguments in calls_of(message):
            domains = arguments.get("domain") or []
            ours = name.startswith(f"home_{domain}")
            if ours or domain in (domains if isinstance(domains, list) else [domains]):
                return {k: v for k, v in arguments.items() if k in ("name", "area", "floor")}
    return None


def locks(text: str, said: str, turn: Turn, tools: Tools, home: list[Entity]) -> Reply | None:
    match = re.search(r"\b(unlock|lock)\b", said)
    if match is None:
        return None
    verb = match.group(1)
    intent = "HassTurnOff" if verb == "unlock" else "HassTurnOn"
    tool = tools.intent(intent)
    if tool is None:
        return no_tool(f"{verb} that")
    entity = best_match(text, home, {"lock"})
    if entity is not None:
        name = entity.name
    else:
        rest = said[match.end() :].strip()
        name = re.sub(r"^(the|my)\s+", "", rest) or "front door"
    # Home Assistant unlocks through HassTurnOff; the agent asks for a yes before it runs.
    return call(tool, {"name": name, "domain": ["lock"]})


def garage(text: str, said: str, turn: Turn, tools: Tools, home: list[Entity]) -> Reply | None:
    match = re.search(r"\b(open|close)\b.*\bgarage\b", said)
    if match is None:
        return None
    intent = "HassTurnOn" if match.group(1) == "open" else "HassTurnOff"
    if (tool := tools.intent(intent)) is None:
        return no_tool(f"{match.group(1)} the garage door")
    entity = best_match(text, home, {"cover"})
    return call(tool, {"name": entity.name if entity else "Garage Door", "domain": ["cover"]})


def _light_action(said: str) -> str | None:
    if re.search(r"\b(off|out)\b", said):
        return "turn_off"
    if re.search(r"\btoggle\b", said):
        return "toggle"
    if re.search(r"\b(on|dim|brighten|brighter|dimmer|set|make|bright)\b|%", said) or any(
        word in _COLOURS for word in said.split()
    ):
        return "turn_on"
    return None


def lights(text: str, said: str, turn: Turn, tools: Tools, home: list[Entity]) -> Reply | None:
    named = best_match(text, home, {"light"})
    mentions = re.search(r"\b(light|lights|lamp|lamps)\b", said)
    pronoun = bool(_PRONOUNS & set(said.split()))
    earlier = _last_target(turn, "light") if pronoun and not mentions and not named else None
    if not (mentions or named or earlier):
        return None
    action = _light_action(said)
    if action is None:
        return None
    target: dict[str, Any]
    if earlier is not None:
        target = earlier
    elif re.search(r"\ball\b", said):
        target = {}
    elif area := area_match(text, home, {"light"}):
        target = {"area": area}
    elif named is not None:
        target = {"name": named.name}
    else:
        # No listing in the prompt (compact context): pass the words on, the tool resolves.
        phrase = re.search(r"(?:the|my)\s+([a-z ]+?)\s+(?:light|lights|lamp)\b", said)
        target = {"name": f"{phrase.group(1)} lights"} if phrase else {}
    settings: dict[str, Any] = {}
    if percent := re.search(r"\b(\d{1,3})\s*%|\b(\d{1,3})\s*percent\b", said):
        settings["brightness_pct"] = min(100, int(percent.group(1) or percent.group(2)))
    elif re.search(r"\bdim(mer)?\b", said):
        settings["brightness_step_pct"] = -30
    elif re.search(r"\b(brighten|brighter)\b", said):
        settings["brightness_step_pct"] = 30
    if colour := next((word for word in said.split() if word in _COLOURS), None):
        settings["color_name"] = colour
    if tool := tools.own("home_light_control"):
        return call(tool, {"action": action, **target, **settings})
    if action == "turn_on" and settings and (tool := tools.intent("HassLightSet")):
        slots: dict[str, Any] = dict(target)
        if "brightness_pct" in settings:
            slots["brightness"] = settings["brightness_pct"]
        if "color_name" in settings:
            slots["color"] = settings["color_name"]
        return call(tool, slots)
    intent = {"turn_on": "HassTurnOn", "turn_off": "HassTurnOff"}.get(action, "HassTurnOn")
    if (tool := tools.intent(intent)) is None:
        return no_tool("switch the lights")
    return call(tool, {**target, "domain": ["light"]})


def media(text: str, said: str, turn: Turn, tools: Tools, home: list[Entity]) -> Reply | None:
    if re.search(r"\bwhat(s| is)( is)? playing\b", said):
        if tool := tools.own("home_media_status"):
            return call(tool, {})
        return None
    match = re.search(r"\b(pause|resume|unpause|stop|next|skip|previous|play)\b", said)
    if match is None:
        return None
    if match.group(1) in {"next", "previous", "stop", "skip"} and not re.search(
        r"\b(music|song|track|playing|media|playback|tune)\b", said
    ):
        return None
    action = {
        "resume": "play",
        "unpause": "play",
        "skip": "next",
    }.get(match.group(1), match.group(1))
    player = best_match(text, home, {"media_player"})
    target = {"name": player.name} if player else {}
    query = ""
    if action == "play":
        rest = said[match.end() :]
        rest = re.sub(r"\b(on|in) the .*$", "", rest).strip()
        rest = re.sub(r"^(some|the|a|my)\s+", "", rest).strip()
        if rest not in {"", "music", "the music", "it", "again", "music again", "something"}:
            query = rest
    if query and (tool := tools.own("home_media_play")):
        return call(tool, {"query": query, **target})
    if tool := tools.own("home_media_control"):
        return call(tool, {"action": action, **target})
    intent = {
        "play": "HassMediaUnpause",
        "pause": "HassMediaPause",
        "stop": "HassMediaPause",
        "next": "HassMediaNext",
        "previous": "HassMediaPrevious",
    }[action]
    # Assist's media intents offered as one tool (tools/media_intents.py).
    if tool := tools.own("media_player__control"):
        return call(tool, {"action": _MEDIA_ACTIONS[intent], **target})
    if (tool := tools.intent(intent)) is None:
        return no_tool("control the music")
    return call(tool, target)


_MEDIA_ACTIONS: Final = {
    "HassMediaUnpause": "resume",
    "HassMediaPause": "pause",
    "HassMediaNext": "next",
    "HassMediaPrevious": "previous",
}


# Questions about the past, and what the history tool is asked for each.
_HISTORY_ASKS: Final = (
    (re.compile(r"\bhow long (?:was|were|did|has|have)\b"), "time_in_state"),
    (re.compile(r"\bhow much (?:energy|electricity|power|water|gas)\b"), "total"),
    (re.compile(r"\b(?:lowest|highest|warmest|coldest|average|mean)\b"), "min_max_mean"),
    (re.compile(r"\bwhat was\b.*\bat \d{1,2}\b"), "value_at"),
    (re.compile(r"\b(?:when did|when was|did anyone|last time)\b"), "changes"),
)
_HISTORY_PERIODS: Final = ("today", "yesterday", "this week", "last 7 days", "last 24 hours")
# The states a question names, as the history tool matches them.
_HISTORY_STATES: Final = {"on": "on", "open": "on", "opened": "on", "off": "off"}
# What the history tool may be asked about (not the weather or people).
_HISTORY_DOMAINS: Final = frozenset(
    {"binary_sensor", "sensor", "switch", "light", "climate", "cover", "lock", "fan"}
)


def history(text: str, said: str, turn: Turn, tools: Tools, home: list[Entity]) -> Reply | None:
    """Questions about the past: "when did the garage door open?", "how long was the heat
    pump on today?", "what was the outside temperature at 7?", "how much energy did we use
    yesterday?". Questions about what the person said ("when did I ...") are recall's."""
    ask = next((ask for pattern, ask in _HISTORY_ASKS if pattern.search(said)), None)
    if ask is None or re.search(r"\b(i|my|me|remember)\b", said):
        return None
    if (tool := tools.own("home_history")) is None:
        return no_tool("look that up in the home's history")
    arguments: dict[str, Any] = {"ask": ask}
    entity = best_match(text, home, set(_HISTORY_DOMAINS))
    if entity is None and ask == "total":
        entity = next((e for e in home if "energy" in " ".join(e.names).casefold()), None)
    if entity is not None:
        arguments["name"] = entity.name
    else:
        arguments["name"] = " ".join(sorted(_asked(text))) or text
    if period := next((p for p in _HISTORY_PERIODS if p in said), None):
        arguments["period"] = period.replace(" ", "_")
    if ask == "value_at" and (hour := re.search(r"\bat (\d{1,2})(?::(\d{2}))?\b", said)):
        arguments["at"] = f"{int(hour.group(1)):02d}:{hour.group(2) or '00'}"
    if ask in ("time_in_state", "changes"):
        state = next((_HISTORY_STATES[w] for w in said.split() if w in _HISTORY_STATES), None)
        if state is not None:
            arguments["state"] = state
        if ask == "changes":
            arguments["limit"] = 3
    return call(tool, arguments)


def _history_answer(data: dict[str, Any]) -> str:
    """The history tool's figures in a sentence or two."""
    entity = data.get("entity", "It")
    period = f" ({data['period']})" if data.get("period") else ""
    note = f" {data['note']}" if data.get("note") else ""
    if "changes" in data:
        changes = [f"{c.get('to')} at {c.get('at')}" for c in data["changes"][:3]]
        if not changes:
            return f"{entity} did not change{period}.{note}"
        return f"{entity} changed to " + "; ".join(changes) + f"{period}.{note}"
    if "times" in data:
        return (
            f"{entity} was {data.get('state')} for {data.get('total')} in all, "
            f"{data['times']} times{period}.{note}"
        )
    if "states" in data:
        parts = [f"{v} for {f.get('total')}" for v, f in data["states"].items()]
        return f"{entity} was " + ", ".join(parts) + f"{period}.{note}"
    if "value" in data:
        unit = f" {data['unit']}" if data.get("unit") else ""
        return f"{entity} was {data['value']}{unit} at {data.get('at')}."
    if "mean" in data:
        return (
            f"{entity}{period}: lowest {data.get('min')} at {data.get('min_at')}, highest "
            f"{data.get('max')} at {data.get('max_at')}, on average {data['mean']}.{note}"
        )
    if "total" in data:
        return f"{entity}: {data['total']} {data.get('unit') or ''}".rstrip() + f"{period}.{note}"
    return f"{entity}:{note or ' nothing recorded.'}"


def weather(text: str, said: str, turn: Turn, tools: Tools, home: list[Entity]) -> Reply | None:
    if not re.search(r"\b(weather|forecast|temperature outside|rain|sunny|warm outside)\b", said):
        return None
    wants_forecast = re.search(r"\b(forecast|tomorrow|week|weekend|later|next days)\b", said)
    if tool := tools.own("home_weather"):
        if wants_forecast:
            return call(tool, {"days": 2} if "tomorrow" in said else {"days": 3})
        return call(tool, {})
    if tool := tools.intent("HassGetWeather"):
        return call(tool, {})
    return no_tool("look up the weather")


# --- answering from tool results ------------------------------------------------------------


def summarise(calling: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """One sentence per tool call, from its result."""
    by_id = {str(m.get("tool_call_id")): text_of(m) for m in results}
    sentences = []
    for call_id, name, arguments in calls_of(calling):
        content = by_id.get(call_id, "")
        try:
            data: Any = json.loads(content)
        except ValueError:
            data = content
        sentences.append(describe(name, arguments, data))
    return " ".join(sentences)


def _value(data: dict[str, Any], key: str, units: dict[str, Any]) -> str | None:
    if data.get(key) is None:
        return None
    unit = units.get(key, "")
    return f"{data[key]} {unit}".strip() if unit != "%" else f"{data[key]}%"


def _condition(value: Any) -> str:
    return {"partlycloudy": "partly cloudy", "clear-night": "clear (night)"}.get(
        str(value), str(value).replace("-", " ")
    )


def describe(name: str, arguments: dict[str, Any], data: Any) -> str:
    """What one tool call did, said in one or two sentences."""
    if isinstance(data, dict) and "error" in data:
        if data["error"] == "not_confirmed":
            return "OK, I left it as it is, since you did not confirm."
        return f"That did not work: {data.get('error_text') or data['error']}"
    if not isinstance(data, dict):
        return f"{name} said: {str(data)[:300]}"
    if name == "home_light_control":
        parts = []
        for light in data.get("lights", []):
            part = f"{light.get('name')} is {light.get('state')}"
            if light.get("brightness_pct") is not None:
                part += f" at {light['brightness_pct']}% brightness"
            if arguments.get("color_name") and light.get("rgb_color"):
                part += f", {arguments['color_name']} (RGB {light['rgb_color']})"
            parts.append(part)
        sentence = ("Done: " + ", ".join(parts) + ".") if parts else "No light changed."
        if data.get("refused"):
            sentence += " Not possible: " + "; ".join(data["refused"]) + "."
        return sentence
    if name == "home_weather" and "forecast" not in data:
        units = data.get("units") or {}
        details = [
            f"{label} {text}"
            for label, key in (("humidity", "humidity"), ("wind", "wind_speed"))
            if (text := _value(data, key, units))
        ]
        temperature = _value(data, "temperature", units)
        head = f"{data.get('weather')}: {_condition(data.get('condition'))}"
        if temperature:
            head += f", {temperature}"
        return head + (", " + ", ".join(details) if details else "") + "."
    if name == "home_weather":
        units = data.get("units") or {}
        unit = units.get("temperature", "")
        days = []
        for entry in data.get("forecast", []):
            day = f"{entry.get('when')}: {_condition(entry.get('condition'))}"
            if entry.get("temperature") is not None:
                day += f", {entry['temperature']}"
                if entry.get("templow") is not None:
                    day += f"/{entry['templow']}"
                day += f" {unit}".rstrip()
            days.append(day)
        return f"Forecast for {data.get('weather')}: " + "; ".join(days) + "."
    if name == "home_media_control":
        verb = _MEDIA_VERBS.get(str(data.get("action")), f"done ({data.get('action')})")
        sentence = f"{', '.join(data.get('done', [])) or 'Nothing'}: {verb}."
        if data.get("not_done"):
            sentence += " Not possible: " + "; ".join(data["not_done"]) + "."
        return sentence
    if name == "memory" and arguments.get("action") == "remember":
        return f"OK, I'll remember that: {second_person(str(data.get('text', '')))}."
    if name == "memory" and arguments.get("action") == "recall":
        memories = [str(m.get("text", "")) for m in data.get("memories", [])]
        if relevant := _about(memories, str(arguments.get("text", ""))):
            return f"You told me that {second_person(relevant[0])}."
        return "I have nothing saved about that."
    if name == "home_history":
        return _history_answer(data)
    if name == "home_camera_look":
        return f"{data.get('camera')}: {data.get('description')}"
    if name == "home_web_search":
        return str(data.get("answer"))

    if name == "home_automation_list":
        made = [
            f"{item.get('name')} ({item.get('does')}; for {item.get('made_for')} on "
            f"{item.get('made_on')})"
            for item in data.get("automations", [])
        ]
        return (
            ("I made these automations: " + "; ".join(made) + ".")
            if made
            else ("I have not made any automations.")
        )
    if name == "home_media_play":
        return f"Now playing {data.get('playing')} on {data.get('player')}."
    if name == "home_media_status":
        parts = []
        for player in data.get("players", []):
            part = f"{player.get('name')} is {player.get('state')}"
            if player.get("title"):
                part += f": {player['title']}"
                if player.get("artist"):
                    part += f" by {player['artist']}"
            parts.append(part)
        return "; ".join(parts) + "." if parts else "No media player found."
    if "response_type" in data:
        return _intent_answer(name, arguments, data)
    if isinstance(data.get("done"), list) and str(data.get("status", "")).startswith("done"):
        return _confirmed_answer(data["done"])
    return f"{name} answered: {json.dumps(data, ensure_ascii=False)[:300]}"


# Past tenses the regular rule ("unlock" → "unlocked") gets wrong.
_IRREGULAR_PAST: Final = {"run": "ran", "set": "set", "stop": "stopped"}


def _past(action: str) -> str:
    """An action as the agent's confirmation question names it, done: "unlock Front Door"
    → "unlocked Front Door", "turn on Porch" → "turned on Porch"."""
    verb, _, rest = action.partition(" ")
    past = _IRREGULAR_PAST.get(verb) or (f"{verb}d" if verb.endswith("e") else f"{verb}ed")
    return f"{past} {rest}".strip()


def _confirmed_answer(done: list[Any]) -> str:
    """Held actions the user said yes to, then ran (the agent's result names each action),
    said like an Assist intent's answer (_intent_answer)."""
    actions = [_past(str(action)) for action in done if str(action).strip()]
    return f"Done: I {', '.join(actions)}." if actions else "Done."


def _intent_answer(name: str, arguments: dict[str, Any], data: dict[str, Any]) -> str:
    """An Assist intent's response (IntentResponse as a dict)."""
    speech = ((data.get("speech") or {}).get("plain") or {}).get("speech")
    if speech:
        return str(speech)
    results = data.get("data") or {}
    success = [str(t.get("name")) for t in results.get("success", []) if t.get("name")]
    failed = [str(t.get("name")) for t in results.get("failed", []) if t.get("name")]
    domains = arguments.get("domain") or [""]
    domain = domains[0] if isinstance(domains, list) and domains else str(domains)
    intent = intent_of(name)
    if intent == "control" and (action := arguments.get("action")) in _MEDIA_ACTIONS.values():
        intent = next(i for i, a in _MEDIA_ACTIONS.items() if a == action)
    verb = _DONE_VERBS.get((intent, domain)) or _DONE_VERBS.get((intent, ""), "did that for")
    if data.get("response_type") == "error":
        return f"That did not work: {data.get('data', {}).get('code', 'error')}."
    if data.get("response_type") == "query_answer":
        # An answer (the weather, a state), not an action: say what Home Assistant found.
        found = data.get("speech_slots") or results
        return f"Home Assistant says: {json.dumps(found, ensure_ascii=False, default=str)[:300]}"
    sentence = f"Done: I {verb} {', '.join(success)}." if success else "Done."
    if failed:
        sentence += f" It did not work for {', '.join(failed)}."
    return sentence


# --- the server -----------------------------------------------------------------------------


class OfflineModelServer(FakeOpenAIServer):
    """FakeOpenAIServer that answers from the request (see the module docstring).

    Replies a test queues with add_*() still come first; the stand-in answers when the
    queue is empty.
    """

    def __init__(self) -> None:
        super().__init__()
        self.models = {MODEL, OTHER_MODEL}
        # A long-running server: keep only the latest of what the fakes record.
        self.keep_records = 20
        self.images.responder = self._picture

    async def _read_json(self, request: web.Request) -> dict[str, Any] | None:
        body = await super()._read_json(request)
        _REQUEST.set(body)
        return body

    def next_reply(self) -> AnyReply | None:
        if self.pending_replies:
            return super().next_reply()
        body = _REQUEST.get() or {}
        for record in (self.requests, self.paths, self.timings):
            del record[: -self.keep_records]
        try:
            reply = answer(body)
        except Exception:
            _LOGGER.exception("the stand-in failed on a request")
            reply = say("Sorry, the offline stand-in failed on that (see its log). " + HELP)
        _log_exchange(body, reply)
        return reply

    def _picture(self, body: dict[str, Any]) -> ImageReply:
        """A picture for an image request: a band of colour per word of the prompt."""
        for record in (self.images.requests, self.images.paths, self.images.credentials):
            del record[: -self.keep_records]
        prompt = str(body.get("prompt", ""))
        _LOGGER.info("image %r → %d coloured bands", prompt[:200], len(words(prompt)) or 1)
        return ImageReply(
            data=png_bands(words(prompt) or [prompt], IMAGE_SIZE),
            revised_prompt=f"Coloured bands, one per word of: {prompt}",
        )

    def _completion(self, body: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
        """A search request's answer cites its page as OpenAI's search models do."""
        completion = super()._completion(body, reply)
        if "web_search_options" in body:
            title, url = WEB_SOURCE
            text = completion["choices"][0]["message"]["content"] or ""
            completion["choices"][0]["message"]["annotations"] = [
                {
                    "type": "url_citation",
                    "url_citation": {
                        "start_index": 0,
                        "end_index": len(text),
                        "url": url,
                        "title": title,
                    },
                }
            ]
        return completion

    def _knows_model(self, model: str) -> bool:
        # LiteLLM sends the name without "openai/"; accept both, and any name at all,
        # so a model string typed in the UI still reaches the stand-in.
        return True


def _log_exchange(body: dict[str, Any], reply: Reply) -> None:
    turn = Turn.of(body)
    heard = f"results of {len(turn.results)} tool call(s)" if turn.results else repr(turn.text)
    if reply.tool_calls:
        said = ", ".join(
            f"{c.name} {json.dumps(c.arguments, ensure_ascii=False)}" for c in reply.tool_calls
        )
        _LOGGER.info("%s → tool call %s", heard, said)
    else:
        _LOGGER.info("%s → %r", heard, reply.text[:200])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ready-file", help="write the port here once listening")
    parser.add_argument("--log-file", help="log each exchange here (default: stderr)")
    args = parser.parse_args()
    handler = (
        logging.FileHandler(args.log_file, encoding="utf-8")
        if args.log_file
        else logging.StreamHandler()
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    _LOGGER.addHandler(handler)
    _LOGGER.setLevel(logging.INFO)

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    parent = os.getppid()
    server = OfflineModelServer()
    server.start_sync()
    try:
        _LOGGER.info(
            "offline model listening on %s (model %s). %s",
            server.api_base,
            LITELLM_MODEL,
            STANDIN_NOTICE,
        )
        if args.ready_file:
            ready = Path(args.ready_file)
            partial = ready.with_name(ready.name + ".partial")
            partial.write_text(f"{server.port}\n", encoding="ascii")
            partial.replace(ready)
        # Until signalled, or until the process that started it (Home Assistant, which
        # scripts/develop exec'd in its place) is gone.
        while not stop.wait(0.5):
            if os.getppid() != parent:
                _LOGGER.info("parent process ended; stopping")
                break
    finally:
        server.stop_sync()
        _LOGGER.info("offline model stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
