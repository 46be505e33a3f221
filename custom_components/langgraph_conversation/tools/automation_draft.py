"""A model's draft of an automation, checked before anyone is asked to create it.

The model is untrusted and sends anything: any types, templates, huge structures, names
with YAML or newlines in them, entities it should not reach. A draft becomes an
automation only when every check here passes, in this order, each failing with a
sentence the model can act on:

1. Shape and size: a name of one line; triggers, conditions and actions as lists of
   objects; at most MAX_ITEMS of each, nesting at most MAX_DEPTH, at most MAX_CHARS in all.
2. Kinds: triggers, conditions and actions only of the kinds listed below, which name
   their entities explicitly. Templates are refused anywhere (an entity read inside one
   cannot be checked), and so are device, area, floor and label targets (what they reach
   changes as the home changes), scripts and other automations (their steps are not
   here to check), webhooks and events (ways in from outside).
3. Entities: every entity named anywhere in the draft exists and is exposed to Assist
   (an `entity_id` given as a name is matched as Assist matches names, first).
4. Services: every action's service exists; a service without an entity is allowed only
   for notifications; a service on entities must be their domain's (or Home Assistant's
   generic turn_on/turn_off/toggle).
5. Critical actions: each action is classified by the effect gate's own rules
   (effects.critical_action: unlock, open a garage door, gate or door, disarm, a relay
   beside one of those, an entity marked "always needs my yes"). They are refused unless
   the agent's owner allowed them; then the question names them.
6. Home Assistant's own automation validation (the editor's validator,
   `automation.config.async_validate_config_item`), on the draft as it will be written.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
import json
import re
from typing import Any

import voluptuous as vol

from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_should_expose
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import entity_registry as er

from ..agent.errors import ToolFailure
from .effects import critical_action
from .registry import ToolContext
from .targets import resolve_targets

# Limits of a draft: an automation said in a sentence or two is far smaller.
MAX_ITEMS = 20
MAX_DEPTH = 8
MAX_CHARS = 6000
MAX_NAME_CHARS = 80

TRIGGER_KINDS = frozenset(
    {"time", "time_pattern", "state", "numeric_state", "sun", "homeassistant"}
)
CONDITION_KINDS = frozenset({"state", "numeric_state", "time", "sun", "and", "or", "not"})
MODES = frozenset({"single", "restart", "queued", "parallel"})
# Services that act on no entity and may stand alone in an automation: notifications.
NOTIFY_DOMAINS = frozenset({"notify", "persistent_notification"})
# Domains whose services run other steps that cannot be checked here.
REFUSED_DOMAINS = frozenset(
    {
        "automation",
        "script",
        "scene",
        "shell_command",
        "python_script",
        "pyscript",
        "rest_command",
        "hassio",
        "homeassistant_alerts",
        "recorder",
        "logger",
        "system_log",
        "input_text",
        # Its services restart or stop Home Assistant, or act on any domain's entities
        # by another domain's rules: an entity's own domain's service says what it does.
        "homeassistant",
    }
)
# Keys naming targets that are not entities.
_INDIRECT_TARGETS = ("device_id", "area_id", "floor_id", "label_id", "device")
_TEMPLATE = re.compile(r"\{\{|\{%|\{#")
_ENTITY_ID = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+$")
_SERVICE = re.compile(r"^([a-z0-9_]+)\.([a-z0-9_]+)$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
# Keys of an action step besides its service's.
_ACTION_KEYS = frozenset({"action", "service", "target", "data", "entity_id", "alias", "enabled"})
_DELAY_KEYS = frozenset({"delay", "alias", "enabled"})

try:  # Home Assistant >= 2026.9 validates with probatio (2026.2: voluptuous)
    from probatio import Error as _ProbatioError

    _INVALID: tuple[type[Exception], ...] = (_ProbatioError, vol.Invalid, HomeAssistantError)
except ImportError:
    _INVALID = (vol.Invalid, HomeAssistantError)


@dataclass(frozen=True, slots=True)
class Draft:
    """A checked draft: the automation as it will be written (without id and
    description), the entities it names, and the critical effects of its actions."""

    name: str
    config: dict[str, Any]
    entities: tuple[str, ...]
    critical: tuple[str, ...]


def _refuse(text: str) -> ToolFailure:
    return ToolFailure({"error": "invalid_automation", "error_text": text})


def _plural(arguments: dict[str, Any], key: str) -> Any:
    """A list argument under its plural or singular key ("triggers" or "trigger")."""
    if key in arguments:
        return arguments[key]
    return arguments.get(key[:-1])


def _list_of_objects(value: Any, what: str, *, required: bool) -> list[dict[str, Any]]:
    if value is None or value == []:
        if required:
            raise _refuse(f"'{what}' is required: a list of at least one {what[:-1]}.")
        return []
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise _refuse(f"'{what}' must be a list of objects, not {type(value).__name__}.")
    if len(value) > MAX_ITEMS:
        raise _refuse(f"'{what}' has {len(value)} items; at most {MAX_ITEMS} are allowed.")
    for item in value:
        if not isinstance(item, dict):
            raise _refuse(f"Each of '{what}' must be an object, not {type(item).__name__}.")
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _refuse("'name' is required: the automation's name, a few words.")
    if _CONTROL.search(value.strip()):
        raise _refuse("'name' must be one line of plain text.")
    name = " ".join(value.split())
    if len(name) > MAX_NAME_CHARS:
        raise _refuse(f"'name' has {len(name)} characters; at most {MAX_NAME_CHARS}.")
    if _TEMPLATE.search(name):
        raise _refuse("'name' may not hold a template.")
    return name


def _walk(value: Any, depth: int = 0) -> Iterator[tuple[str | None, Any]]:
    """Every (key, value) pair and list item inside `value`; refuses other types and
    nesting too deep."""
    if depth > MAX_DEPTH:
        raise _refuse(f"The automation is nested too deeply (at most {MAX_DEPTH} levels).")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise _refuse("Every key must be text.")
            yield key, item
            yield from _walk(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield None, item
            yield from _walk(item, depth + 1)
    elif value is not None and not isinstance(value, str | int | float | bool):
        raise _refuse(
            "Values must be text, numbers, true/false, lists or objects, "
            f"not {type(value).__name__}."
        )


def _entity_ids(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    ids: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise _refuse(f"An entity id must be text, not {type(item).__name__}.")
        ids.extend(part.strip().lower() for part in item.split(",") if part.strip())
    return ids


def _kind(item: dict[str, Any], keys: tuple[str, ...]) -> str:
    for key in keys:
        if isinstance(item.get(key), str):
            return str(item[key])
    return ""


class _Checker:
    def __init__(self, hass: HomeAssistant, marked: frozenset[str]) -> None:
        self.hass = hass
        self.marked = marked
        self.entities: dict[str, None] = {}
        self.critical: dict[str, None] = {}
        self.registry = er.async_get(hass)

    def known(self, entity_id: str) -> bool:
        return self.hass.states.get(entity_id) is not None or (
            self.registry.async_get(entity_id) is not None
        )

    def entity(self, entity_id: str) -> None:
        if not _ENTITY_ID.match(entity_id) or not self.known(entity_id):
            raise _refuse(f"There is no entity '{entity_id[:80]}' in this home.")
        if not async_should_expose(self.hass, conversation.DOMAIN, entity_id):
            # Its id is not repeated back: the model may not know what is not exposed.
            raise ToolFailure(
                {
                    "error": "not_exposed",
                    "error_text": "The automation names an entity that is not exposed to "
                    "the assistant; only exposed entities may be used.",
                }
            )
        self.entities.setdefault(entity_id, None)

    def scan(self, part: Any) -> None:
        """Templates, indirect targets, and every entity named anywhere in `part`."""
        for key, value in _walk(part):
            if key in _INDIRECT_TARGETS:
                raise _refuse(f"'{key}' is not allowed: name the entities themselves (entity_id).")
            if isinstance(value, str):
                if _TEMPLATE.search(value):
                    raise _refuse(
                        "Templates are not allowed in automations made by voice (what they "
                        "read cannot be checked): use plain values."
                    )
                if key in ("entity_id", "zone"):
                    for entity_id in _entity_ids(value):
                        self.entity(entity_id)
                elif (
                    key not in ("action", "service")
                    and _ENTITY_ID.match(value.lower())
                    and self.known(value.lower())
                ):
                    self.entity(value.lower())
            elif key in ("entity_id", "zone") and isinstance(value, list):
                for entity_id in _entity_ids(value):
                    self.entity(entity_id)

    def trigger(self, item: dict[str, Any]) -> dict[str, Any]:
        kind = _kind(item, ("trigger", "platform"))
        if kind not in TRIGGER_KINDS:
            raise _refuse(
                f"Trigger kind '{kind[:40]}' is not allowed; use one of: "
                f"{', '.join(sorted(TRIGGER_KINDS))}."
            )
        item = {("trigger" if key == "platform" else key): value for key, value in item.items()}
        if kind in ("state", "numeric_state") and "entity_id" not in item:
            raise _refuse(f"A {kind} trigger needs an entity_id.")
        return item

    def condition(self, item: dict[str, Any]) -> dict[str, Any]:
        kind = _kind(item, ("condition",))
        if kind not in CONDITION_KINDS:
            raise _refuse(
                f"Condition kind '{kind[:40]}' is not allowed; use one of: "
                f"{', '.join(sorted(CONDITION_KINDS))}."
            )
        if kind in ("state", "numeric_state") and "entity_id" not in item:
            raise _refuse(f"A {kind} condition needs an entity_id.")
        if kind in ("and", "or", "not"):
            inner = _list_of_objects(item.get("conditions"), "conditions", required=True)
            item = {**item, "conditions": [self.condition(each) for each in inner]}
        return item

    def action(self, item: dict[str, Any]) -> dict[str, Any]:
        if "delay" in item:
            if set(item) - _DELAY_KEYS:
                raise _refuse("A delay step holds only 'delay'.")
            return item
        if "condition" in item:
            return self.condition(item)
        service = _kind(item, ("action", "service"))
        match = _SERVICE.match(service.lower())
        if match is None:
            raise _refuse(
                "Each action calls a service ('action': 'light.turn_on' with a 'target' "
                "of entity ids), waits ('delay') or checks a condition; "
                f"'{str(service)[:40] or 'nothing'}' is none of these."
            )
        if extra := set(item) - _ACTION_KEYS:
            raise _refuse(f"An action step may not hold {', '.join(sorted(extra))[:80]}.")
        domain, name = match.groups()
        if domain in REFUSED_DOMAINS:
            raise _refuse(
                f"An automation made by voice may not call {domain} services: what they "
                "run cannot be checked here."
            )
        if not self.hass.services.has_service(domain, name):
            raise _refuse(f"Home Assistant has no service {domain}.{name}.")
        rest = {key: value for key, value in item.items() if key not in ("action", "service")}
        item = {"action": f"{domain}.{name}", **rest}
        target = item.get("target")
        if target is not None and not isinstance(target, dict):
            raise _refuse("'target' must be an object with 'entity_id'.")
        data = item.get("data")
        if data is not None and not isinstance(data, dict):
            raise _refuse("'data' must be an object.")
        entities: list[str] = []
        for where in (item, target or {}, data or {}):
            if "entity_id" in where:
                entities.extend(_entity_ids(where["entity_id"]))
        if not entities:
            if domain not in NOTIFY_DOMAINS:
                raise _refuse(
                    f"The action {domain}.{name} names no entity: give it a 'target' "
                    "with the entity ids it acts on."
                )
            return item
        for entity_id in entities:
            if entity_id.split(".", 1)[0] != domain:
                raise _refuse(f"{domain}.{name} cannot act on {entity_id}.")
            effect = critical_action(
                self.hass,
                domain,
                name,
                entity_id,
                self.hass.states.get(entity_id),
                dict(data or {}),
                self.marked,
            )
            if effect is not None:
                self.critical.setdefault(effect, None)
        return item


async def _named(tool_context: ToolContext, value: Any, depth: int = 0) -> Any:
    """The draft with each `entity_id` given as a name ("Kitchen Light") replaced by the
    entity it names, matched as Assist matches names (exposed entities only; several
    matching is an error that lists them)."""
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, list):
        return [await _named(tool_context, item, depth + 1) for item in value]
    if not isinstance(value, dict):
        return value
    named: dict[Any, Any] = {}
    for key, item in value.items():
        if key == "entity_id":
            items = item if isinstance(item, list) else [item]
            resolved = []
            for each in items:
                if isinstance(each, str) and each.strip() and not _looks_like_ids(each):
                    (state,) = await resolve_targets(
                        tool_context, name=each, domains=set(), single=True
                    )
                    resolved.append(state.entity_id)
                else:
                    resolved.append(each)
            named[key] = resolved if isinstance(item, list) else resolved[0]
        else:
            named[key] = await _named(tool_context, item, depth + 1)
    return named


def _looks_like_ids(text: str) -> bool:
    return all(_ENTITY_ID.match(part.strip().lower()) for part in text.split(",") if part.strip())


async def check_draft(
    tool_context: ToolContext,
    arguments: dict[str, Any],
    *,
    marked: frozenset[str],
    critical_allowed: bool,
) -> Draft:
    """The draft the model sent, checked (module docstring); raises ToolFailure."""
    hass = tool_context.hass
    try:
        size = len(json.dumps(arguments, default=str))
    except (TypeError, ValueError):
        raise _refuse("The automation must be plain JSON.") from None
    if size > MAX_CHARS:
        raise _refuse(f"The automation is too large ({size:,} characters; at most {MAX_CHARS:,}).")
    name = _name(arguments.get("name"))
    mode = arguments.get("mode", "single")
    if not isinstance(mode, str) or mode not in MODES:
        raise _refuse(f"'mode' must be one of {', '.join(sorted(MODES))}.")
    checker = _Checker(hass, marked)
    triggers = _list_of_objects(_plural(arguments, "triggers"), "triggers", required=True)
    conditions = _list_of_objects(_plural(arguments, "conditions"), "conditions", required=False)
    actions = _list_of_objects(_plural(arguments, "actions"), "actions", required=True)
    # Names become entity ids first (shapes are known to be lists of objects by now).
    triggers = await _named(tool_context, triggers)
    conditions = await _named(tool_context, conditions)
    actions = await _named(tool_context, actions)
    for part in (triggers, conditions, actions):
        checker.scan(part)
    config: dict[str, Any] = {
        "alias": name,
        "triggers": [checker.trigger(item) for item in triggers],
        "conditions": [checker.condition(item) for item in conditions],
        "actions": [checker.action(item) for item in actions],
        "mode": mode,
    }
    if checker.critical and not critical_allowed:
        raise ToolFailure(
            {
                "error": "critical_action",
                "error_text": (
                    "Not created: automations made by voice may not "
                    f"{' or '.join(checker.critical)} (this agent's owner has not allowed "
                    "critical actions in automations)."
                ),
            }
        )
    await validate_with_home_assistant(hass, config)
    return Draft(name, config, tuple(checker.entities), tuple(checker.critical))


async def validate_with_home_assistant(hass: HomeAssistant, config: dict[str, Any]) -> None:
    """Home Assistant's own automation validation, as the editor runs it before saving."""
    # Imported here: the automation integration is set up (the tool is offered only
    # then), and agents without automations never import its config module.
    from homeassistant.components.automation.config import async_validate_config_item

    try:
        await async_validate_config_item(hass, "draft", dict(config))
    except _INVALID as err:
        detail = " ".join(str(err).split())[:300].rstrip(".")
        raise _refuse(f"Home Assistant rejects this automation: {detail}.") from None
    except (TypeError, ValueError, KeyError, AttributeError) as err:
        # A shape the schema did not expect at all; still a sentence, not a crash.
        raise _refuse(f"Home Assistant rejects this automation ({type(err).__name__}).") from None
