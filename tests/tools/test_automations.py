"""Automations by voice, through Home Assistant's conversation, against a real core.

Home Assistant's `automation` integration is set up over a configuration.yaml that
includes automations.yaml, as a new installation has it; the turn's model is the fake
OpenAI server (scripted tool calls, reached through LiteLLM). What an automation does is
asserted on the service calls Home Assistant received when it ran (time frozen and
moved with async_fire_time_changed, states set); what was written on the file itself and
on the editor's own HTTP API.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
import json
from pathlib import Path
import random
from typing import Any
from unittest.mock import patch

from freezegun import freeze_time
from freezegun.api import FrozenDateTimeFactory
from langchain_core.utils.function_calling import convert_to_openai_tool
import pytest
from pytest_homeassistant_custom_component.common import (
    MockConfigEntry,
    MockUser,
    async_fire_time_changed,
    async_mock_service,
)
import yaml

from custom_components.langgraph_conversation.agent.guard import CONFIRMATION_TIMEOUT, Released
from custom_components.langgraph_conversation.config_flow import DEFAULT_AGENT_OPTIONS
from custom_components.langgraph_conversation.const import (
    CONF_AUTOMATIONS,
    CONF_AUTOMATIONS_CRITICAL,
    CONF_CONFIRM_ENTITIES,
)
from custom_components.langgraph_conversation.tools.automation_files import in_editor_order
from custom_components.langgraph_conversation.tools.automations import (
    CREATE_TOOL,
    DELETE_TOOL,
    LIST_TOOL,
    automation_access,
)
from custom_components.langgraph_conversation.tools.effects import EffectGate
from custom_components.langgraph_conversation.tools.registry import ToolContext
from custom_components.langgraph_conversation.tools.selection import LeftOut, choose_tools
from fakes import FakeOpenAIServer, ToolCall
from fakes.offline_model import OfflineModelServer
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.const import EVENT_CALL_SERVICE, Platform
from homeassistant.core import Context, Event, HomeAssistant, callback
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers.sun import get_astral_event_next
from homeassistant.setup import async_setup_component
from homeassistant.util import dt as dt_util

from ..conftest import add_test_entry
from ..helpers import converse, messages_of, text_of

SEED = 2027
AUTOMATION_AGENT = {CONF_AUTOMATIONS: True}
QUESTION_START = "To be safe I need your yes first"

# The home: entity id → (state, attributes, exposed).
ENTITIES: dict[str, tuple[str, dict[str, Any], bool]] = {
    "light.kitchen": ("off", {"friendly_name": "Kitchen Light"}, True),
    "light.porch": ("off", {"friendly_name": "Porch Light"}, True),
    "light.cellar": ("off", {"friendly_name": "Cellar Light"}, False),
    "media_player.living_room": ("idle", {"friendly_name": "Living Room Speaker"}, True),
    "climate.hall": ("heat", {"friendly_name": "Hall Thermostat", "temperature": 19}, True),
    "binary_sensor.front_motion": ("off", {"friendly_name": "Front Motion"}, True),
    "sensor.outdoor_temperature": ("15", {"friendly_name": "Outdoor Temperature"}, True),
    "sensor.secret_temperature": ("15", {"friendly_name": "Secret Temperature"}, False),
    "lock.front_door": ("locked", {"friendly_name": "Front Door"}, True),
    "cover.garage_door": (
        "closed",
        {"friendly_name": "Garage Door", "device_class": "garage"},
        True,
    ),
    "switch.coffee_maker": ("off", {"friendly_name": "Coffee Maker"}, True),
}
SERVICES = {
    "light": ("turn_on", "turn_off", "toggle"),
    "media_player": ("media_pause", "volume_set", "play_media", "turn_off"),
    "climate": ("set_temperature", "set_hvac_mode"),
    "notify": ("notify",),
    "persistent_notification": ("create",),
    "lock": ("lock", "unlock"),
    "cover": ("open_cover", "close_cover"),
    "switch": ("turn_on", "turn_off"),
    "script": ("turn_on",),
}


class Home:
    """The test home and the service calls Home Assistant received (its call-service
    events; the services are mocked so that nothing else changes)."""

    def __init__(self, hass: HomeAssistant) -> None:
        self.hass = hass
        self.calls: list[tuple[str, str, tuple[str, ...]]] = []

        @callback
        def record(event: Event) -> None:
            if event.data["domain"] == "automation":
                return  # our own reloads
            data = event.data.get("service_data") or {}
            ids = data.get("entity_id", [])
            ids = [ids] if isinstance(ids, str) else list(ids)
            self.calls.append((event.data["domain"], event.data["service"], tuple(sorted(ids))))

        hass.bus.async_listen(EVENT_CALL_SERVICE, record)


@pytest.fixture
async def home(hass: HomeAssistant) -> AsyncIterator[Home]:
    """The test home; its automations are turned off at the end (their time triggers
    would outlive the test)."""
    built = await build_home(hass)
    yield built
    await hass.services.async_call("automation", "turn_off", {"entity_id": "all"}, blocking=True)
    await hass.async_block_till_done()


async def build_home(hass: HomeAssistant) -> Home:
    """The entities, the mocked services, and automations over automations.yaml."""
    for entity_id, (state, attributes, exposed) in ENTITIES.items():
        hass.states.async_set(entity_id, state, attributes)
        async_expose_entity(hass, conversation.DOMAIN, entity_id, exposed)
    for domain, services in SERVICES.items():
        for service in services:
            async_mock_service(hass, domain, service)
    config = Path(hass.config.path("configuration.yaml"))
    await hass.async_add_executor_job(
        config.write_text, "automation: !include automations.yaml\n", "utf-8"
    )
    assert await async_setup_component(hass, "automation", {"automation": []})
    await hass.async_block_till_done()
    return Home(hass)


def automations_file(hass: HomeAssistant) -> Path:
    return Path(hass.config.path("automations.yaml"))


async def file_text(hass: HomeAssistant) -> str | None:
    path = automations_file(hass)
    exists = await hass.async_add_executor_job(path.exists)
    return await hass.async_add_executor_job(path.read_text, "utf-8") if exists else None


def automation_entities(hass: HomeAssistant) -> list[str]:
    return sorted(hass.states.async_entity_ids("automation"))


def speech(result: conversation.ConversationResult) -> str:
    return result.response.speech["plain"]["speech"]


def last_tool_result(server: FakeOpenAIServer) -> Any:
    return json.loads(text_of(messages_of(server.requests[-1], "tool")[-1]))


def tool_names(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


WEEKDAY_DRAFT = {
    "name": "Kitchen light on weekdays",
    "triggers": [{"trigger": "time", "at": "07:00:00"}],
    "conditions": [{"condition": "time", "weekday": ["mon", "tue", "wed", "thu", "fri"]}],
    "actions": [{"action": "light.turn_on", "target": {"entity_id": "light.kitchen"}}],
}


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
async def test_a_weekday_automation_is_created_after_a_yes_and_runs(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    freezer: FrozenDateTimeFactory,
    home: Home,
) -> None:
    """The question reads the automation back; nothing is written before the yes; after
    it the file holds it, tagged, and it turns the light on at 07:00 on a weekday."""
    await hass.config.async_set_time_zone("UTC")
    freezer.move_to("2026-12-07 06:00:00+00:00")  # a Monday
    openai_server.add_tool_calls([ToolCall(CREATE_TOOL, WEEKDAY_DRAFT)])
    asked = await converse(
        hass,
        setup_integration,
        "Every weekday at seven turn on the kitchen light",
        user_id=hass_admin_user.id,
    )
    assert speech(asked) == (
        f"{QUESTION_START}: do you want me to create the automation \u201cKitchen light on "
        "weekdays\u201d: every weekday at 07:00, turn on Kitchen Light?"
    )
    assert await file_text(hass) is None
    assert automation_entities(hass) == []
    openai_server.add_text("Created.")
    done = await converse(
        hass, setup_integration, "yes", asked.conversation_id, user_id=hass_admin_user.id
    )
    assert speech(done) == "Created."
    assert last_tool_result(openai_server)["status"] == "done after the user's yes"
    text = await file_text(hass)
    assert text is not None
    assert (
        f"description: Created by voice for {hass_admin_user.name} on 2026-12-07 "
        "(LangGraph Conversation)." in text
    )
    (entity_id,) = automation_entities(hass)
    assert hass.states.get(entity_id).state == "on"
    assert home.calls == []
    freezer.move_to("2026-12-07 07:00:00+00:00")
    async_fire_time_changed(hass, dt_util.utcnow())
    await hass.async_block_till_done()
    assert home.calls == [("light", "turn_on", ("light.kitchen",))]


async def create_after_yes(
    hass: HomeAssistant,
    entry: MockConfigEntry,
    server: FakeOpenAIServer,
    draft: dict[str, Any],
    user_id: str,
) -> str:
    """Ask for the draft, say yes; the question asked."""
    server.add_tool_calls([ToolCall(CREATE_TOOL, draft)])
    asked = await converse(hass, entry, "Make an automation", user_id=user_id)
    assert speech(asked).startswith(QUESTION_START), speech(asked)
    server.add_text("Created.")
    await converse(hass, entry, "yes", asked.conversation_id, user_id=user_id)
    assert last_tool_result(server)["status"] == "done after the user's yes"
    return speech(asked)


# Generated drafts: each trigger kind with how a test makes it fire.
def _trigger(rng: random.Random, index: int) -> tuple[dict[str, Any], str]:
    kind = ["time", "state", "sun", "numeric_state"][index % 4]
    if kind == "time":
        return {
            "trigger": "time",
            "at": f"{rng.randrange(8, 20):02d}:{rng.choice([0, 15, 30, 45]):02d}:00",
        }, kind
    if kind == "state":
        return {"trigger": "state", "entity_id": "binary_sensor.front_motion", "to": "on"}, kind
    if kind == "sun":
        return {"trigger": "sun", "event": rng.choice(["sunset", "sunrise"])}, kind
    return {
        "trigger": "numeric_state",
        "entity_id": "sensor.outdoor_temperature",
        "above": rng.randrange(20, 30),
    }, kind


def _condition(rng: random.Random) -> list[dict[str, Any]]:
    """Conditions that hold when the test fires the trigger (or none)."""
    return rng.choice(
        [
            [],
            [{"condition": "state", "entity_id": "light.porch", "state": "off"}],
            [
                {
                    "condition": "numeric_state",
                    "entity_id": "climate.hall",
                    "attribute": "temperature",
                    "below": 25,
                }
            ],
            [
                {
                    "condition": "or",
                    "conditions": [
                        {
                            "condition": "state",
                            "entity_id": "media_player.living_room",
                            "state": "idle",
                        },
                        {"condition": "state", "entity_id": "light.kitchen", "state": "on"},
                    ],
                }
            ],
        ]
    )


# Actions and the call each makes: (domain, service, entity ids).
ACTIONS: list[tuple[dict[str, Any], tuple[str, str, tuple[str, ...]]]] = [
    (
        {
            "action": "light.turn_on",
            "target": {"entity_id": "light.kitchen"},
            "data": {"brightness_pct": 40},
        },
        ("light", "turn_on", ("light.kitchen",)),
    ),
    (
        {"action": "light.turn_off", "target": {"entity_id": ["light.kitchen", "light.porch"]}},
        ("light", "turn_off", ("light.kitchen", "light.porch")),
    ),
    (
        {"action": "media_player.media_pause", "target": {"entity_id": "media_player.living_room"}},
        ("media_player", "media_pause", ("media_player.living_room",)),
    ),
    (
        {
            "action": "media_player.volume_set",
            "target": {"entity_id": "media_player.living_room"},
            "data": {"volume_level": 0.3},
        },
        ("media_player", "volume_set", ("media_player.living_room",)),
    ),
    (
        {
            "action": "climate.set_temperature",
            "target": {"entity_id": "climate.hall"},
            "data": {"temperature": 21},
        },
        ("climate", "set_temperature", ("climate.hall",)),
    ),
    (
        {"action": "notify.notify", "data": {"message": "Someone is at the door"}},
        ("notify", "notify", ()),
    ),
    (
        {"action": "persistent_notification.create", "data": {"message": "It is warm outside"}},
        ("persistent_notification", "create", ()),
    ),
]


async def _fire(
    hass: HomeAssistant, kind: str, trigger: dict[str, Any], freezer: FrozenDateTimeFactory
) -> None:
    """Make the trigger happen, as the home would."""
    if kind == "time":
        hour, minute, _ = (int(part) for part in trigger["at"].split(":"))
        now = dt_util.now()
        at = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if at <= now:
            at += timedelta(days=1)
        freezer.move_to(at)
        async_fire_time_changed(hass, at)
    elif kind == "sun":
        at = get_astral_event_next(hass, trigger["event"])
        freezer.move_to(at)
        async_fire_time_changed(hass, at)
    elif kind == "state":
        hass.states.async_set("binary_sensor.front_motion", "on", {"friendly_name": "Front Motion"})
    else:
        hass.states.async_set(
            "sensor.outdoor_temperature",
            str(trigger["above"] + 3),
            {"friendly_name": "Outdoor Temperature"},
        )
    await hass.async_block_till_done()


async def _reset(hass: HomeAssistant) -> None:
    """The trigger entities back where they were; every automation so far off."""
    for entity_id in ("binary_sensor.front_motion", "sensor.outdoor_temperature"):
        state, attributes, _ = ENTITIES[entity_id]
        hass.states.async_set(entity_id, state, attributes)
    await hass.services.async_call("automation", "turn_off", {"entity_id": "all"}, blocking=True)
    await hass.async_block_till_done()


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
async def test_generated_drafts_are_created_after_a_yes_and_run_when_triggered(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    freezer: FrozenDateTimeFactory,
    home: Home,
) -> None:
    """Seeded drafts of every trigger kind (time, state, sun, numeric state), with or
    without conditions, acting on lights, media, climate and notifications: each is
    validated, created after the yes, and when its trigger happens Home Assistant
    receives exactly its actions' calls, in order."""
    rng = random.Random(SEED)
    for index in range(8):
        trigger, kind = _trigger(rng, index)
        chosen = rng.sample(ACTIONS, rng.randrange(1, 4))
        draft = {
            "name": f"Generated {index}",
            "triggers": [trigger],
            "conditions": _condition(rng),
            "actions": [action for action, _ in chosen],
        }
        question = await create_after_yes(
            hass, setup_integration, openai_server, draft, hass_admin_user.id
        )
        assert f"\u201cGenerated {index}\u201d" in question
        entity_id = er.async_get(hass).async_get_entity_id(
            "automation", "automation", _ids_in_file(hass)[-1]
        )
        assert entity_id is not None
        assert hass.states.get(entity_id).state == "on"
        before = len(home.calls)
        await _fire(hass, kind, trigger, freezer)
        assert home.calls[before:] == [call for _, call in chosen], (index, draft)
        await _reset(hass)


def _ids_in_file(hass: HomeAssistant) -> list[str]:
    text = automations_file(hass).read_text("utf-8")
    return [str(item["id"]) for item in yaml.safe_load(text)]


NOT_A_YES = ["no", "other user", "other satellite", "other conversation", "too late"]


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
@pytest.mark.parametrize("answer", NOT_A_YES)
async def test_nothing_is_created_without_the_same_persons_yes(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    hass_owner_user: MockUser,
    freezer: FrozenDateTimeFactory,
    home: Home,
    answer: str,
) -> None:
    """A no, a yes from another admin, another satellite or another conversation, or a
    yes too late: no file, no automation entity."""
    openai_server.add_tool_calls([ToolCall(CREATE_TOOL, WEEKDAY_DRAFT)])
    asked = await converse(
        hass,
        setup_integration,
        "Every weekday at seven",
        user_id=hass_admin_user.id,
        device_id="satellite-kitchen",
    )
    assert speech(asked).startswith(QUESTION_START)
    reply: dict[str, Any] = {
        "conversation_id": asked.conversation_id,
        "user_id": hass_admin_user.id,
        "device_id": "satellite-kitchen",
    }
    text = "yes"
    if answer == "no":
        text = "no"
    elif answer == "other user":
        reply["user_id"] = hass_owner_user.id
    elif answer == "other satellite":
        reply["device_id"] = "satellite-hall"
    elif answer == "other conversation":
        reply["conversation_id"] = None
    else:
        freezer.tick(CONFIRMATION_TIMEOUT + 1)
    openai_server.add_text("Okay.")
    await converse(hass, setup_integration, text, **reply)
    await hass.async_block_till_done()
    assert await file_text(hass) is None
    assert automation_entities(hass) == []
    assert home.calls == []


# Drafts with a critical action, and how the question names it.
CRITICAL_DRAFTS = [
    (
        {"action": "lock.unlock", "target": {"entity_id": "lock.front_door"}},
        "unlock Front Door",
        ("lock", "unlock", ("lock.front_door",)),
    ),
    (
        {"action": "cover.open_cover", "target": {"entity_id": "cover.garage_door"}},
        "open Garage Door",
        ("cover", "open_cover", ("cover.garage_door",)),
    ),
    (
        {"action": "switch.turn_on", "target": {"entity_id": "switch.coffee_maker"}},
        "turn on Coffee Maker",
        ("switch", "turn_on", ("switch.coffee_maker",)),
    ),
]
MARKED = {CONF_CONFIRM_ENTITIES: ["switch.coffee_maker"]}


def _critical_draft(action: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "At night",
        "triggers": [{"trigger": "state", "entity_id": "binary_sensor.front_motion", "to": "on"}],
        "actions": [
            {"action": "light.turn_on", "target": {"entity_id": "light.porch"}},
            action,
        ],
    }


@pytest.mark.parametrize("agent_overrides", [{**AUTOMATION_AGENT, **MARKED}])
async def test_a_critical_action_in_a_draft_is_refused_by_default(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    home: Home,
) -> None:
    """Unlock, open the garage door, an entity marked "always needs my yes": refused
    with a sentence naming the effect; nobody is asked, nothing written."""
    for action, effect, _ in CRITICAL_DRAFTS:
        openai_server.add_tool_calls([ToolCall(CREATE_TOOL, _critical_draft(action))])
        openai_server.add_text("I cannot.")
        result = await converse(hass, setup_integration, "At night", user_id=hass_admin_user.id)
        assert speech(result) == "I cannot."
        refused = last_tool_result(openai_server)
        assert refused["error"] == "critical_action"
        assert effect in refused["error_text"]
    assert await file_text(hass) is None
    assert automation_entities(hass) == []


@pytest.mark.parametrize(
    "agent_overrides", [{**AUTOMATION_AGENT, **MARKED, CONF_AUTOMATIONS_CRITICAL: True}]
)
async def test_with_the_option_a_critical_action_needs_a_yes_naming_it(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    home: Home,
) -> None:
    """With "automations may include critical actions" on, the question names the
    critical effect; after the yes the automation runs it when triggered."""
    for action, effect, call in CRITICAL_DRAFTS:
        question = await create_after_yes(
            hass, setup_integration, openai_server, _critical_draft(action), hass_admin_user.id
        )
        assert f"turn on Porch Light, then {effect}?" in question, question
        before = len(home.calls)
        hass.states.async_set("binary_sensor.front_motion", "on")
        await hass.async_block_till_done()
        assert home.calls[before:] == [("light", "turn_on", ("light.porch",)), call]
        await _reset(hass)


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
async def test_a_non_admin_or_an_unknown_voice_cannot_create_or_delete(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    hass_read_only_user: MockUser,
    home: Home,
) -> None:
    """A user who is no administrator, and a satellite with no known person: refused
    before anything is asked; the admin's automation stays."""
    await create_after_yes(
        hass, setup_integration, openai_server, WEEKDAY_DRAFT, hass_admin_user.id
    )
    written = await file_text(hass)
    for who in ({"user_id": hass_read_only_user.id}, {"device_id": "satellite-hall"}):
        for call in (
            ToolCall(CREATE_TOOL, WEEKDAY_DRAFT),
            ToolCall(DELETE_TOOL, {"name": WEEKDAY_DRAFT["name"]}),
        ):
            openai_server.add_tool_calls([call])
            openai_server.add_text("Sorry.")
            result = await converse(hass, setup_integration, "Do it", **who)
            assert speech(result) == "Sorry."
            refused = last_tool_result(openai_server)
            assert refused["error"] == "not_allowed", refused
            assert "only administrators" in refused["error_text"]
    assert await file_text(hass) == written
    assert len(automation_entities(hass)) == 1


UNEXPOSED_DRAFTS = [
    {"actions": [{"action": "light.turn_on", "target": {"entity_id": "light.cellar"}}]},
    {
        "triggers": [
            {"trigger": "numeric_state", "entity_id": "sensor.secret_temperature", "above": 3}
        ]
    },
    {"conditions": [{"condition": "state", "entity_id": "light.cellar", "state": "on"}]},
    {"actions": [{"action": "light.turn_on", "entity_id": "light.kitchen, light.cellar"}]},
    {"actions": [{"action": "light.turn_on", "target": {"entity_id": "Cellar Light"}}]},
]


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
async def test_an_unexposed_entity_is_refused(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    home: Home,
) -> None:
    """An unexposed entity in a trigger, a condition or an action (also hidden in a
    comma-separated list): refused without naming it; nothing written."""
    for change in UNEXPOSED_DRAFTS:
        openai_server.add_tool_calls([ToolCall(CREATE_TOOL, {**WEEKDAY_DRAFT, **change})])
        openai_server.add_text("No.")
        await converse(hass, setup_integration, "Make it", user_id=hass_admin_user.id)
        refused = last_tool_result(openai_server)
        assert refused["error"] == "not_exposed", (change, refused)
        assert "cellar" not in refused["error_text"]
        assert "secret" not in refused["error_text"]
    assert await file_text(hass) is None
    assert automation_entities(hass) == []


_LIGHT = {"action": "light.turn_on", "target": {"entity_id": "light.kitchen"}}
_TIME = {"trigger": "time", "at": "07:00:00"}
# Hostile or broken drafts: what the model sent instead of an automation.
HOSTILE = [
    {"name": "x", "triggers": "at seven", "actions": [_LIGHT]},
    {"name": "x", "triggers": [_TIME], "actions": 42},
    {"name": "x", "triggers": [_TIME, "noon"], "actions": [_LIGHT]},
    {"name": ["x"], "triggers": [_TIME], "actions": [_LIGHT]},
    {"name": "", "triggers": [_TIME], "actions": [_LIGHT]},
    {"name": "x\n- id: evil\n  alias: injected", "triggers": [_TIME], "actions": [_LIGHT]},
    {"name": "x" * 500, "triggers": [_TIME], "actions": [_LIGHT]},
    {"name": "{{ states('sensor.secret_temperature') }}", "triggers": [_TIME], "actions": [_LIGHT]},
    {"name": "x", "triggers": [_TIME] * 200, "actions": [_LIGHT]},
    {
        "name": "x",
        "triggers": [_TIME],
        "actions": [{"action": "light.turn_on", "data": {"a": [[[[[[[[[[["deep"]]]]]]]]]]]}}],
    },
    {
        "name": "x",
        "triggers": [_TIME],
        "actions": [{"action": "notify.notify", "data": {"message": "x" * 20000}}],
    },
    {
        "name": "x",
        "triggers": [
            {"trigger": "template", "value_template": "{{ is_state('light.cellar', 'on') }}"}
        ],
        "actions": [_LIGHT],
    },
    {
        "name": "x",
        "triggers": [{"trigger": "webhook", "webhook_id": "open-sesame"}],
        "actions": [_LIGHT],
    },
    {
        "name": "x",
        "triggers": [{"trigger": "event", "event_type": "anything"}],
        "actions": [_LIGHT],
    },
    {"name": "x", "triggers": [{"trigger": {"nested": "time"}}], "actions": [_LIGHT]},
    {
        "name": "x",
        "triggers": [_TIME],
        "actions": [
            {
                "action": "notify.notify",
                "data": {"message": "{{ states('sensor.secret_temperature') }}"},
            }
        ],
    },
    {
        "name": "x",
        "triggers": [_TIME],
        "actions": [{"action": "light.turn_on", "target": {"area_id": "cellar"}}],
    },
    {
        "name": "x",
        "triggers": [_TIME],
        "actions": [{"action": "light.turn_on", "target": {"device_id": "abc"}}],
    },
    {
        "name": "x",
        "triggers": [_TIME],
        "actions": [{"action": "script.turn_on", "target": {"entity_id": "script.anything"}}],
    },
    {"name": "x", "triggers": [_TIME], "actions": [{"action": "homeassistant.restart"}]},
    {
        "name": "x",
        "triggers": [_TIME],
        "actions": [{"action": "light.explode", "target": {"entity_id": "light.kitchen"}}],
    },
    {
        "name": "x",
        "triggers": [_TIME],
        "actions": [{"action": "light.turn_on", "target": {"entity_id": "lock.front_door"}}],
    },
    {"name": "x", "triggers": [_TIME], "actions": [{"event": "unlock_everything"}]},
    {"name": "x", "triggers": [_TIME], "actions": [{"action": "light.turn_on"}]},
    {
        "name": "x",
        "triggers": [_TIME],
        "actions": [{"action": "light.turn_on", "target": "light.kitchen"}],
    },
    {
        "name": "x",
        "triggers": [_TIME],
        "actions": [{**_LIGHT, "continue_on_error": True, "repeat": {}}],
    },
    {"name": "x", "triggers": [{"trigger": "time", "at": "25:99"}], "actions": [_LIGHT]},
    {
        "name": "x",
        "triggers": [{"trigger": "state", "entity_id": "light.nowhere"}],
        "actions": [_LIGHT],
    },
    {"name": "x", "triggers": [{"trigger": "state"}], "actions": [_LIGHT]},
    {"name": "x", "triggers": [{"trigger": "time", "at": True}], "actions": [_LIGHT]},
    {
        "name": "x",
        "triggers": [
            {"trigger": "numeric_state", "entity_id": "sensor.outdoor_temperature", "above": "warm"}
        ],
        "actions": [_LIGHT],
    },
    {"name": "x", "triggers": [_TIME], "actions": [{"delay": {"hours": "many"}}]},
    {"name": "x", "triggers": [_TIME], "actions": [{"action": 5}]},
    {"name": 12, "triggers": [_TIME], "actions": [_LIGHT]},
    {"name": "x", "triggers": [_TIME], "actions": [_LIGHT], "mode": "forever"},
    {"name": "x", "triggers": [_TIME], "actions": [_LIGHT], "mode": ["single"]},
    {"name": "x", "triggers": {"trigger": "time"}, "actions": [_LIGHT]},
    {"name": "x", "triggers": [_TIME], "actions": [{"delay": "{{ 5 }}"}]},
    {"name": "x", "triggers": [], "actions": [_LIGHT]},
    # Each argument within the agent's limit, the whole too large.
    {
        "name": "x",
        "triggers": [_TIME],
        "conditions": [{"condition": "state", "entity_id": "light.porch", "state": "y" * 3500}],
        "actions": [{"action": "notify.notify", "data": {"message": "x" * 3500}}],
    },
]


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
async def test_hostile_drafts_get_clear_errors_and_write_nothing(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    home: Home,
) -> None:
    """Wrong types, templates (also reaching unexposed entities), indirect targets,
    scripts, unknown services, huge or deep drafts, names with YAML in them: an error
    sentence each, no question, no file, no automation."""
    for draft in HOSTILE:
        openai_server.add_tool_calls([ToolCall(CREATE_TOOL, draft)])
        openai_server.add_text("That did not work.")
        result = await converse(hass, setup_integration, "Make it", user_id=hass_admin_user.id)
        assert speech(result) == "That did not work.", draft
        refused = last_tool_result(openai_server)
        # (The agent refuses any single argument over 4,096 characters before the tool.)
        assert refused["error"] in ("invalid_automation", "not_exposed", "argument_too_long"), (
            draft,
            refused,
        )
        assert refused["error_text"].endswith("."), refused
        assert len(refused["error_text"]) < 600
    assert await file_text(hass) is None
    assert automation_entities(hass) == []
    assert home.calls == []


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
async def test_yaml_in_a_name_is_written_as_the_name(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    home: Home,
) -> None:
    """A one-line name full of YAML syntax is the automation's alias, nothing more."""
    name = 'x: y\' "z" # - id: evil &a *a !!python/object {k: v} [1] | >'
    await create_after_yes(
        hass,
        setup_integration,
        openai_server,
        {**WEEKDAY_DRAFT, "name": name},
        hass_admin_user.id,
    )
    (written,) = yaml.safe_load(await file_text(hass))
    assert written["alias"] == name
    assert set(written) == {
        "id",
        "alias",
        "description",
        "triggers",
        "conditions",
        "actions",
        "mode",
    }


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
async def test_the_file_is_what_the_editor_writes(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    hass_client: Any,
    home: Home,
) -> None:
    """Round trip through Home Assistant's automation editor API: GET returns what we
    wrote, and POSTing the same config back leaves the file byte for byte the same."""
    assert await async_setup_component(hass, "config", {})
    rng = random.Random(SEED)
    for index in range(3):
        trigger, _ = _trigger(rng, index)
        draft = {
            "name": f"Round trip {index}",
            "triggers": [trigger],
            "conditions": _condition(rng),
            "actions": [action for action, _ in rng.sample(ACTIONS, 2)],
        }
        await create_after_yes(hass, setup_integration, openai_server, draft, hass_admin_user.id)
    before = await file_text(hass)
    assert before is not None
    client = await hass_client()
    for item in yaml.safe_load(before):
        response = await client.get(f"/api/config/automation/config/{item['id']}")
        assert response.status == 200
        config = await response.json()
        assert config == item
        assert list(config) == [
            "id",
            "alias",
            "description",
            "triggers",
            "conditions",
            "actions",
            "mode",
        ]
        response = await client.post(f"/api/config/automation/config/{item['id']}", json=config)
        assert response.status == 200, await response.text()
        await hass.async_block_till_done()
        assert await file_text(hass) == before


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
async def test_ours_are_listed_and_one_is_deleted_after_a_yes(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    freezer: FrozenDateTimeFactory,
    home: Home,
) -> None:
    """An automation the household wrote in the editor is neither listed nor deleted;
    ours are listed with whom and when; deleting asks, and after the yes the file, the
    automation and its registry entry are gone."""
    await hass.config.async_set_time_zone("UTC")
    theirs = "- id: '1'\n  alias: Theirs\n  triggers: []\n  actions: []\n"
    await hass.async_add_executor_job(automations_file(hass).write_text, theirs, "utf-8")
    freezer.move_to("2026-12-04 10:00:00+00:00")
    await create_after_yes(
        hass,
        setup_integration,
        openai_server,
        {**WEEKDAY_DRAFT, "name": "Yesterday's"},
        hass_admin_user.id,
    )
    freezer.move_to("2026-12-05 10:00:00+00:00")
    await create_after_yes(
        hass,
        setup_integration,
        openai_server,
        {**WEEKDAY_DRAFT, "name": "Today's"},
        hass_admin_user.id,
    )
    openai_server.add_tool_calls([ToolCall(LIST_TOOL, {})])
    openai_server.add_text("Two.")
    await converse(hass, setup_integration, "What automations did you make?")
    listed = last_tool_result(openai_server)
    assert listed["count"] == 2
    assert [
        (a["name"], a["made_for"], a["made_on"], a["state"]) for a in listed["automations"]
    ] == [
        ("Today's", hass_admin_user.name, "2026-12-05", "on"),
        ("Yesterday's", hass_admin_user.name, "2026-12-04", "on"),
    ]
    assert listed["automations"][0]["does"] == "every weekday at 07:00, turn on Kitchen Light"
    yesterdays = listed["automations"][1]["id"]
    # Theirs is not ours to delete.
    openai_server.add_tool_calls([ToolCall(DELETE_TOOL, {"id": "1"})])
    openai_server.add_text("No.")
    await converse(hass, setup_integration, "Delete Theirs", user_id=hass_admin_user.id)
    assert last_tool_result(openai_server)["error"] == "not_found"
    entity_id = er.async_get(hass).async_get_entity_id("automation", "automation", yesterdays)
    assert entity_id is not None
    # A no deletes nothing.
    openai_server.add_tool_calls([ToolCall(DELETE_TOOL, {"id": yesterdays})])
    declined = await converse(hass, setup_integration, "Delete it", user_id=hass_admin_user.id)
    assert speech(declined).startswith(QUESTION_START)
    openai_server.add_text("Kept.")
    await converse(
        hass, setup_integration, "no", declined.conversation_id, user_id=hass_admin_user.id
    )
    assert yesterdays in _ids_in_file(hass)
    assert hass.states.get(entity_id) is not None
    openai_server.add_tool_calls([ToolCall(DELETE_TOOL, {"id": yesterdays})])
    asked = await converse(
        hass,
        setup_integration,
        "Delete the automation you made yesterday",
        user_id=hass_admin_user.id,
    )
    assert speech(asked) == (
        f"{QUESTION_START}: do you want me to delete the automation \u201cYesterday's\u201d "
        f"(made for {hass_admin_user.name} on 2026-12-04)?"
    )
    assert yesterdays in _ids_in_file(hass)
    openai_server.add_text("Deleted.")
    await converse(
        hass, setup_integration, "yes", asked.conversation_id, user_id=hass_admin_user.id
    )
    await hass.async_block_till_done()
    assert yesterdays not in _ids_in_file(hass)
    assert "1" in _ids_in_file(hass)
    assert er.async_get(hass).async_get(entity_id) is None
    assert hass.states.get(entity_id) is None


async def test_without_the_option_no_tool_is_offered(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    home: Home,
) -> None:
    """Off (the default): no automation tool in any request, and a model calling one
    anyway creates nothing."""
    openai_server.add_tool_calls([ToolCall(CREATE_TOOL, WEEKDAY_DRAFT)])
    openai_server.add_text("No.")
    await converse(hass, setup_integration, "Make it", user_id=hass_admin_user.id)
    for request in openai_server.requests:
        assert not tool_names(request) & {CREATE_TOOL, LIST_TOOL, DELETE_TOOL}
        assert "automation" not in json.dumps(request.get("tools") or [])
    assert last_tool_result(openai_server)["error"] == "unknown_tool"
    assert await file_text(hass) is None


async def test_the_offline_stand_in_drafts_and_creates_one_after_a_yes(
    hass: HomeAssistant, socket_enabled: None, hass_admin_user: MockUser
) -> None:
    """What `scripts/develop --offline-model` sets up: Home Assistant's demo lights, the
    stand-in as the model of an agent that may create automations. "Every weekday at
    seven turn on the kitchen lights" is asked back, created after "yes", listed, and
    turns on the demo's kitchen lights at seven on a weekday."""
    await hass.config.async_set_time_zone("UTC")
    assert await async_setup_component(hass, "homeassistant", {})
    with patch(
        "homeassistant.components.demo.COMPONENTS_WITH_CONFIG_ENTRY_DEMO_PLATFORM",
        [Platform.LIGHT],
    ):
        assert await async_setup_component(hass, "demo", {})
        await hass.async_block_till_done()
    config = Path(hass.config.path("configuration.yaml"))
    await hass.async_add_executor_job(
        config.write_text, "automation: !include automations.yaml\n", "utf-8"
    )
    assert await async_setup_component(hass, "automation", {"automation": []})
    async with OfflineModelServer() as server:
        entry = add_test_entry(
            hass, server.api_base, {**DEFAULT_AGENT_OPTIONS, CONF_AUTOMATIONS: True}
        )
        assert await async_setup_component(hass, "conversation", {})
        assert await hass.config_entries.async_setup(entry.entry_id)
        await hass.async_block_till_done()
        asked = await converse(
            hass,
            entry,
            "Every weekday at seven turn on the kitchen lights",
            user_id=hass_admin_user.id,
        )
        done = await converse(hass, entry, "yes", asked.conversation_id, user_id=hass_admin_user.id)
        listed = await converse(
            hass, entry, "What automations did you make?", user_id=hass_admin_user.id
        )
        await hass.config_entries.async_unload(entry.entry_id)
    assert speech(asked) == (
        f"{QUESTION_START}: do you want me to create the automation "
        "\u201cKitchen Lights on at 07:00 on weekdays\u201d: every weekday at 07:00, turn on "
        "Kitchen Lights?"
    )
    assert speech(done).startswith("Done: I created the automation"), speech(done)
    assert "Kitchen Lights on at 07:00 on weekdays (every weekday at 07:00" in speech(listed)
    (written,) = yaml.safe_load(await file_text(hass))
    assert written["actions"] == [
        {"action": "light.turn_on", "target": {"entity_id": "light.kitchen_lights"}}
    ]
    await hass.services.async_call(
        "light", "turn_off", {"entity_id": "light.kitchen_lights"}, blocking=True
    )
    # The next weekday at seven (the test's clock runs; the demo's light really turns on).
    now = dt_util.now()
    at = now.replace(hour=7, minute=0, second=0, microsecond=0)
    while at <= now or at.weekday() >= 5:
        at += timedelta(days=1)
    with freeze_time(at):
        async_fire_time_changed(hass, at)
        await hass.async_block_till_done()
    assert hass.states.get("light.kitchen_lights").state == "on"
    await hass.services.async_call("automation", "turn_off", {"entity_id": "all"}, blocking=True)


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
async def test_names_become_entity_ids_and_the_tag_names_the_person(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    home: Home,
) -> None:
    """A model that knows names only (Home Assistant's prompt lists no entity ids): each
    name is matched as Assist matches it and written as the entity's id; the tag names
    the person the admin user is (a person entity), not the user account."""
    hass.states.async_set(
        "person.anna", "home", {"user_id": hass_admin_user.id, "friendly_name": "Anna"}
    )
    draft = {
        "name": "Porch at dusk",
        "triggers": [{"trigger": "state", "entity_id": "Front Motion", "to": "on"}],
        "conditions": [{"condition": "state", "entity_id": ["Porch Light"], "state": "off"}],
        "actions": [{"action": "light.turn_on", "target": {"entity_id": "Porch Light"}}],
    }
    question = await create_after_yes(
        hass, setup_integration, openai_server, draft, hass_admin_user.id
    )
    assert question.endswith(
        "when Front Motion turns on, if Porch Light is off, turn on Porch Light?"
    )
    (written,) = yaml.safe_load(await file_text(hass))
    assert written["triggers"][0]["entity_id"] == "binary_sensor.front_motion"
    assert written["conditions"][0]["entity_id"] == ["light.porch"]
    assert written["actions"][0]["target"] == {"entity_id": "light.porch"}
    assert written["description"].startswith("Created by voice for Anna on ")


async def test_the_automation_tools_are_offered_only_with_the_option_and_the_integration(
    hass: HomeAssistant,
) -> None:
    """Left out without the option (nothing looked up), left out where automations are
    not set up, offered otherwise; an admin may change, a read-only user or no user not."""
    assert await async_setup_component(hass, "homeassistant", {})
    admin = MockUser(name="Admin", is_owner=True).add_to_hass(hass)
    reader = MockUser(name="Reader").add_to_hass(hass)
    access = await automation_access(hass, admin.id, critical_allowed=False, marked=frozenset())
    assert (access.requester, access.may_change) == ("Admin", True)
    for user_id in (reader.id, None):
        other = await automation_access(hass, user_id, critical_allowed=False, marked=frozenset())
        assert not other.may_change
    ours = {CREATE_TOOL, LIST_TOOL, DELETE_TOOL}

    def left_out(automations: Any) -> dict[str, LeftOut]:
        context = ToolContext(hass=hass, context=Context(), language="en", automations=automations)
        choice = choose_tools(context, None, [], "")
        offered = {tool.name for tool in choice.tools} & ours
        assert offered == ours - set(choice.left_out), choice.left_out
        return {name: reason for name, reason in choice.left_out.items() if name in ours}

    assert left_out(None) == dict.fromkeys(ours, LeftOut.AUTOMATIONS_NOT_ALLOWED)
    assert left_out(access) == dict.fromkeys(ours, LeftOut.NOT_LOADED)
    assert await async_setup_component(hass, "automation", {"automation": []})
    assert left_out(access) == {}


def test_the_editor_key_order_is_the_editors() -> None:
    """Contract: Home Assistant's editor (EditAutomationConfigView._write_value, which
    does not use its instance) orders an automation's keys as in_editor_order does."""
    from homeassistant.components.config.automation import EditAutomationConfigView

    rng = random.Random(SEED)
    keys = ["mode", "actions", "conditions", "triggers", "description", "alias", "variables"]
    for _ in range(10):
        rng.shuffle(keys)
        config = {key: f"value of {key}" for key in keys}
        data: list[dict[str, Any]] = []
        EditAutomationConfigView._write_value(None, None, data, "1234", dict(config))  # type: ignore[arg-type]
        assert list(data[0].items()) == list(in_editor_order("1234", config).items())


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
async def test_a_file_the_editor_could_not_manage_is_left_alone(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    home: Home,
) -> None:
    """automations.yaml holding something else than a list of automations: the agent
    says so before asking anything, and the file stays as it was."""
    odd = "not_a_list: true\n"
    await hass.async_add_executor_job(automations_file(hass).write_text, odd, "utf-8")
    for call in (ToolCall(CREATE_TOOL, WEEKDAY_DRAFT), ToolCall(LIST_TOOL, {})):
        openai_server.add_tool_calls([call])
        openai_server.add_text("Sorry.")
        result = await converse(hass, setup_integration, "Make it", user_id=hass_admin_user.id)
        assert speech(result) == "Sorry."
        refused = last_tool_result(openai_server)
        assert refused["error"] == "unavailable", refused
        assert "automations.yaml is not a list of automations" in refused["error_text"]
    assert await file_text(hass) == odd


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
async def test_when_the_garage_opens_after_dark_the_light_goes_on_only_after_dark(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    freezer: FrozenDateTimeFactory,
    home: Home,
) -> None:
    """The issue's "when the garage opens after dark, turn on the driveway light": a state
    trigger on the garage door (watching it is no critical action) and a sun condition.
    Opened in daylight: nothing; opened after sunset: the light's call."""
    draft = {
        "name": "Garage after dark",
        "triggers": [{"trigger": "state", "entity_id": "cover.garage_door", "to": "open"}],
        "conditions": [
            {
                "condition": "or",
                "conditions": [
                    {"condition": "sun", "after": "sunset"},
                    {"condition": "sun", "before": "sunrise"},
                ],
            }
        ],
        "actions": [{"action": "light.turn_on", "target": {"entity_id": "light.porch"}}],
    }
    question = await create_after_yes(
        hass, setup_integration, openai_server, draft, hass_admin_user.id
    )
    assert question.endswith(
        "when Garage Door turns open, if (after sunset) or (before sunrise), turn on Porch Light?"
    ), question
    garage = ENTITIES["cover.garage_door"]
    for when, expected in (
        (get_astral_event_next(hass, "sunrise") + timedelta(hours=3), []),
        (
            get_astral_event_next(hass, "sunset") + timedelta(minutes=30),
            [("light", "turn_on", ("light.porch",))],
        ),
    ):
        freezer.move_to(when)
        async_fire_time_changed(hass, when)
        await hass.async_block_till_done()
        before = len(home.calls)
        hass.states.async_set("cover.garage_door", "open", garage[1])
        await hass.async_block_till_done()
        assert home.calls[before:] == expected, when
        hass.states.async_set("cover.garage_door", "closed", garage[1])
        await hass.async_block_till_done()


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
async def test_an_automation_home_assistant_did_not_load_is_reported(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    home: Home,
) -> None:
    """A configuration.yaml that does not include automations.yaml: after the yes the
    automation is written, and the model is told Home Assistant did not load it."""
    config = Path(hass.config.path("configuration.yaml"))
    await hass.async_add_executor_job(config.write_text, "homeassistant:\n", "utf-8")
    openai_server.add_tool_calls([ToolCall(CREATE_TOOL, WEEKDAY_DRAFT)])
    asked = await converse(hass, setup_integration, "Make it", user_id=hass_admin_user.id)
    openai_server.add_text("It is written but not loaded.")
    await converse(
        hass, setup_integration, "yes", asked.conversation_id, user_id=hass_admin_user.id
    )
    result = last_tool_result(openai_server)
    assert result["error"] == "failed", result
    assert "does configuration.yaml include automations.yaml?" in result["error_text"]
    assert automation_entities(hass) == []
    assert len(_ids_in_file(hass)) == 1


@pytest.mark.parametrize("agent_overrides", [AUTOMATION_AGENT])
async def test_deleting_by_name_asks_which_when_names_repeat(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_admin_user: MockUser,
    home: Home,
) -> None:
    """By name (any case and spacing): one match is asked about and deleted after the
    yes; two of the same name get an error listing their ids; bad arguments a sentence."""
    for name in ("Morning", "Morning", "Evening"):
        await create_after_yes(
            hass,
            setup_integration,
            openai_server,
            {**WEEKDAY_DRAFT, "name": name},
            hass_admin_user.id,
        )
    ids = _ids_in_file(hass)
    for arguments, error in (
        ({"name": "morning"}, "ambiguous"),
        ({}, "invalid_arguments"),
        ({"id": ["1"]}, "invalid_arguments"),
        ({"name": "Night"}, "not_found"),
    ):
        openai_server.add_tool_calls([ToolCall(DELETE_TOOL, arguments)])
        openai_server.add_text("Which one?")
        await converse(hass, setup_integration, "Delete it", user_id=hass_admin_user.id)
        refused = last_tool_result(openai_server)
        assert refused["error"] == error, (arguments, refused)
        if error == "ambiguous":
            assert ids[0] in refused["error_text"]
            assert ids[1] in refused["error_text"]
    openai_server.add_tool_calls([ToolCall(DELETE_TOOL, {"name": "  EVENING "})])
    asked = await converse(hass, setup_integration, "Delete it", user_id=hass_admin_user.id)
    assert "delete the automation \u201cEvening\u201d" in speech(asked)
    openai_server.add_text("Deleted.")
    await converse(
        hass, setup_integration, "yes", asked.conversation_id, user_id=hass_admin_user.id
    )
    assert _ids_in_file(hass) == ids[:2]
    assert len(automation_entities(hass)) == 2


def test_the_automation_tools_are_provider_safe() -> None:
    """The three tools' schemas pass the checks every tool of ours passes."""
    from custom_components.langgraph_conversation.agent.graph import openai_tool
    from custom_components.langgraph_conversation.tools.automations import SPECS
    from custom_components.langgraph_conversation.tools.registry import as_langchain_tools
    from custom_components.langgraph_conversation.tools.schema import sanitize_schema

    from .test_schema import assert_tool_schema

    assert [spec.name for spec in SPECS] == [CREATE_TOOL, LIST_TOOL, DELETE_TOOL]
    for spec in SPECS:
        assert sanitize_schema(spec.parameters) == spec.parameters, spec.name
        assert_tool_schema(spec.parameters)
    context = ToolContext(hass=None, context=None, language="en")  # type: ignore[arg-type]
    for tool in as_langchain_tools(SPECS, context):
        assert openai_tool(tool) == convert_to_openai_tool(tool)


async def test_the_gate_holds_an_effect_that_is_no_service_call(hass: HomeAssistant) -> None:
    """EffectGate.hold: refused outside a running turn (nobody to ask); inside one, held
    under the question's words, run once after a yes with the requester's user, and
    never after a no."""
    gate = EffectGate.acquire(hass)
    try:
        ran: list[str | None] = []

        async def run(context: Context) -> None:
            ran.append(context.user_id)

        effect = ("automation", "create", {"config": "{}"})
        assert not gate.hold(Context(), effect, "create the automation", run)
        for confirmed in (False, True):
            turn = Context(user_id="asker")
            scope = gate.open_scope(turn)
            assert gate.hold(turn, effect, "create the automation", run)
            assert gate.hold(turn, effect, "create the automation", run)  # asked twice
            held = scope.take_held()
            assert held is not None
            assert held.actions == ("create the automation",)
            outcome = await scope.release(held.token, confirmed=confirmed)
            assert ran == (["asker"] if confirmed else [])
            assert outcome == ({"": Released(("create the automation",) * 2)} if confirmed else {})
            scope.close()
            assert not gate.hold(turn, effect, "create the automation", run)
    finally:
        gate.release_use()
