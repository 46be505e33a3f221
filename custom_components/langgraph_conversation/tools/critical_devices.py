"""Critical by device: the buttons and switches that open a home without being a lock.

Many garage openers, gate controllers and door strikes are a relay: a button or switch
that Home Assistant shows beside the cover, lock or alarm panel of the same device.
Pressing it does what `cover.open_cover` does, so a rule by domain alone would let the
model open the garage by pressing "Garage Opener". The gate therefore also asks for a
yes before any service on a button or switch whose device (the entity registry's
device id) also carries a lock, an alarm panel, or a cover of class garage, gate or
door. The device's entities come from the entity registry's index by device, looked up
only for calls on buttons and switches, so calls that cannot be critical never pay.

Not every relay sits on such a device (a smart plug wired to the opener is a device of
its own). For those the agent form suggests, among the exposed buttons and switches,
the ones whose own or device name points to a garage, gate, door, lock or alarm: a
suggestion the user confirms into "always needs my yes", never a silent rule, since a
name is a guess ("Door chime") and the user knows their home.
"""

from __future__ import annotations

import re

from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_should_expose
from homeassistant.core import HomeAssistant, State
from homeassistant.helpers import device_registry as dr, entity_registry as er

# Covers that open into the home (the gate's rule for covers, shared here).
OPENABLE_COVER_CLASSES = frozenset({"garage", "gate", "door"})
# Domains whose entities act as a relay of the device they sit on.
RELAY_DOMAINS = frozenset({"button", "switch"})
# Domains that make a device critical whatever their class.
_GUARDING_DOMAINS = frozenset({"lock", "alarm_control_panel"})

# Words that point to a way into the home, in the languages Assist ships most (English,
# German, French, Dutch, Spanish), with German's common compounds spelled out, since a
# compound has no word boundary inside it.
_WORDS = (
    "garage",
    "gate",
    "door",
    "lock",
    "alarm",
    "tor",
    "tür",
    "tuer",
    "garagentor",
    "hoftor",
    "einfahrtstor",
    "haustür",
    "haustuer",
    "türöffner",
    "schloss",
    "türschloss",
    "porte",
    "portail",
    "serrure",
    "alarme",
    "deur",
    "poort",
    "slot",
    "garagedeur",
    "voordeur",
    "puerta",
    "verja",
    "portón",
    "cerradura",
    "alarma",
)
_POINTS_IN = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, _WORDS)) + r")(?!\w)", re.I)


def opens_into_home(device_class: object) -> bool:
    """A cover of this class opens into the home (garage door, gate, door)."""
    return device_class in OPENABLE_COVER_CLASSES


def guarded_by(hass: HomeAssistant, entity_id: str) -> str | None:
    """For a button or switch on the same device as a lock, an alarm panel or a garage,
    gate or door cover: that entity's name (the reason to ask). Otherwise None."""
    if entity_id.split(".", 1)[0] not in RELAY_DOMAINS:
        return None
    registry = er.async_get(hass)
    entry = registry.async_get(entity_id)
    if entry is None or entry.device_id is None:
        return None
    # Disabled entities count too: the device still opens the home.
    for sibling in er.async_entries_for_device(
        registry, entry.device_id, include_disabled_entities=True
    ):
        if sibling.entity_id != entity_id and _guards(sibling, hass.states.get(sibling.entity_id)):
            state = hass.states.get(sibling.entity_id)
            return state.name if state is not None else sibling.name or sibling.entity_id
    return None


def _guards(entry: er.RegistryEntry, state: State | None) -> bool:
    """A lock, an alarm panel, or a cover opening into the home (by its state's class,
    else the registry's, so an unavailable cover still counts)."""
    if entry.domain in _GUARDING_DOMAINS:
        return True
    if entry.domain != "cover":
        return False
    classes = (
        state.attributes.get("device_class") if state is not None else None,
        entry.device_class,
        entry.original_device_class,
    )
    return any(opens_into_home(device_class) for device_class in classes)


def points_into_home(name: str | None) -> bool:
    """Whether a name has a word for a garage, gate, door, lock or alarm."""
    return bool(name) and _POINTS_IN.search(name or "") is not None


def suggested_confirm_entities(hass: HomeAssistant) -> list[str]:
    """Exposed buttons and switches that probably open the home: on a guarded device, or
    named (themselves or their device) for a garage, gate, door, lock or alarm."""
    entities = er.async_get(hass)
    devices = dr.async_get(hass)
    found: list[str] = []
    for state in hass.states.async_all(tuple(RELAY_DOMAINS)):
        if not async_should_expose(hass, conversation.DOMAIN, state.entity_id):
            continue
        entry = entities.async_get(state.entity_id)
        device = devices.async_get(entry.device_id) if entry and entry.device_id else None
        names = (
            state.name,
            entry.name if entry else None,
            entry.original_name if entry else None,
            device.name_by_user if device else None,
            device.name if device else None,
        )
        if guarded_by(hass, state.entity_id) or any(map(points_into_home, names)):
            found.append(state.entity_id)
    return sorted(found)


def labelled(hass: HomeAssistant, entity_ids: list[str]) -> list[str]:
    """Entities as the form lists them: "Garage Opener (button.garage_opener)"."""
    labels = []
    for entity_id in entity_ids:
        state = hass.states.get(entity_id)
        labels.append(f"{state.name if state is not None else entity_id} ({entity_id})")
    return labels
