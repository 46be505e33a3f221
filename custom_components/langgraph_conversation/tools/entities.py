"""Finding things in the home: fuzzy entity search, one entity's state, a compact overview.

Large homes make Home Assistant's full entity listing expensive in every prompt. Instead an
agent can carry `home_summary` (areas and what kinds of things are in them) and look
entities up when it needs them. Only entities exposed to the assistant are ever searched,
counted or read.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher
import re
import time
from typing import Any

from homeassistant.components.homeassistant.exposed_entities import async_should_expose
from homeassistant.const import ATTR_UNIT_OF_MEASUREMENT
from homeassistant.core import HomeAssistant, State
from homeassistant.helpers import entity_registry as er, floor_registry as fr

from ..agent.errors import ToolFailure
from .registry import ToolContext, ToolSpec
from .targets import entity_area, resolve_targets

CATEGORY = "entities"
DEFAULT_LIMIT = 10
MAX_LIMIT = 50
# Below this similarity a name is not taken for a misspelling of the query.
TYPO_SIMILARITY = 0.75
# Long attribute lists (effects, sources) are cut to this many items.
MAX_LIST_ITEMS = 20
# Longest search query, in characters: a name, a room, a few words. Fuzzy matching costs
# grow with the query's length times each name's, for every entity of the home.
MAX_QUERY_CHARS = 100
# Seconds of matching after which the search lets the event loop run other things (a
# large home is searched in slices, so no search stalls Home Assistant).
YIELD_INTERVAL = 0.005

# Search tiers, best first; typo matches score below all of them by similarity.
_EXACT_NAME = 100.0
_EXACT_ALIAS = 90.0
_PREFIX = 70.0
_SUBSTRING = 60.0
_PLACE = 50.0
_DOMAIN = 45.0
_ALL_WORDS = 40.0
_TYPO_BASE = 20.0

# Attributes worth showing in search results: what people ask about most.
_SEARCH_ATTRIBUTES = (
    ATTR_UNIT_OF_MEASUREMENT,
    "device_class",
    "current_temperature",
    "temperature",
    "hvac_action",
    "current_position",
    "media_title",
    "media_artist",
    "volume_level",
)
# Attributes that say nothing to a model, left out of home_get_state.
_NOISE_ATTRIBUTES = frozenset(
    {
        "friendly_name",
        "icon",
        "entity_picture",
        "entity_picture_local",
        "supported_features",
        "attribution",
        "restored",
        "editable",
        "id",
        "assumed_state",
    }
)


@dataclass(frozen=True, slots=True)
class EntityInfo:
    """An exposed entity with the words people may use for it."""

    state: State
    aliases: tuple[str, ...]
    area: str | None
    area_words: tuple[str, ...]  # area and floor names and aliases, normalised
    floor: str | None

    @property
    def domain(self) -> str:
        """The entity's domain (light, sensor, ...)."""
        return self.state.domain


def normalize(text: str) -> str:
    """Lower case, punctuation and underscores as spaces, single spaces."""
    return " ".join(re.sub(r"[\W_]+", " ", text.casefold()).split())


def _aliases(entry: er.RegistryEntry | None) -> tuple[str, ...]:
    # Aliases are a set up to 2026.8 and an ordered list from 2026.9, where the entity's
    # own computed name is a non-string marker among them (the name is matched anyway).
    if entry is None or not entry.aliases:
        return ()
    aliases = [alias for alias in entry.aliases if isinstance(alias, str) and alias.strip()]
    return tuple(sorted(aliases) if isinstance(entry.aliases, set) else aliases)


def describe(hass: HomeAssistant, state: State) -> EntityInfo:
    """Names, aliases, area and floor of one entity."""
    area = entity_area(hass, state.entity_id)
    floor = fr.async_get(hass).async_get_floor(area.floor_id) if area and area.floor_id else None
    places = [*(area.aliases if area else ()), *(floor.aliases if floor else ())]
    places += [entry.name for entry in (area, floor) if entry is not None]
    return EntityInfo(
        state=state,
        aliases=_aliases(er.async_get(hass).async_get(state.entity_id)),
        area=area.name if area else None,
        area_words=tuple(normalize(place) for place in places),
        floor=floor.name if floor else None,
    )


def exposed_entities(hass: HomeAssistant, assistant: str) -> Iterable[EntityInfo]:
    """Every entity exposed to the assistant, described."""
    for state in hass.states.async_all():
        if async_should_expose(hass, assistant, state.entity_id):
            yield describe(hass, state)


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _similarity(query: str, name: str) -> float:
    """How alike the query is to the name or to a run of as many of its words, if at
    least TYPO_SIMILARITY; 0.0 otherwise.

    "temprature" is far from "kitchen temperature" as a whole but close to its last word.
    The cheap upper bounds of difflib (lengths, then shared characters) rule out most
    names before the quadratic `ratio()`, as `difflib.get_close_matches` does.
    """
    words = name.split()
    size = len(query.split())
    runs = (" ".join(words[i : i + size]) for i in range(max(len(words) - size + 1, 1)))
    best = 0.0
    matcher = SequenceMatcher(None)
    matcher.set_seq2(query)
    for text in (name, *runs):
        matcher.set_seq1(text)
        if (
            matcher.real_quick_ratio() >= TYPO_SIMILARITY
            and matcher.quick_ratio() >= TYPO_SIMILARITY
        ):
            best = max(best, matcher.ratio())
    return best


def score(query: str, info: EntityInfo) -> float | None:
    """How well a normalised query matches an entity; None if it does not."""
    name = normalize(info.state.name)
    aliases = [normalize(alias) for alias in info.aliases]
    names = [name, *aliases]
    domain = info.domain.replace("_", " ")
    if query == name:
        return _EXACT_NAME
    if query in aliases:
        return _EXACT_ALIAS
    if any(n.startswith(query) for n in names):
        return _PREFIX
    if any(query in n for n in names):
        return _SUBSTRING
    if query in info.area_words:
        return _PLACE
    if _singular(query) == domain:
        return _DOMAIN
    # "kitchen lights": every word found in the names, the place or the kind of thing.
    haystack = " ".join([*names, *info.area_words, domain])
    if all(_singular(word) in haystack for word in query.split()):
        return _ALL_WORDS
    similarity = max(_similarity(query, n) for n in names)
    if similarity >= TYPO_SIMILARITY:
        return _TYPO_BASE + 10 * similarity
    return None


def _in_area(info: EntityInfo, area: str | None) -> bool:
    """Whether the entity is in `area` (normalised), or no area is asked for."""
    return area is None or area in info.area_words


def _brightness(state: State) -> dict[str, int]:
    """Brightness in percent, as people say it (the attribute runs 0-255)."""
    if (brightness := state.attributes.get("brightness")) is None:
        return {}
    return {"brightness_pct": round(brightness / 255 * 100)}


def _identity(info: EntityInfo) -> dict[str, Any]:
    """Which entity this is and where: what every result starts with."""
    identity: dict[str, Any] = {
        "entity_id": info.state.entity_id,
        "name": info.state.name,
        "domain": info.domain,
        "state": info.state.state,
    }
    place = {"aliases": list(info.aliases), "area": info.area, "floor": info.floor}
    identity.update({key: value for key, value in place.items() if value})
    return identity


def _found(info: EntityInfo) -> dict[str, Any]:
    attributes = info.state.attributes
    useful = {key: attributes[key] for key in _SEARCH_ATTRIBUTES if key in attributes}
    return {**_identity(info), **useful, **_brightness(info.state)}


async def _find_entities(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    raw_query = arguments.get("query") or ""
    if len(raw_query) > MAX_QUERY_CHARS:
        raise ToolFailure(
            {
                "error": "query_too_long",
                "error_text": f"The query has {len(raw_query):,} characters; search with a "
                f"few words (at most {MAX_QUERY_CHARS}).",
            }
        )
    query = normalize(raw_query)
    domain = (arguments.get("domain") or "").strip().lower() or None
    area = normalize(arguments.get("area") or "") or None
    limit = min(max(int(arguments.get("limit") or DEFAULT_LIMIT), 1), MAX_LIMIT)

    ranked: list[tuple[float, str, EntityInfo]] = []
    paused = time.perf_counter()
    for info in exposed_entities(tool_context.hass, tool_context.assistant):
        if time.perf_counter() - paused > YIELD_INTERVAL:
            # The states are read from Home Assistant on the loop (never from a thread),
            # so a large home is searched in slices instead.
            await asyncio.sleep(0)
            paused = time.perf_counter()
        if (domain and info.domain != domain) or not _in_area(info, area):
            continue
        points = score(query, info) if query else 0.0
        if points is not None:
            ranked.append((points, info.state.name.casefold(), info))
    ranked.sort(key=lambda item: (-item[0], item[1]))
    return {"count": len(ranked), "entities": [_found(info) for _, _, info in ranked[:limit]]}


def _capped(value: Any) -> Any:
    """Collections as lists of at most MAX_LIST_ITEMS; other values unchanged."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)[:MAX_LIST_ITEMS]
    return value


async def _get_state(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    if not (name := (arguments.get("name") or "").strip()):
        raise ToolFailure({"error": "invalid_arguments", "error_text": "name is required"})
    (state,) = await resolve_targets(
        tool_context,
        name=name,
        area=arguments.get("area"),
        domains=set(),
        single=True,
    )
    return {
        **_identity(describe(tool_context.hass, state)),
        "last_changed": state.last_changed.isoformat(),
        "attributes": {
            key: _capped(value)
            for key, value in state.attributes.items()
            if key not in _NOISE_ATTRIBUTES
        },
        **_brightness(state),
    }


def _plural(domain: str, count: int) -> str:
    words = domain.replace("_", " ")
    if count == 1:  # "light", not "1 light": a token less per kind and area
        return words
    suffix = "es" if words.endswith(("s", "sh", "ch", "x")) else "s"
    return f"{count} {words}{suffix}"


def _counts(infos: list[EntityInfo]) -> str:
    counted = Counter(info.domain for info in infos)
    return ", ".join(_plural(domain, n) for domain, n in sorted(counted.items()))


def home_summary(hass: HomeAssistant, assistant: str) -> str:
    """What the exposed home holds, by floor and area, with counts per kind of entity.

    E.g. "Ground floor — Kitchen: 3 lights, media player; Living room: 2 lights" per
    floor, then areas without a floor, then "No area: 2 sensors".
    """
    by_area: dict[tuple[str, str], list[EntityInfo]] = {}
    for info in exposed_entities(hass, assistant):
        by_area.setdefault((info.floor or "", info.area or ""), []).append(info)

    floors = {floor.name: floor for floor in fr.async_get(hass).async_list_floors()}

    def floor_order(floor_name: str) -> tuple[int, int, str]:
        floor = floors.get(floor_name)
        level = floor.level if floor and floor.level is not None else 0
        return (not floor_name, level, floor_name)  # floors first, no-floor areas last

    lines: list[str] = []
    for floor_name in sorted({floor for floor, _ in by_area}, key=floor_order):
        areas = sorted(area for floor, area in by_area if floor == floor_name and area)
        described = "; ".join(f"{area}: {_counts(by_area[floor_name, area])}" for area in areas)
        if described:
            lines.append(f"{floor_name} — {described}" if floor_name else described)
    if unplaced := by_area.get(("", "")):
        lines.append(f"No area: {_counts(unplaced)}")
    return "\n".join(lines) or "No entities are exposed to the assistant."


SPECS: list[ToolSpec] = [
    ToolSpec(
        name="home_find_entities",
        description=(
            "Find entities by name, alias, area, floor or kind ('light'), typos tolerated: "
            "best first, with state and area."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "A few words, e.g. kitchen lamp",
                },
                "domain": {"type": "string", "description": "e.g. sensor"},
                "area": {"type": "string"},
                # No bounds in the schema (tokens in every request): the handler clamps
                # the limit to 1..MAX_LIMIT.
                "limit": {"type": "integer"},
            },
        },
        category=CATEGORY,
        handler=_find_entities,
    ),
    ToolSpec(
        name="home_get_state",
        description=(
            "Read one entity's current state and attributes (temperature, brightness, what is "
            "playing, ...) by its name, alias or entity_id."
        ),
        parameters={
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Entity name, alias or entity_id"},
                "area": {
                    "type": "string",
                    "description": "Area, when several entities share the name",
                },
            },
            "required": ["name"],
        },
        category=CATEGORY,
        handler=_get_state,
        covered_by=frozenset({"GetLiveContext"}),
    ),
]
