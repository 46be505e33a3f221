"""Diagnostics: configuration, versions, storage settings and counts.

No secrets (API keys of the chat and the embedding model and the PostgreSQL URL are
redacted, and so are the credentials inside any URL, such as a base URL's password or
`?api_key=`, however deep in the agents' role sections), no conversation text, no memory.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from homeassistant.components.diagnostics import async_redact_data
from homeassistant.core import HomeAssistant

from .agent.guard import redact_data
from .const import (
    CONF_API_KEY,
    CONF_BASE_PROMPT,
    CONF_EMBEDDING_API_KEY,
    CONF_POSTGRES_URL,
    CONF_PROMPT,
)
from .runtime_entry import LangGraphConfigEntry

# The PostgreSQL URL goes whole: besides its password it names the host and the user.
TO_REDACT = {CONF_API_KEY, CONF_EMBEDDING_API_KEY, CONF_POSTGRES_URL}
# What people wrote for an agent: shown as its length only.
_TEXTS = {CONF_PROMPT, CONF_BASE_PROMPT}
_PACKAGES = ("litellm", "langchain-litellm", "langgraph", "langchain-core", "pypdf")


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


async def async_get_config_entry_diagnostics(
    hass: HomeAssistant, entry: LangGraphConfigEntry
) -> dict[str, Any]:
    """What a bug report needs: settings (no keys, no prompts' text) and versions."""
    # Every string, at any depth: base URLs may carry a password or a key.
    return redact_data(await _diagnostics(hass, entry))


async def _diagnostics(hass: HomeAssistant, entry: LangGraphConfigEntry) -> dict[str, Any]:
    versions = await hass.async_add_executor_job(
        lambda: {name: _package_version(name) for name in _PACKAGES}
    )
    return {
        "entry": {
            "title": entry.title,
            "data": async_redact_data(dict(entry.data), TO_REDACT),
            "options": async_redact_data(dict(entry.options), TO_REDACT),
        },
        "agents": [
            {
                "type": subentry.subentry_type,
                "title": subentry.title,
                # Instructions can hold personal details; their size is what helps debug.
                # Fast and fallback models may carry keys of their own.
                "options": async_redact_data(
                    {
                        key: (f"<{len(value)} characters>" if key in _TEXTS else value)
                        for key, value in subentry.data.items()
                    },
                    TO_REDACT,
                ),
            }
            for subentry in entry.subentries.values()
        ],
        "packages": versions,
        "storage": await _storage_stats(hass, entry),
    }


async def _storage_stats(hass: HomeAssistant, entry: LangGraphConfigEntry) -> dict[str, Any]:
    """Effective settings, counts, sizes and schema versions; never the files' contents.

    The storage is opened by the entry's stack (stack.py): until it is built, there is
    nothing to count (and a stack that cannot be built is what a bug report is about).
    """
    # An entry that is not loaded has no stack at all.
    stack = getattr(entry, "runtime_data", None)
    if stack is None or not stack.built:
        return {"loaded": False, "stack_started": stack is not None and stack.started}
    from .persistence import DATA_STORAGE  # loaded with the stack

    shared = hass.data.get(DATA_STORAGE)
    if shared is None:
        return {"loaded": False}
    return {
        # What all entries' options combine to (persistence.combine_settings).
        "settings": shared.settings.as_diagnostics(),
        **await shared.async_stats(),
    }
