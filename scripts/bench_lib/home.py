"""A real Home Assistant core with a generated home and both agents, for benchmarking.

Nothing here imports the integration: Home Assistant's loader imports it (in its executor)
when the config entry is set up, so a fresh process can time that import. Agent options
are handed in by the caller (the defaults of the integration's config flow).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
import logging
from pathlib import Path
import tempfile
from typing import Any

from pytest_homeassistant_custom_component.common import (
    MockConfigEntry,
    async_test_home_assistant,
)

from homeassistant import loader
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.config_entries import ConfigEntryState, ConfigSubentryData
from homeassistant.core import HomeAssistant, ServiceCall, callback
from homeassistant.helpers import (
    area_registry as ar,
    entity_registry as er,
    floor_registry as fr,
    frame,
    translation,
)
from homeassistant.setup import async_setup_component

from .server import MODEL

OUR_DOMAIN = "langgraph_conversation"
CORE_DOMAIN = "ollama"
KITCHEN_LIGHT = "light.kitchen_light"
KITCHEN_LIGHT_NAME = "Kitchen Light"

# Core Ollama agent options: Home Assistant's defaults, except that the history is not
# trimmed, so at thread length 50 both agents send the model the same 50 turns (core keeps
# 20 rounds by default; ours keeps the whole thread).
CORE_AGENT_OPTIONS: dict[str, Any] = {
    "model": MODEL,
    "llm_hass_api": ["assist"],
    "max_history": 0,
    "num_ctx": 8192,
    "keep_alive": -1,
    "think": False,
}

# The generated home: floors, areas (with aliases), and what is in each area.
FLOORS = {"ground": ("Ground Floor", 0), "first": ("First Floor", 1)}
AREAS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "Kitchen": ("ground", ("Cooking area",)),
    "Living Room": ("ground", ("Lounge",)),
    "Dining Room": ("ground", ()),
    "Hallway": ("ground", ("Entrance",)),
    "Office": ("ground", ("Study",)),
    "Bedroom": ("first", ("Master bedroom",)),
    "Kids Room": ("first", ("Nursery",)),
    "Bathroom": ("first", ()),
    "Guest Room": ("first", ()),
    "Garage": (None, ()),
    "Garden": (None, ("Backyard",)),
}
# (domain, name template, state, attributes) cycled over the areas until 100 entities.
KINDS: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("light", "{area} Light", "off", {"supported_color_modes": ["brightness"]}),
    ("light", "{area} Ceiling Light", "on", {"supported_color_modes": ["brightness"]}),
    ("sensor", "{area} Temperature", "21.5", {"unit_of_measurement": "°C"}),
    ("sensor", "{area} Humidity", "48", {"unit_of_measurement": "%"}),
    ("binary_sensor", "{area} Motion", "off", {"device_class": "motion"}),
    ("switch", "{area} Socket", "off", {}),
    ("cover", "{area} Blinds", "open", {"current_position": 100}),
    ("media_player", "{area} Speaker", "idle", {"volume_level": 0.3}),
    ("climate", "{area} Thermostat", "heat", {"temperature": 21, "current_temperature": 20}),
    ("fan", "{area} Fan", "off", {}),
    ("lock", "{area} Door Lock", "locked", {}),
)
HOME_SIZE = 100
ALIAS_EVERY = 3


def slug(text: str) -> str:
    """An object id from a name."""
    return "".join(c if c.isalnum() else "_" for c in text.lower()).strip("_")


@callback
def create_home(hass: HomeAssistant, size: int = HOME_SIZE) -> list[str]:
    """Floors, areas and `size` exposed entities (every third with an alias)."""
    floors = fr.async_get(hass)
    areas = ar.async_get(hass)
    entities = er.async_get(hass)
    floor_ids = {
        key: floors.async_create(name, level=level).floor_id
        for key, (name, level) in FLOORS.items()
    }
    area_ids = {
        name: areas.async_create(
            name, floor_id=floor_ids.get(floor) if floor else None, aliases=set(aliases)
        ).id
        for name, (floor, aliases) in AREAS.items()
    }
    created: list[str] = []
    kind_index = 0
    while len(created) < size:
        domain, template, state, attributes = KINDS[kind_index % len(KINDS)]
        for area in AREAS:
            if len(created) >= size:
                break
            name = template.format(area=area)
            object_id = slug(name)
            entry = entities.async_get_or_create(
                domain, "bench", object_id, suggested_object_id=object_id, original_name=name
            )
            entities.async_update_entity(entry.entity_id, area_id=area_ids[area])
            if len(created) % ALIAS_EVERY == 0:
                # The entity keeps its own name (COMPUTED_NAME) and gains an alias.
                alias = f"{area} {domain.replace('_', ' ')} {kind_index + 1}"
                entities.async_update_entity(entry.entity_id, aliases=[er.COMPUTED_NAME, alias])
            hass.states.async_set(entry.entity_id, state, {"friendly_name": name, **attributes})
            async_expose_entity(hass, "conversation", entry.entity_id, True)
            created.append(entry.entity_id)
        kind_index += 1
    if KITCHEN_LIGHT not in created:
        raise RuntimeError(f"the generated home lacks {KITCHEN_LIGHT}: {created[:5]}")
    return created


@dataclass
class ServiceCounter:
    """Mock light services that really switch the state, and count their calls."""

    calls: list[ServiceCall] = field(default_factory=list)

    def register(self, hass: HomeAssistant) -> None:
        """light.turn_on / light.turn_off as Assist's intents call them."""

        async def handle(call: ServiceCall) -> None:
            self.calls.append(call)
            state = "on" if call.service == "turn_on" else "off"
            targets = call.data.get("entity_id") or []
            for entity_id in [targets] if isinstance(targets, str) else targets:
                if (current := hass.states.get(entity_id)) is not None:
                    hass.states.async_set(entity_id, state, current.attributes)

        for service in ("turn_on", "turn_off"):
            hass.services.async_register("light", service, handle)


@dataclass(frozen=True, slots=True)
class AgentHandle:
    """One conversation agent under test."""

    label: str  # "ours", "ours_compact", "core"
    entity_id: str
    entry: MockConfigEntry


@asynccontextmanager
async def home_assistant(config_dir: Path | None = None) -> AsyncIterator[HomeAssistant]:
    """A running Home Assistant core that may load custom integrations, then stopped."""
    with tempfile.TemporaryDirectory(prefix="lgc-bench-") as scratch:
        directory = config_dir or Path(scratch)
        async with async_test_home_assistant(config_dir=str(directory)) as hass:
            # What the plugin's `enable_custom_integrations` fixture does: the repository's
            # custom_components package (first on sys.path) becomes visible.
            hass.data.pop(loader.DATA_CUSTOM_COMPONENTS, None)
            frame.async_setup(hass)
            await translation.async_load_integrations(hass, {"homeassistant"})
            try:
                yield hass
            finally:
                # Unloading is what releases the agents' clients and tasks.
                for entry in hass.config_entries.async_entries():
                    if entry.state is ConfigEntryState.LOADED:
                        await hass.config_entries.async_unload(entry.entry_id)
                await hass.async_stop(force=True)


async def setup_base(hass: HomeAssistant) -> None:
    """What both agents need: homeassistant, conversation, intent."""
    for domain in ("homeassistant", "conversation", "intent"):
        if not await async_setup_component(hass, domain, {}):
            raise RuntimeError(f"could not set up {domain}")
    # Home Assistant's own log noise (debug) stays out of the benchmark's output.
    logging.getLogger("homeassistant").setLevel(logging.WARNING)


def our_entry(
    hass: HomeAssistant, base_url: str, agents: Mapping[str, Mapping[str, Any]]
) -> MockConfigEntry:
    """Our config entry, one conversation subentry per label in `agents`."""
    entry = MockConfigEntry(
        domain=OUR_DOMAIN,
        title=f"ollama_chat/{MODEL}",
        data={"model": f"ollama_chat/{MODEL}", "api_base": base_url},
        subentries_data=[
            ConfigSubentryData(
                data=dict(options), subentry_type="conversation", title=label, unique_id=None
            )
            for label, options in agents.items()
        ],
    )
    entry.add_to_hass(hass)
    return entry


def core_entry(hass: HomeAssistant, base_url: str) -> MockConfigEntry:
    """Home Assistant's Ollama entry (current version) with one conversation agent."""
    entry = MockConfigEntry(
        domain=CORE_DOMAIN,
        title="Ollama",
        data={"url": base_url},
        version=3,
        minor_version=3,
        subentries_data=[
            ConfigSubentryData(
                data=CORE_AGENT_OPTIONS,
                subentry_type="conversation",
                title="core",
                unique_id=None,
            )
        ],
    )
    entry.add_to_hass(hass)
    return entry


def agent_handles(hass: HomeAssistant, entry: MockConfigEntry) -> dict[str, AgentHandle]:
    """The conversation entity of each subentry, by subentry title."""
    registry = er.async_get(hass)
    handles = {}
    for subentry_id, subentry in entry.subentries.items():
        if subentry.subentry_type != "conversation":
            continue
        entity_id = registry.async_get_entity_id("conversation", entry.domain, subentry_id)
        if entity_id is None:
            raise RuntimeError(f"no conversation entity for {entry.domain} {subentry.title}")
        handles[subentry.title] = AgentHandle(subentry.title, entity_id, entry)
    return handles


async def setup_entry(hass: HomeAssistant, entry: MockConfigEntry) -> None:
    """Set up one config entry and wait until its platforms are done."""
    if not await hass.config_entries.async_setup(entry.entry_id):
        raise RuntimeError(f"setting up {entry.domain} failed: {entry.state} {entry.reason}")
    await hass.async_block_till_done()
