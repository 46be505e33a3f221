"""Figure 11: tokens per request, ours against Home Assistant's own Ollama agent, on
generated homes of several shapes, counted on the prompt as a chat template renders it.

(a) First request of a new conversation: tokens, messages and tools, default and compact
    context, for homes of 20, 100 and 500 entities, one without weather or media entities
    and one with area aliases, entity aliases and floors.
(b) Five-turn conversations (plain; a tool call each turn; the clock in the prompt; saved
    memories): for every follow-up request the tokens a prefix cache must read again
    (re-read: the rendered request after its longest common beginning with the previous
    request) and the excess (re-read minus the tokens of the messages that are new since
    the previous request).

The prompt is rendered as Qwen- and Llama-style templates do: tools inside the system
turn, right after the system message, so a change anywhere in the system message makes
every tool be read again. Tokens are o200k (tiktoken, as LiteLLM bundles it).

    scripts/bench --only tokens [--quick]
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
import json
import logging
from typing import Any

from fakes.script import Reply, ToolCall
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import HomeAssistant
from homeassistant.helpers import area_registry as ar, entity_registry as er, floor_registry as fr

from .context import Bench, bench_agent_options
from .home import (
    AgentHandle,
    agent_handles,
    core_entry,
    home_assistant,
    our_entry,
    setup_base,
    setup_entry,
)
from .prompt import TOKEN_ENCODING
from .report import Row, Stat, judged
from .server import TimedOllamaServer
from .turns import converse

_LOGGER = logging.getLogger(__name__)

FIRST_TARGET = 1.0
COMPACT_TARGET = 0.5
EXCESS_TARGET = 16

# (domain, name, state, attributes), cycled over the areas.
_KINDS: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("light", "{area} Light", "off", {"supported_color_modes": ["brightness"]}),
    ("sensor", "{area} Temperature", "21.5", {"unit_of_measurement": "°C"}),
    ("switch", "{area} Socket", "off", {}),
    ("media_player", "{area} Speaker", "idle", {"volume_level": 0.3}),
    ("binary_sensor", "{area} Motion", "off", {"device_class": "motion"}),
    ("cover", "{area} Blinds", "open", {"current_position": 100}),
    ("climate", "{area} Thermostat", "heat", {"temperature": 21, "current_temperature": 20}),
    ("lock", "{area} Door Lock", "locked", {}),
    ("fan", "{area} Fan", "off", {}),
    ("sensor", "{area} Humidity", "48", {"unit_of_measurement": "%"}),
)
_AREAS = ("Kitchen", "Living Room", "Hallway", "Office", "Bedroom", "Bathroom", "Garage")
_FLOORS = {"Kitchen": "Ground", "Living Room": "Ground", "Hallway": "Ground", "Office": "Ground"}


@dataclass(frozen=True, slots=True)
class HomeShape:
    """One generated home."""

    name: str
    size: int
    weather_and_media: bool = True
    aliases_and_floors: bool = False


HOMES = (
    HomeShape("20 entities", 20),
    HomeShape("100 entities", 100),
    HomeShape("500 entities", 500),
    HomeShape("100, no weather or media", 100, weather_and_media=False),
    HomeShape("100, aliases and floors", 100, aliases_and_floors=True),
)
QUICK_HOMES = (HOMES[0], HOMES[3], HOMES[4])


def create_shaped_home(hass: HomeAssistant, shape: HomeShape) -> None:
    """Areas (floors and aliases if the shape says) and `shape.size` exposed entities."""
    floors = fr.async_get(hass)
    areas = ar.async_get(hass)
    entities = er.async_get(hass)
    floor_ids: dict[str, str] = {}
    if shape.aliases_and_floors:
        floor_ids = {
            name: floors.async_create(name, level=level).floor_id
            for level, name in enumerate(("Ground", "First"))
        }
    area_ids = {
        name: areas.async_create(
            name,
            floor_id=floor_ids.get(_FLOORS.get(name, "First")) if floor_ids else None,
            aliases={f"{name} area"} if shape.aliases_and_floors else set(),
        ).id
        for name in _AREAS
    }
    kinds = [k for k in _KINDS if shape.weather_and_media or k[0] != "media_player"]
    count = 0
    if shape.weather_and_media:
        hass.states.async_set("weather.home", "sunny", {"friendly_name": "Home", "temperature": 7})
        async_expose_entity(hass, "conversation", "weather.home", True)
        count = 1
    round_ = 0
    while count < shape.size:
        for domain, template, state, attributes in kinds:
            for area in _AREAS:
                if count >= shape.size:
                    break
                name = template.format(area=area) + (f" {round_ + 1}" if round_ else "")
                object_id = "".join(c if c.isalnum() else "_" for c in name.lower())
                entry = entities.async_get_or_create(
                    domain, "bench", object_id, suggested_object_id=object_id, original_name=name
                )
                entities.async_update_entity(entry.entity_id, area_id=area_ids[area])
                if shape.aliases_and_floors and count % 3 == 0:
                    entities.async_update_entity(
                        entry.entity_id, aliases=[er.COMPUTED_NAME, f"the {name.lower()}"]
                    )
                hass.states.async_set(entry.entity_id, state, {"friendly_name": name, **attributes})
                async_expose_entity(hass, "conversation", entry.entity_id, True)
                count += 1
        round_ += 1


# --- the prompt as a chat template renders it (Qwen style: tools in the system turn) ---


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def render_message(message: Mapping[str, Any]) -> str:
    """One non-system message as the template writes it."""
    role = message.get("role")
    if role == "tool":
        return (
            f"<|im_start|>user\n<tool_response>\n{_content(message)}\n</tool_response><|im_end|>\n"
        )
    text = _content(message)
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        text += (
            "\n<tool_call>\n"
            + json.dumps({"name": function.get("name"), "arguments": arguments})
            + "\n</tool_call>"
        )
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


def render(body: Mapping[str, Any]) -> str:
    """The whole request as one prompt string."""
    messages = list(body.get("messages") or [])
    system = _content(messages.pop(0)) if messages and messages[0].get("role") == "system" else ""
    head = f"<|im_start|>system\n{system}"
    if tools := body.get("tools"):
        head += "\n\n# Tools\n\n<tools>\n" + "\n".join(json.dumps(t) for t in tools) + "\n</tools>"
    return head + "<|im_end|>\n" + "".join(render_message(m) for m in messages)


def _encode(text: str) -> list[int]:
    from litellm.litellm_core_utils import default_encoding  # noqa: F401  bundled files
    import tiktoken

    return tiktoken.get_encoding(TOKEN_ENCODING).encode(text, disallowed_special=())


def reread(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[int, int]:
    """(re-read tokens, excess) of the request `after` following `before`."""
    old, new = _encode(render(before)), _encode(render(after))
    shared = 0
    for a, b in zip(old, new, strict=False):
        if a != b:
            break
        shared += 1
    read_again = len(new) - shared
    seen = Counter(json.dumps(m, sort_keys=True) for m in before.get("messages") or [])
    fresh = 0
    for message in after.get("messages") or []:
        key = json.dumps(message, sort_keys=True)
        if seen[key]:
            seen[key] -= 1
        else:
            fresh += len(_encode(render_message(message)))
    return read_again, read_again - fresh


# --- runs ---

QUESTIONS = (
    "What does Anna drink in the morning?",
    "When do the bins go out?",
    "Who visits on Sunday?",
    "Is the kitchen light on?",
    "Thanks, and what about Anna's tea?",
)
MEMORIES = {
    "m1": "Anna drinks green tea in the morning",
    "m2": "The bins go out on Tuesday evening",
    "m3": "Grandma visits every Sunday for lunch",
}
SCENARIOS = ("plain", "tool call", "clock in prompt", "saved memories")


async def _conversation(
    hass: HomeAssistant,
    server: TimedOllamaServer,
    agent: AgentHandle,
    scenario: str,
    turn_on_tool: str,
) -> list[Mapping[str, Any]]:
    """The chat requests of one five-turn conversation, in order."""
    start = len(server.records)
    conversation_id = None
    for question in QUESTIONS:
        if scenario == "tool call":
            server.add(Reply(tool_calls=(ToolCall(turn_on_tool, {"name": "Kitchen Light"}),)))
        server.add(Reply(text="Done, it is as you asked."))
        if scenario == "clock in prompt":
            await asyncio.sleep(1.05)  # the clock line changes every second
        result = await converse(hass, server, agent, question, conversation_id)
        if result.error:
            raise RuntimeError(f"{agent.label} {scenario}: {result.error}")
        conversation_id = result.conversation_id
    return [r.body for r in server.records[start:] if r.kind == "chat"]


def system_parts(body: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The system message's paragraphs (base prompt, rules, Home Assistant's instructions,
    the entity listing, …) with their tokens: where a first request's tokens go."""
    messages = body.get("messages") or []
    if not messages or messages[0].get("role") != "system":
        return []
    return [
        (paragraph.splitlines()[0][:60], len(_encode(paragraph)))
        for paragraph in _content(messages[0]).split("\n\n")
        if paragraph.strip()
    ]


def _first(body: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "tokens": len(_encode(render(body))),
        "system_parts": system_parts(body),
        "messages": len(body.get("messages") or []),
        "tools": len(body.get("tools") or []),
        "tokens_per_tool": {
            t["function"]["name"]: len(_encode(json.dumps(t))) for t in body.get("tools") or []
        },
    }


async def _measure_home(shape: HomeShape) -> dict[str, Any]:
    """Every agent's first request and conversations in one generated home."""
    agent_options = bench_agent_options()
    result: dict[str, Any] = {"first": {}, "conversations": {}}
    async with TimedOllamaServer() as server:
        server.default_reply = Reply(text="Fine.")
        async with home_assistant() as hass:
            await setup_base(hass)
            for domain in ("light", "media_player", "weather", "llm"):
                from homeassistant.setup import async_setup_component

                await async_setup_component(hass, domain, {})
            create_shaped_home(hass, shape)
            hass.services.async_register("light", "turn_on", lambda call: None)
            ours = our_entry(
                hass,
                server.base_url,
                {
                    "ours": agent_options,
                    "ours_compact": {**agent_options, "compact_context": True},
                    "ours_clock": {**agent_options, "llm_hass_api": []},
                },
            )
            core = core_entry(hass, server.base_url)
            await setup_entry(hass, ours)
            await setup_entry(hass, core)
            core_clock = core_entry(hass, server.base_url)
            hass.config_entries.async_update_subentry(
                core_clock,
                next(iter(core_clock.subentries.values())),
                data={**next(iter(core_clock.subentries.values())).data, "llm_hass_api": []},
                title="core_clock",
            )
            await setup_entry(hass, core_clock)
            agents = {
                **agent_handles(hass, ours),
                **agent_handles(hass, core),
                **agent_handles(hass, core_clock),
            }
            for label in ("ours", "ours_compact", "core"):
                turn = await converse(hass, server, agents[label], "What is on in the kitchen?")
                if turn.error or not turn.records:
                    raise RuntimeError(f"{label}: {turn.error}")
                result["first"][label] = _first(turn.records[0].body)
            turn_on = next(
                t["function"]["name"]
                for t in turn.records[0].body.get("tools") or []
                if t["function"]["name"].endswith("HassTurnOn")
            )
            store = ours.runtime_data.runtime.store
            for scenario in SCENARIOS:
                if scenario == "saved memories":
                    for key, text in MEMORIES.items():
                        await store.aput(("memories", "household"), key, {"text": text})
                for side in ("ours", "core"):
                    label = f"{side}_clock" if scenario == "clock in prompt" else side
                    requests = await _conversation(hass, server, agents[label], scenario, turn_on)
                    pairs = [reread(a, b) for a, b in pairwise(requests)]
                    result["conversations"][f"{scenario}/{side}"] = {
                        "reread": [p[0] for p in pairs],
                        "excess": [p[1] for p in pairs],
                    }
                if scenario == "saved memories":
                    for key in MEMORIES:
                        await store.adelete(("memories", "household"), key)
    return result


async def measure(bench: Bench) -> list[Row]:
    """Figure 11 in homes of its own (the shared bench home is not used)."""
    homes = QUICK_HOMES if bench.settings.quick else HOMES
    rows: list[Row] = []
    raw: dict[str, Any] = {"token_encoding": TOKEN_ENCODING, "homes": {}}
    for shape in homes:
        measured = await _measure_home(shape)
        raw["homes"][shape.name] = measured
        first = measured["first"]
        core = first["core"]["tokens"]
        for label, target in (("ours", FIRST_TARGET), ("ours_compact", COMPACT_TARGET)):
            ratio = first[label]["tokens"] / core if core else None
            rows.append(
                Row(
                    figure=11,
                    name=f"first request tokens, {label} vs core ({shape.name})",
                    unit="tokens",
                    ours=Stat.single(first[label]["tokens"]),
                    core=Stat.single(core),
                    ratio=ratio,
                    target=f"≤ {target:g} x core's",
                    outcome=judged(None if ratio is None else ratio <= target),
                    single=True,
                    detail=(
                        f"messages {first[label]['messages']} vs {first['core']['messages']}, "
                        f"tools {first[label]['tools']} vs {first['core']['tools']}"
                    ),
                )
            )
        for scenario in SCENARIOS:
            ours = measured["conversations"][f"{scenario}/ours"]
            core_run = measured["conversations"][f"{scenario}/core"]
            worst = max(ours["excess"], default=0)
            rows.append(
                Row(
                    figure=11,
                    name=f"re-read per follow-up, {scenario} ({shape.name})",
                    unit="tokens",
                    ours=Stat.single(sum(ours["reread"]) / max(len(ours["reread"]), 1)),
                    core=Stat.single(sum(core_run["reread"]) / max(len(core_run["reread"]), 1)),
                    ratio=None,
                    target=f"excess ≤ {EXCESS_TARGET}",
                    outcome=judged(worst <= EXCESS_TARGET),
                    single=True,
                    detail=f"excess ours {ours['excess']}, core {core_run['excess']}",
                )
            )
    bench.raw["tokens"] = raw
    return rows
