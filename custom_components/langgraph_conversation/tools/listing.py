"""Home Assistant's entity listing, said in fewer tokens with the same facts.

The Assist API prompt lists every exposed entity as YAML, three lines each
(`- names: …`, `  domain: …`, `  areas: …`): the keys and the area, repeated per entity,
are most of its tokens. Here the same listing is grouped by area, one line per area:

    - Kitchen, Cooking area: Kitchen Light, the lamp (light); Kitchen Temperature (sensor)

Names, aliases and areas are Home Assistant's own strings, unchanged and in its order;
only the layout changes, and a legend after the header line says that the brackets hold
the domain. The header and every instruction around the listing stay as Home Assistant
wrote them. Whenever the listing holds anything this layout cannot say unambiguously (a
key other than names, domain and areas; a name with `;`, `(`, `)` or a line break; YAML
that does not read back), Home Assistant's text is kept as it is.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import yaml

from .context import entity_listing

# What an entity of the listing may hold for the dense layout to say all of it.
_KEYS = frozenset({"names", "domain", "areas"})
# Characters the dense layout uses as separators (a name holding one stays in YAML).
_SEPARATORS = (";", "(", ")", "\n", "\r")
# What a line of the dense layout holds, said after Home Assistant's header line.
LEGEND = "Brackets hold the domain."
# The group of entities Home Assistant lists without an area.
NO_AREA = "(no area)"
# libyaml's loader where PyYAML was built with it (ten times faster than the pure-Python
# one, which took about 15 ms per turn on a 20-entity listing in bench figure 1).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _said_plainly(value: Any) -> bool:
    return (
        isinstance(value, str) and bool(value.strip()) and not any(s in value for s in _SEPARATORS)
    )


def _entities(yaml_text: str) -> list[dict[str, str]] | None:
    """The listing's entities, or None when the dense layout could not say them all."""
    try:
        entities = yaml.load(yaml_text, Loader=_LOADER)  # a safe loader, either way
    except yaml.YAMLError:
        return None
    if not isinstance(entities, list) or not entities:
        return None
    for entity in entities:
        if not isinstance(entity, dict) or not {"names", "domain"} <= set(entity) <= _KEYS:
            return None
        if not all(_said_plainly(value) for value in entity.values()):
            return None
    return entities


def dense_system_prompt(system_prompt: str) -> str:
    """The prompt with its entity listing grouped by area (see the module docstring);
    the prompt unchanged when it has no listing or the listing cannot be said densely."""
    listing = entity_listing(system_prompt)
    if not listing:
        return system_prompt
    dense = _dense_listing(listing)
    return system_prompt if dense is None else system_prompt.replace(listing, dense, 1)


# The same home lists the same text turn after turn: it is read once, not every turn.
@lru_cache(maxsize=8)
def _dense_listing(listing: str) -> str | None:
    """`listing` grouped by area, None when the dense layout cannot say it."""
    header, _, body = listing.partition("\n")
    entities = _entities(body)
    if entities is None:
        return None
    by_area: dict[str, list[str]] = {}
    for entity in entities:
        area = entity.get("areas", NO_AREA)
        by_area.setdefault(area, []).append(f"{entity['names']} ({entity['domain']})")
    # Areas alphabetically, the entities without one last: the same home gives the same
    # text every turn, so a prefix cache keeps it.
    areas = sorted(by_area, key=lambda area: (area == NO_AREA, area.casefold()))
    lines = [f"- {area}: {'; '.join(by_area[area])}" for area in areas]
    ending = "\n" if listing.endswith("\n") else ""
    # Without the legend a small model may take "Kitchen Light (light)" for a name.
    return "\n".join([f"{header} {LEGEND}", *lines]) + ending
