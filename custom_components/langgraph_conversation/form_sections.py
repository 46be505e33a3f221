"""The agent form as a newcomer reads it: the common choices first, the rest in sections.

About twenty-five fields on one page hid the few choices every agent needs (its
instructions, its kind, what it may control, its memory) among limits and tuning. Like Home
Assistant's own LLM agents, which keep advanced settings aside, the form shows those first
(with what always needs the user's yes: a choice to make knowingly, and its description
names the buttons and switches that look like a way in), then collapsed sections for
abilities, conversations, the model's limits and the rest. The model roles (fast,
fallback, vision, web search) are sections of their own already.

Stored options stay flat, as profile.py reads them; only the form nests them. `grouped`
builds the form's schema from the flat one, `nested` turns stored options into the form's
suggested values, `flattened` turns the form's answer back into options.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import voluptuous as vol

from homeassistant.data_entry_flow import section

from .const import (
    CONF_ACTIVITY_CONTENTS,
    CONF_AUTOMATIONS,
    CONF_AUTOMATIONS_CRITICAL,
    CONF_BASE_PROMPT,
    CONF_CAMERAS,
    CONF_COMPACT_CONTEXT,
    CONF_CONTEXT_WINDOW,
    CONF_CONTINUE_MINUTES,
    CONF_CONTINUE_TEXT,
    CONF_FALLBACK_MODEL,
    CONF_FAST_MODEL,
    CONF_HISTORY_BUDGET,
    CONF_KEEP_ALIVE,
    CONF_MAX_TOKENS,
    CONF_MAX_TOOL_ROUNDS,
    CONF_MODEL_RETRIES,
    CONF_REQUEST_TIMEOUT,
    CONF_SEARCH_KNOWLEDGE,
    CONF_TEMPERATURE,
    CONF_THINK,
    CONF_VISION_MODEL,
    CONF_WEB_SEARCH,
    CONF_WEB_SEARCH_MODEL,
)

SECTION_ABILITIES = "abilities"
SECTION_CONVERSATIONS = "conversations"
SECTION_MODEL_SETTINGS = "model_settings"
SECTION_ADVANCED = "advanced"

# Section → (its options, collapsed), in the form's order. The model roles' own sections
# sit where they belong (the vision and web search models beside their abilities).
AGENT_SECTIONS: Mapping[str, tuple[tuple[str, ...], bool]] = {
    SECTION_ABILITIES: (
        (
            CONF_SEARCH_KNOWLEDGE,
            CONF_CAMERAS,
            CONF_WEB_SEARCH,
            CONF_AUTOMATIONS,
            CONF_AUTOMATIONS_CRITICAL,
        ),
        True,
    ),
    SECTION_CONVERSATIONS: (
        (CONF_CONTINUE_MINUTES, CONF_CONTINUE_TEXT, CONF_HISTORY_BUDGET, CONF_COMPACT_CONTEXT),
        True,
    ),
    SECTION_MODEL_SETTINGS: (
        (
            CONF_TEMPERATURE,
            CONF_MAX_TOKENS,
            CONF_MAX_TOOL_ROUNDS,
            CONF_MODEL_RETRIES,
            CONF_REQUEST_TIMEOUT,
            CONF_CONTEXT_WINDOW,
            CONF_KEEP_ALIVE,
            CONF_THINK,
        ),
        True,
    ),
    SECTION_ADVANCED: ((CONF_BASE_PROMPT, CONF_ACTIVITY_CONTENTS), True),
}
# Where the role sections (already nested in stored options) go among ours: the vision
# and web search models right after the abilities they serve.
_ORDER = (
    SECTION_ABILITIES,
    CONF_VISION_MODEL,
    CONF_WEB_SEARCH_MODEL,
    SECTION_CONVERSATIONS,
    SECTION_MODEL_SETTINGS,
    CONF_FAST_MODEL,
    CONF_FALLBACK_MODEL,
    SECTION_ADVANCED,
)
_SECTION_OF = {key: name for name, (keys, _) in AGENT_SECTIONS.items() for key in keys}


def grouped(fields: Mapping[Any, Any]) -> dict[Any, Any]:
    """The form's fields: the flat schema's fields outside any section first (in their
    order), then the sections in the form's order, each with its fields in theirs."""
    top: dict[Any, Any] = {}
    members: dict[str, dict[Any, Any]] = {name: {} for name in AGENT_SECTIONS}
    roles: dict[str, tuple[Any, Any]] = {}
    for marker, value in fields.items():
        key = str(marker.schema if isinstance(marker, vol.Marker) else marker)
        if isinstance(value, section):
            roles[key] = (marker, value)
        elif key in _SECTION_OF:
            members[_SECTION_OF[key]][marker] = value
        else:
            top[marker] = value
    for name in _ORDER:
        if name in roles:
            marker, value = roles[name]
            top[marker] = value
        elif members.get(name):
            collapsed = AGENT_SECTIONS[name][1]
            # Optional with an empty default: a caller that leaves a section out (an
            # automation through the flow API) gets its options' defaults.
            top[vol.Optional(name, default={})] = section(
                vol.Schema(members[name]), {"collapsed": collapsed}
            )
    return top


def nested(options: Mapping[str, Any]) -> dict[str, Any]:
    """Stored (flat) options as the form's suggested values."""
    form: dict[str, Any] = {}
    for key, value in options.items():
        if name := _SECTION_OF.get(key):
            form.setdefault(name, {})[key] = value
        else:
            form[key] = value
    return form


def flattened(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The form's answer as stored options (the role sections stay nested)."""
    options: dict[str, Any] = {}
    for key, value in answer.items():
        if key in AGENT_SECTIONS and isinstance(value, Mapping):
            options.update(value)
        else:
            options[key] = value
    return options
