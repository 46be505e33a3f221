"""Automations by voice: create one, list ours, delete one of ours.

Offered only to an agent whose owner turned "may create automations" on (off by
default), and only where Home Assistant's automation integration is loaded. Who may do
what is decided per asker before the turn (`AutomationAccess`, turn_assembly.py): anyone
talking to such an agent may hear which automations it made; only an active Home
Assistant administrator (whom the editor lets create automations), known by name, may
create or delete one, so a voice satellite with no known person cannot.

A draft comes in Home Assistant's own format and is checked by automation_draft.py
(exposed entities only, no templates or indirect targets, no critical action unless the
owner allowed them, then Home Assistant's own validation). An automation acts later,
unattended, so creating one is always critical: the write is held by the effect gate
(effects.EffectGate.hold) and happens only after the same person's yes to a question
that reads it back (automation_words.py) and names any critical action in it. Deleting
is held the same way. The file is written as the editor writes it (automation_files.py),
and each automation is tagged in its description with whom it was made for and when,
which is also how these tools know their own: only those are listed and deleted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
import json
import re
from typing import Any

from homeassistant.const import CONF_ID
from homeassistant.core import Context, HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.util import dt as dt_util

from ..agent.errors import ToolFailure
from .automation_draft import check_draft
from .automation_files import (
    AUTOMATION_DOMAIN,
    AutomationFileError,
    add_automation,
    automation_entity,
    read_automations,
    remove_automation,
)
from .automation_words import automation_words
from .effects import EffectGate
from .people import person_of_user
from .registry import AutomationAccess, ToolContext, ToolSpec

CREATE_TOOL = "home_automation_create"
LIST_TOOL = "home_automation_list"
DELETE_TOOL = "home_automation_delete"
# Characters of a person's name in the tag.
MAX_PERSON_CHARS = 60
# Automations a list answer names at most (newest first).
MAX_LISTED = 20

# The tag in an automation's description: who asked, and when. The household reads it in
# the editor; these tools recognise their own automations by it.
TAG = "Created by voice for {person} on {date} (LangGraph Conversation)."
_TAG = re.compile(
    r"^Created by voice for (?P<person>.+) on (?P<date>\d{4}-\d{2}-\d{2}) "
    r"\(LangGraph Conversation\)\.$"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def _failure(kind: str, text: str) -> ToolFailure:
    return ToolFailure({"error": kind, "error_text": text})


async def automation_access(
    hass: HomeAssistant,
    user_id: str | None,
    *,
    critical_allowed: bool,
    marked: frozenset[str],
) -> AutomationAccess:
    """What the asker of a turn may do with automations: create and delete only as an
    active administrator, named by their person (else their user's name)."""
    requester: str | None = None
    may_change = False
    if user_id:
        user = await hass.auth.async_get_user(user_id)
        if user is not None and user.is_active:
            person = person_of_user(hass, user_id)
            state = hass.states.get(person) if person else None
            requester = _person_name(state.name if state is not None else user.name)
            may_change = user.is_admin and requester is not None
    return AutomationAccess(
        requester=requester,
        may_change=may_change,
        critical_allowed=critical_allowed,
        marked=marked,
    )


def _person_name(name: str | None) -> str | None:
    """A name as the tag writes it: one line, not too long."""
    if not name:
        return None
    cleaned = " ".join(_CONTROL.sub(" ", name).split())[:MAX_PERSON_CHARS]
    return cleaned or None


def _access(tool_context: ToolContext, *, changing: bool) -> AutomationAccess:
    access = tool_context.automations
    if access is None:
        # Never offered then; a model naming the tool anyway is told so.
        raise _failure("not_allowed", "This assistant does not make automations.")
    if AUTOMATION_DOMAIN not in tool_context.hass.config.components:
        raise _failure("unavailable", "Automations are not set up in this home.")
    if changing and not access.may_change:
        who = (
            "Nobody known is asking (a voice satellite without a known person)"
            if access.requester is None
            else f"{access.requester} is not a Home Assistant administrator"
        )
        raise _failure(
            "not_allowed",
            f"Not done: {who}; only administrators may create or delete automations.",
        )
    return access


def _hold(
    tool_context: ToolContext,
    effect: tuple[str, str, dict[str, Any]],
    action: str,
    run: Callable[[Context], Awaitable[None]],
) -> None:
    """Hold the effect for the requester's yes (the gate asks); refuse if nobody can be
    asked."""
    try:
        gate = EffectGate.of(tool_context.hass)
    except RuntimeError:
        gate = None
    if gate is None or not gate.hold(tool_context.context, effect, action, run):
        raise _failure("not_allowed", "Not done: nobody can be asked to confirm this.")


async def _create(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    access = _access(tool_context, changing=True)
    hass = tool_context.hass
    # A file the editor could not manage is said now, before anyone is asked.
    await _our_automations(hass)
    draft = await check_draft(
        tool_context, arguments, marked=access.marked, critical_allowed=access.critical_allowed
    )
    words = automation_words(hass, draft.config, access.marked)
    today = dt_util.now().date().isoformat()
    config = {
        "alias": draft.name,
        "description": TAG.format(person=access.requester, date=today),
        **{key: value for key, value in draft.config.items() if key != "alias"},
    }
    action = f"create the automation \u201c{draft.name}\u201d: {words}"

    async def run(context: Context) -> None:
        config_id = await add_automation(hass, config, context)
        if automation_entity(hass, config_id) is None:
            raise HomeAssistantError(
                "it was written to automations.yaml, but Home Assistant did not load it "
                "(does configuration.yaml include automations.yaml?)"
            )

    effect = (AUTOMATION_DOMAIN, "create", {"config": json.dumps(config, sort_keys=True)})
    _hold(tool_context, effect, action, run)
    # Not read by the model: a held call's result comes after the answer.
    return {"status": "waiting for the user's yes", "automation": action}


def _ours(config: dict[str, Any]) -> re.Match[str] | None:
    description = config.get("description")
    return _TAG.match(description) if isinstance(description, str) else None


async def _our_automations(hass: HomeAssistant) -> list[dict[str, Any]]:
    try:
        configs = await read_automations(hass)
    except (AutomationFileError, HomeAssistantError, OSError) as err:
        raise _failure("unavailable", f"The automations file cannot be read ({err}).") from None
    found = []
    for config in configs:
        if (tag := _ours(config)) is None:
            continue
        config_id = str(config.get(CONF_ID, ""))
        entity_id = automation_entity(hass, config_id)
        state = hass.states.get(entity_id) if entity_id else None
        try:
            does = automation_words(hass, config)
        except (TypeError, ValueError, AttributeError, KeyError):
            does = "(edited since; open it in the automation editor)"
        found.append(
            {
                "id": config_id,
                "name": str(config.get("alias", ""))[:80],
                "does": does,
                "made_for": tag["person"],
                "made_on": tag["date"],
                "state": state.state if state is not None else "not loaded",
            }
        )
    found.sort(key=lambda item: (item["made_on"], item["id"]), reverse=True)
    return found


async def _list(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    _access(tool_context, changing=False)
    found = await _our_automations(tool_context.hass)
    result: dict[str, Any] = {"automations": found[:MAX_LISTED], "count": len(found)}
    if not found:
        result["note"] = "No automation made by voice exists."
    return result


async def _delete(tool_context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    _access(tool_context, changing=True)
    hass = tool_context.hass
    wanted_id = arguments.get("id")
    wanted_name = arguments.get("name")
    if wanted_id is not None and not isinstance(wanted_id, str | int):
        raise _failure("invalid_arguments", "'id' must be the id home_automation_list gave.")
    if wanted_name is not None and not isinstance(wanted_name, str):
        raise _failure("invalid_arguments", "'name' must be text.")
    if not wanted_id and not (wanted_name or "").strip():
        raise _failure(
            "invalid_arguments",
            "Say which automation: its 'id' or 'name' (home_automation_list lists them).",
        )
    ours = await _our_automations(hass)
    if wanted_id:
        matches = [item for item in ours if item["id"] == str(wanted_id)]
    else:
        name = " ".join(str(wanted_name).split()).casefold()
        matches = [item for item in ours if item["name"].casefold() == name]
    if not matches:
        raise _failure(
            "not_found",
            "No automation made by voice has that "
            f"{'id' if wanted_id else 'name'}; only those can be deleted here.",
        )
    if len(matches) > 1:
        raise _failure(
            "ambiguous",
            "Several automations made by voice have that name; say which by its id: "
            + "; ".join(f"{m['id']} (made on {m['made_on']})" for m in matches),
        )
    found = matches[0]
    action = (
        f"delete the automation \u201c{found['name']}\u201d "
        f"(made for {found['made_for']} on {found['made_on']})"
    )

    async def run(context: Context) -> None:
        if not await remove_automation(hass, found["id"]):
            raise HomeAssistantError("it was not in automations.yaml any more")

    _hold(tool_context, (AUTOMATION_DOMAIN, "delete", {"id": found["id"]}), action, run)
    return {"status": "waiting for the user's yes", "automation": action}


_STEP_LIST = {
    "type": "array",
    "items": {"type": "object"},
}

SPECS = [
    ToolSpec(
        name=CREATE_TOOL,
        description=(
            "Create a Home Assistant automation (asks the user to confirm first). In Home "
            'Assistant\'s automation format: triggers such as {"trigger": "time", '
            '"at": "07:00:00"}, {"trigger": "state", "entity_id": "...", '
            '"to": "on"}, numeric_state (above/below) or sun (event sunset/sunrise); '
            'optional conditions such as {"condition": "time", "weekday": ["mon", '
            '"tue", "wed", "thu", "fri"]} or state; actions such as {"action": '
            '"light.turn_on", "target": {"entity_id": "light.kitchen"}}. An entity_id '
            "is an exposed entity's id or its exact name; no templates."
        ),
        parameters={
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Short name of the automation"},
                "triggers": {**_STEP_LIST, "description": "When it runs"},
                "conditions": {**_STEP_LIST, "description": "Only if these hold (optional)"},
                "actions": {**_STEP_LIST, "description": "What it does"},
            },
            "required": ["name", "triggers", "actions"],
        },
        category="automations",
        handler=_create,
    ),
    ToolSpec(
        name=LIST_TOOL,
        description=(
            "List the automations made by voice: name, what each does, for whom and when "
            "it was made, and its id."
        ),
        parameters={"type": "object", "properties": {}},
        category="automations",
        handler=_list,
    ),
    ToolSpec(
        name=DELETE_TOOL,
        description=(
            "Delete one automation made by voice, by its id or name from "
            "home_automation_list (asks the user to confirm first)."
        ),
        parameters={
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The automation's id"},
                "name": {"type": "string", "description": "Or its name"},
            },
        },
        category="automations",
        handler=_delete,
    ),
]
