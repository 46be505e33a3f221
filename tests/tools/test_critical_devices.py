"""Critical by device: a relay button or switch beside a lock, alarm panel or garage door.

Generated homes (seeded) of devices: some carry a garage, gate or door cover, a lock or
an alarm panel together with a relay button or switch, others a plain button or switch
beside a blind, a light or nothing. Calls go through Home Assistant's real service
registry under a turn's Context, so the gate sees them as it sees an agent's; what
counts is what Home Assistant ran (recorded from the bus, which fires only for calls
that execute). One relay is pressed by the model in a whole conversation turn against
the fake OpenAI server.
"""

from __future__ import annotations

from dataclasses import dataclass
import random
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service

from custom_components.langgraph_conversation.const import (
    CONF_CONFIRM_ENTITIES,
    SUBENTRY_CONVERSATION,
)
from custom_components.langgraph_conversation.tools import critical_devices
from custom_components.langgraph_conversation.tools.effects import EffectGate
from fakes import FakeOpenAIServer, ToolCall
from homeassistant import config_entries
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.const import EVENT_CALL_SERVICE
from homeassistant.core import Context, Event, HomeAssistant, callback
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers import (
    area_registry as ar,
    device_registry as dr,
    entity_registry as er,
    target as target_helpers,
)
from homeassistant.setup import async_setup_component

from ..conftest import agent_entity_id
from ..helpers import assist_tool_name

SEED = 2704
RELAY_SERVICES = {"button": ("press",), "switch": ("turn_on", "turn_off", "toggle")}
# What makes a device guarded (domain, cover class) and what does not.
GUARDS = [("cover", "garage"), ("cover", "gate"), ("cover", "door"), ("lock", None)]
GUARDS += [("alarm_control_panel", None)]
UNGUARDED = [("cover", "blind"), ("cover", "shutter"), ("light", None), ("sensor", None)]
UNGUARDED += [(None, None)]
# Neutral names: the gate must decide by device, never by a name.
NOUNS = ["Unit", "Box", "Module", "Controller", "Hub", "Node", "Bridge", "Panel"]


@dataclass(frozen=True)
class Relay:
    """One generated button or switch, and whether its device is guarded."""

    entity_id: str
    device_id: str
    area_id: str
    guarded: bool


class Recorder:
    """Service calls Home Assistant executed (the bus event fires only when one runs)."""

    def __init__(self, hass: HomeAssistant) -> None:
        self.hass = hass
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        hass.bus.async_listen(EVENT_CALL_SERVICE, self._record)

    @callback
    def _record(self, event: Event) -> None:
        data = dict(event.data["service_data"])
        self.calls.append((event.data["domain"], event.data["service"], data))

    def on(self, entity_id: str, start: int = 0) -> list[tuple[str, str]]:
        """The calls since `start` that acted on this relay (its own domain's services)."""
        acted = []
        for domain, service, data in self.calls[start:]:
            if domain in RELAY_SERVICES and entity_id in self._targets(data):
                acted.append((domain, service))
        return acted

    def _targets(self, data: dict[str, Any]) -> set[str]:
        """The entities a call reached, as Home Assistant resolves its target."""
        selection = {key: data[key] for key in ("device_id", "area_id") if key in data}
        raw = data.get("entity_id") or []
        for item in [raw] if isinstance(raw, str) else raw:
            selection.setdefault("entity_id", []).extend(
                part.strip() for part in item.split(",") if part.strip()
            )
        found = target_helpers.async_extract_referenced_entity_ids(
            self.hass, target_helpers.TargetSelection(selection)
        )
        return found.referenced | found.indirectly_referenced


def _mock_services(hass: HomeAssistant) -> None:
    for domain, services in RELAY_SERVICES.items():
        for service in services:
            async_mock_service(hass, domain, service)


def generated_home(hass: HomeAssistant, rng: random.Random, count: int) -> list[Relay]:
    """`count` devices, each with one relay, about half of them guarded; every entity in
    the real entity and device registries, with states, exposed to Assist."""
    source = MockConfigEntry(domain="relay_test")
    source.add_to_hass(hass)
    devices = dr.async_get(hass)
    entities = er.async_get(hass)
    areas = ar.async_get(hass)
    relays: list[Relay] = []
    for index in range(count):
        guarded = index % 2 == 0 or rng.random() < 0.2
        domain, device_class = rng.choice(GUARDS if guarded else UNGUARDED)
        noun = rng.choice(NOUNS)
        area = areas.async_get_or_create(f"Room {index}")
        device = devices.async_get_or_create(
            config_entry_id=source.entry_id,
            identifiers={("relay_test", f"device-{index}")},
            name=f"{noun} {index}",
        )
        devices.async_update_device(device.id, area_id=area.id)
        if domain is not None:
            sibling = entities.async_get_or_create(
                domain,
                "relay_test",
                f"sibling-{index}",
                device_id=device.id,
                suggested_object_id=f"{noun.lower()}_{index}_{domain}",
                original_device_class=device_class,
            )
            attributes = {"friendly_name": f"{noun} {index} {domain}"}
            # The cover's class as its state reports it, or only in the registry
            # (an unavailable cover reports none and still counts).
            if device_class is not None and rng.random() < 0.7:
                attributes["device_class"] = device_class
            hass.states.async_set(sibling.entity_id, "closed", attributes)
        relay_domain = rng.choice(sorted(RELAY_SERVICES))
        relay = entities.async_get_or_create(
            relay_domain,
            "relay_test",
            f"relay-{index}",
            device_id=device.id,
            suggested_object_id=f"{noun.lower()}_{index}_output",
            original_name=f"{noun} {index} output",
        )
        hass.states.async_set(relay.entity_id, "off", {"friendly_name": f"{noun} {index} output"})
        async_expose_entity(hass, conversation.DOMAIN, relay.entity_id, True)
        relays.append(Relay(relay.entity_id, device.id, area.id, domain is not None and guarded))
    return relays


def call_shapes(relay: Relay, rng: random.Random) -> list[tuple[str, str, dict[str, Any]]]:
    """Ways to act on a relay: its own services by entity, device or area, a comma
    string, and Home Assistant's generic services on a switch."""
    domain = relay.entity_id.split(".", 1)[0]
    shapes = [
        (domain, service, {"entity_id": relay.entity_id}) for service in RELAY_SERVICES[domain]
    ]
    shapes.append((domain, rng.choice(RELAY_SERVICES[domain]), {"device_id": relay.device_id}))
    shapes.append((domain, RELAY_SERVICES[domain][0], {"area_id": [relay.area_id]}))
    shapes.append((domain, RELAY_SERVICES[domain][0], {"entity_id": f" {relay.entity_id} ,"}))
    if domain == "switch":
        shapes += [
            ("homeassistant", "turn_on", {"entity_id": relay.entity_id}),
            ("homeassistant", "toggle", {"entity_id": [relay.entity_id]}),
        ]
    return shapes


async def test_generated_relays_wait_for_a_yes(
    hass: HomeAssistant, setup_integration: MockConfigEntry
) -> None:
    """A relay on a guarded device runs only after the yes, exactly once and on itself;
    after a no it never runs; a button or switch on any other device runs at once."""
    rng = random.Random(SEED)
    _mock_services(hass)
    relays = generated_home(hass, rng, 24)
    recorder = Recorder(hass)
    gate = EffectGate.of(hass)
    held_cases = plain_cases = 0
    for relay in relays:
        for index, (domain, service, data) in enumerate(call_shapes(relay, rng)):
            label = f"{relay} {domain}.{service} {data}"
            scope = gate.open_scope(Context())
            start = len(recorder.calls)
            await hass.services.async_call(
                domain, service, data, blocking=True, context=scope.context
            )
            await hass.async_block_till_done()
            held = scope.take_held()
            if not relay.guarded:
                plain_cases += 1
                assert held is None, label
                assert recorder.on(relay.entity_id, start), label
                scope.close()
                continue
            held_cases += 1
            assert held is not None, label
            assert recorder.on(relay.entity_id, start) == [], label
            confirmed = index % 2 == 0
            outcome = await scope.release(held.token, confirmed=confirmed)
            await hass.async_block_till_done()
            scope.close()
            ran = recorder.on(relay.entity_id, start)
            if not confirmed:
                assert outcome == {}, label
                assert ran == [], label
                continue
            relay_domain = relay.entity_id.split(".", 1)[0]
            assert len(ran) == 1, f"{label}: {ran}"
            assert ran[0][0] == relay_domain, f"{label}: {ran}"
            assert [done for released in outcome.values() for done in released.done], label
    # Not vacuous: both kinds of device were generated and tried.
    assert held_cases >= 30, held_cases
    assert plain_cases >= 10, plain_cases


async def test_a_call_on_a_relay_and_a_plain_switch_splits(
    hass: HomeAssistant, setup_integration: MockConfigEntry
) -> None:
    """One call on a guarded relay and a plain switch: the plain one switches now, the
    relay waits; the question names only the relay."""
    _mock_services(hass)
    rng = random.Random(SEED + 1)
    relays = generated_home(hass, rng, 40)
    relay = next(r for r in relays if r.guarded and r.entity_id.startswith("switch."))
    plain = next(r for r in relays if not r.guarded and r.entity_id.startswith("switch."))
    recorder = Recorder(hass)
    scope = EffectGate.of(hass).open_scope(Context())
    await hass.services.async_call(
        "switch",
        "turn_on",
        {"entity_id": [relay.entity_id, plain.entity_id]},
        blocking=True,
        context=scope.context,
    )
    assert recorder.on(plain.entity_id) == [("switch", "turn_on")]
    assert recorder.on(relay.entity_id) == []
    held = scope.take_held()
    assert held is not None
    actions = [action for names in held.by_call.values() for action in names]
    assert actions == [f"turn on {hass.states.get(relay.entity_id).name}"]
    await scope.release(held.token, confirmed=True)
    scope.close()
    assert recorder.on(relay.entity_id) == [("switch", "turn_on")]


async def test_calls_outside_a_turn_and_unrelated_domains_pass(
    hass: HomeAssistant, setup_integration: MockConfigEntry
) -> None:
    """A person's press of the garage relay is not the gate's business; a light on the
    garage's device is not a relay."""
    _mock_services(hass)
    async_mock_service(hass, "light", "turn_on")
    relays = generated_home(hass, random.Random(SEED + 2), 6)
    relay = next(r for r in relays if r.guarded)
    domain = relay.entity_id.split(".", 1)[0]
    recorder = Recorder(hass)
    await hass.services.async_call(
        domain, RELAY_SERVICES[domain][0], {"entity_id": relay.entity_id}, blocking=True
    )
    assert recorder.on(relay.entity_id) == [(domain, RELAY_SERVICES[domain][0])]
    light = er.async_get(hass).async_get_or_create(
        "light", "relay_test", "garage-light", device_id=relay.device_id
    )
    scope = EffectGate.of(hass).open_scope(Context())
    await hass.services.async_call(
        "light", "turn_on", {"entity_id": light.entity_id}, blocking=True, context=scope.context
    )
    assert scope.take_held() is None
    scope.close()
    assert [call[:2] for call in recorder.calls[1:]] == [("light", "turn_on")]


def _garage_with_opener(hass: HomeAssistant) -> tuple[str, str]:
    """A garage door device with its opener relay, and a plain doorbell-less button."""
    source = MockConfigEntry(domain="relay_test")
    source.add_to_hass(hass)
    devices = dr.async_get(hass)
    entities = er.async_get(hass)
    garage = devices.async_get_or_create(
        config_entry_id=source.entry_id, identifiers={("relay_test", "garage")}, name="Shelly"
    )
    other = devices.async_get_or_create(
        config_entry_id=source.entry_id, identifiers={("relay_test", "fan")}, name="Ceiling Fan"
    )
    cover = entities.async_get_or_create("cover", "relay_test", "garage-cover", device_id=garage.id)
    hass.states.async_set(cover.entity_id, "closed", {"device_class": "garage"})
    opener = entities.async_get_or_create(
        "button",
        "relay_test",
        "garage-relay",
        device_id=garage.id,
        suggested_object_id="opener",
        original_name="Shelly Pulse",
    )
    hass.states.async_set(opener.entity_id, "unknown", {"friendly_name": "Shelly Pulse"})
    plain = entities.async_get_or_create(
        "button",
        "relay_test",
        "fan-speed",
        device_id=other.id,
        suggested_object_id="fan_boost",
        original_name="Ceiling Fan Boost",
    )
    hass.states.async_set(plain.entity_id, "unknown", {"friendly_name": "Ceiling Fan Boost"})
    for entity_id in (opener.entity_id, plain.entity_id, cover.entity_id):
        async_expose_entity(hass, conversation.DOMAIN, entity_id, True)
    async_mock_service(hass, "button", "press")
    return opener.entity_id, plain.entity_id


@pytest.mark.parametrize("reply", ["Yes please", "No"])
async def test_the_model_presses_the_garage_relay(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    reply: str,
) -> None:
    """A whole turn: the model presses the garage's relay through Assist; nothing is
    pressed, a question is asked; the same person's yes presses it once, a no never.
    The plain button the model presses in the same turn is pressed at once."""
    opener, plain = _garage_with_opener(hass)
    recorder = Recorder(hass)
    tool = await assist_tool_name(hass, "HassTurnOn")
    openai_server.add_tool_calls(
        [ToolCall(tool, {"name": "Shelly Pulse"}), ToolCall(tool, {"name": "Ceiling Fan Boost"})]
    )
    openai_server.add_text("Done.")
    agent = agent_entity_id(hass, setup_integration)
    first = await conversation.async_converse(
        hass, "Open the garage and boost the fan", None, Context(), agent_id=agent
    )
    await hass.async_block_till_done()
    speech = first.response.speech["plain"]["speech"]
    assert speech.startswith("To be safe I need your yes first"), speech
    assert "press Shelly Pulse" in speech
    assert "Fan Boost" not in speech
    assert first.continue_conversation is True
    assert recorder.on(opener) == []
    assert recorder.on(plain) == [("button", "press")]
    answer = await conversation.async_converse(
        hass, reply, first.conversation_id, Context(), agent_id=agent
    )
    await hass.async_block_till_done()
    assert answer.response.speech["plain"]["speech"] == "Done."
    pressed = [("button", "press")] if reply.startswith("Yes") else []
    assert recorder.on(opener) == pressed
    assert recorder.on(plain) == [("button", "press")]


def test_names_that_point_into_the_home() -> None:
    """Words for a garage, gate, door, lock or alarm in five languages, on word
    boundaries, whatever the case; names that merely contain the letters do not."""
    pointing = [
        "Garage opener",
        "GATE relay",
        "Front door strike",
        "Lock button",
        "Alarm siren switch",
        "Garagentor",
        "Hoftor Impuls",
        "Tür öffnen",
        "Haustür",
        "Schloss",
        "Porte du garage",
        "Portail",
        "Serrure",
        "Alarme",
        "Voordeur",
        "Poort",
        "Slot",
        "Puerta",
        "Verja",
        "Alarma",
        "relay (garage)",
    ]
    plain = ["Doorbell chime", "Blocked drain", "Toronto lamp", "Alarmclock", "Gates Foundation"]
    plain += ["Deurbel", "Portero", "Kettle", "Fan boost", "Garages", "Sloten", ""]
    for name in pointing:
        assert critical_devices.points_into_home(name), name
    for name in plain:
        assert not critical_devices.points_into_home(name), name


@pytest.mark.parametrize("agent_overrides", [{CONF_CONFIRM_ENTITIES: ["script.party_mode"]}])
async def test_the_agent_form_suggests_openers(
    hass: HomeAssistant, setup_integration: MockConfigEntry
) -> None:
    """A new agent's form pre-fills the exposed buttons and switches on a guarded device
    or named for a way in (not the unexposed one, not the plain one); an existing
    agent's form keeps its saved choice and lists the suggestions in the description."""
    opener, _plain = _garage_with_opener(hass)
    entities = er.async_get(hass)
    gate_switch = entities.async_get_or_create(
        "switch", "relay_test", "gate", suggested_object_id="x"
    )
    hass.states.async_set(gate_switch.entity_id, "off", {"friendly_name": "Driveway Gate"})
    async_expose_entity(hass, conversation.DOMAIN, gate_switch.entity_id, True)
    hidden = entities.async_get_or_create("switch", "relay_test", "hidden", suggested_object_id="y")
    hass.states.async_set(hidden.entity_id, "off", {"friendly_name": "Garage Light Relay"})
    async_expose_entity(hass, conversation.DOMAIN, hidden.entity_id, False)
    expected = sorted([opener, gate_switch.entity_id])

    entry = setup_integration
    result = await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION), context={"source": config_entries.SOURCE_USER}
    )
    assert result["type"] is FlowResultType.FORM
    assert _suggested(result, CONF_CONFIRM_ENTITIES) == expected
    listed = result["description_placeholders"]["confirm_suggestions"]
    assert "Shelly Pulse" in listed
    assert "Driveway Gate" in listed
    assert "Fan" not in listed

    agent = next(iter(entry.subentries.values()))
    saved = agent.data[CONF_CONFIRM_ENTITIES]
    assert saved == ["script.party_mode"]
    result = await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION),
        context={"source": config_entries.SOURCE_RECONFIGURE, "subentry_id": agent.subentry_id},
    )
    assert result["step_id"] == "reconfigure"
    assert _suggested(result, CONF_CONFIRM_ENTITIES) == saved
    assert "Shelly Pulse" in result["description_placeholders"]["confirm_suggestions"]


def _suggested(result: Any, key: str) -> Any:
    for field in result["data_schema"].schema:
        if field == key:
            return (field.description or {}).get("suggested_value")
    raise AssertionError(f"{key} is not in the form")


async def test_a_script_that_presses_the_relay_is_held_whole(
    hass: HomeAssistant, setup_integration: MockConfigEntry
) -> None:
    """Running a script whose step presses the garage's relay waits for the yes before
    any of its steps run (the light step too); a script pressing a plain button runs."""
    opener, plain = _garage_with_opener(hass)
    async_mock_service(hass, "light", "turn_on")
    steps = {
        "leave": [
            {"action": "light.turn_on", "target": {"entity_id": "light.porch"}},
            {"action": "button.press", "target": {"entity_id": opener}},
        ],
        "boost": [{"action": "button.press", "target": {"entity_id": plain}}],
    }
    config = {name: {"sequence": sequence} for name, sequence in steps.items()}
    assert await async_setup_component(hass, "script", {"script": config})
    recorder = Recorder(hass)
    scope = EffectGate.of(hass).open_scope(Context())
    await hass.services.async_call(
        "script", "turn_on", {"entity_id": "script.leave"}, blocking=True, context=scope.context
    )
    await hass.async_block_till_done()
    held = scope.take_held()
    assert held is not None
    assert recorder.calls == []  # not even the script's start, nor its light step
    assert list(held.by_call.values()) == [("run leave (Shelly Pulse)",)]
    await hass.services.async_call("script", "boost", blocking=True, context=scope.context)
    await hass.async_block_till_done()
    assert scope.take_held() is None
    assert recorder.on(plain) == [("button", "press")]
    await scope.release(held.token, confirmed=True)
    await hass.async_block_till_done()
    scope.close()
    assert recorder.on(opener) == [("button", "press")]
