"""Helpers for tests that talk to the agent through Home Assistant."""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager
import inspect
from typing import Any

from awesomeversion import AwesomeVersion
from pytest_homeassistant_custom_component.common import MockConfigEntry
import voluptuous as vol

from custom_components.langgraph_conversation.config_flow import (
    DEFAULT_AGENT_OPTIONS,
    LangGraphConversationConfigFlow,
)
from custom_components.langgraph_conversation.const import (
    CONF_API_BASE,
    CONF_MODEL,
    DOMAIN,
    SUBENTRY_CONVERSATION,
)
from custom_components.langgraph_conversation.persistence import DATA_STORAGE
from fakes import FakeOllamaServer
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.config_entries import ConfigSubentryData
from homeassistant.const import __version__ as HA_VERSION
from homeassistant.core import Context, HomeAssistant
from homeassistant.data_entry_flow import section
from homeassistant.helpers import chat_session, llm
from homeassistant.setup import async_setup_component

# Home Assistant 2026.11 answers a second message on a conversation whose turn is still
# running with ConversationBusyError ("busy"), before the agent is called; older versions
# hand it to the agent, which serialises the two turns.
BUSY_CONVERSATION_ANSWERED = AwesomeVersion(HA_VERSION) >= AwesomeVersion("2026.11.0")

# Home Assistant 2026.11 takes the caller's context (keyword-only) and reports callers that
# leave it out; 2026.2 and 2026.10 have no such parameter.
_CHAT_SESSION_TAKES_CONTEXT = (
    "context" in inspect.signature(chat_session.async_get_chat_session).parameters
)


def open_chat_session(
    hass: HomeAssistant, conversation_id: str | None, context: Context | None = None
) -> AbstractContextManager[chat_session.ChatSession]:
    """`async_get_chat_session` as the running Home Assistant wants it called.

    The default context None acts for no user (as a satellite does): the test reads or
    adds to a conversation whoever owns it.
    """
    if _CHAT_SESSION_TAKES_CONTEXT:
        return chat_session.async_get_chat_session(hass, conversation_id, context=context)
    return chat_session.async_get_chat_session(hass, conversation_id)


async def assist_api(hass: HomeAssistant) -> llm.APIInstance:
    """Home Assistant's Assist API as an agent of ours gets it for a turn."""
    return await llm.async_get_api(
        hass,
        llm.LLM_API_ASSIST,
        llm.LLMContext(
            platform=DOMAIN,
            context=Context(),
            language="en",
            assistant=conversation.DOMAIN,
            device_id=None,
        ),
    )


async def assist_tool_name(hass: HomeAssistant, suffix: str) -> str:
    """The Assist API's name for a tool on this Home Assistant version.

    2026.2 names intent tools plainly (HassTurnOn); 2026.8+ prefixes them
    (intent__HassTurnOn). Tests look the name up instead of hard-coding either.
    """
    api = await assist_api(hass)
    names = [tool.name for tool in api.tools if tool.name.endswith(suffix)]
    assert names, f"no Assist tool ends with {suffix}: {[t.name for t in api.tools]}"
    return names[0]


def add_light(hass: HomeAssistant, object_id: str, name: str, *, exposed: bool) -> str:
    """A light state Assist can see (or not), without any integration behind it."""
    entity_id = f"light.{object_id}"
    hass.states.async_set(
        entity_id, "off", {"friendly_name": name, "supported_color_modes": ["onoff"]}
    )
    async_expose_entity(hass, conversation.DOMAIN, entity_id, exposed)
    return entity_id


async def setup_ollama_entry(
    hass: HomeAssistant, server: FakeOllamaServer, **options: Any
) -> MockConfigEntry:
    """A loaded entry for the fake Ollama server (ollama_chat/llama3.2) with one agent,
    "Local agent": the default agent options with `options` over them."""
    assert await async_setup_component(hass, "homeassistant", {})
    entry = MockConfigEntry(
        domain=DOMAIN,
        title="ollama_chat/llama3.2",
        # Stored by this version: its options are the user's, not older versions' defaults.
        minor_version=LangGraphConversationConfigFlow.MINOR_VERSION,
        data={CONF_MODEL: "ollama_chat/llama3.2", CONF_API_BASE: server.base_url},
        subentries_data=[
            ConfigSubentryData(
                data={**DEFAULT_AGENT_OPTIONS, **options},
                subentry_type=SUBENTRY_CONVERSATION,
                title="Local agent",
                unique_id=None,
            )
        ],
    )
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    return entry


def messages_of(request: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """The messages of one role in a chat-completions request the fake received."""
    return [m for m in request["messages"] if m["role"] == role]


def text_of(message: dict[str, Any]) -> str:
    """Message content as text (providers may send a list of content parts)."""
    content = message.get("content") or ""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content


_CONTEXT_STARTS = ("[Context for the request", "<conversation_summary>", "<knowledge>")


def prompt_text(request: dict[str, Any]) -> str:
    """Everything a request tells the model besides the history's words: the system
    message, the summary and the context notes (clock, place, recalled memories) and
    passages, which come after the history (agent/graph/prompts.py), joined."""
    messages = request["messages"]
    system = [text_of(m) for m in messages if m["role"] == "system"]
    context = [
        text_of(m)
        for m in messages
        if m["role"] == "user"
        and text_of(m).startswith(
            ("[Context for the request", "<conversation_summary>", "<knowledge>")
        )
    ]
    return "\n\n".join([*system, *context])


async def wait_until_healed(hass: HomeAssistant, limit: float = 60.0) -> None:
    """Wait until every database of the storage works again by itself (its retries run in
    the background; `limit` is a bound against a hang, not a measure)."""
    healing = hass.data[DATA_STORAGE].healing
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not all(health.up for health in healing.healths):
        assert loop.time() < deadline, healing.as_diagnostics()
        await asyncio.sleep(0.1)
    await hass.async_block_till_done()


async def conversations_written(hass: HomeAssistant) -> None:
    """Until everything turns handed to the storage is written, for a test that reads the
    file itself: a turn answers while its checkpoint is written (storage/healing/saver.py),
    a new conversation goes on while its link is (agent/runtime/thread_directory.py)."""
    for entry in hass.config_entries.async_loaded_entries(DOMAIN):
        if entry.runtime_data.built:
            await entry.runtime_data.runtime.threads.links_settled()
    await hass.data[DATA_STORAGE].healing.saver.settled()


def storage_down(hass: HomeAssistant) -> set[str]:
    """Which databases the healing layer holds as down ("conversations" and "memory" for
    the SQLite files, "database" for PostgreSQL)."""
    diagnostics = hass.data[DATA_STORAGE].healing.as_diagnostics()
    return {part for part, health in diagnostics.items() if health["state"] == "down"}


def form_fields(schema: vol.Schema) -> dict[str, Any]:
    """A form's fields by option key, those inside the agent form's sections included (a
    model role's section, stored nested, stays one field)."""
    fields: dict[str, Any] = {}
    for marker, value in schema.schema.items():
        inner = getattr(value, "schema", None)
        if isinstance(value, section) and "model" not in {str(key) for key in inner.schema}:
            fields.update(form_fields(inner))
        else:
            fields[str(marker)] = marker
    return fields


async def converse(
    hass: HomeAssistant,
    entry: MockConfigEntry,
    text: str,
    conversation_id: str | None = None,
    *,
    context: Context | None = None,
    user_id: str | None = None,
    device_id: str | None = None,
    language: str | None = None,
) -> conversation.ConversationResult:
    """One turn through Home Assistant's conversation API, to the entry's first agent, as
    `context` (else one of `user_id`), from `device_id`, in `language`."""
    from .conftest import agent_entity_id

    return await conversation.async_converse(
        hass,
        text,
        conversation_id,
        context or Context(user_id=user_id),
        language=language,
        agent_id=agent_entity_id(hass, entry),
        device_id=device_id,
    )
