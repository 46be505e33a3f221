"""What the integration's actions do (registered in services.py, which documents who may
call which): memories, conversations, ratings, documents and the storage copy.

Loaded with the entries' stacks (stack.py): it imports the agent's libraries.
"""

from __future__ import annotations

from typing import Any
import uuid

from homeassistant.config_entries import ConfigEntryState
from homeassistant.core import (
    HomeAssistant,
    ServiceCall,
    ServiceResponse,
    callback,
)
from homeassistant.exceptions import HomeAssistantError, ServiceValidationError, Unauthorized
from homeassistant.helpers import entity_registry as er
from homeassistant.util import dt as dt_util

from .agent.guard import clean_text, storable_key
from .agent.memory import HOUSEHOLD, MEMORY_ROOT, person_label, personal_namespaces
from .agent.runtime import AgentRuntime
from .const import DOMAIN, EVENT_ACTIVITY, SUBENTRY_CONVERSATION
from .migrate import async_migrate
from .parties import party_of_action
from .persistence import DATA_STORAGE
from .profile import agent_profile
from .runtime_entry import LangGraphConfigEntry
from .services import (
    ATTR_AGENT,
    ATTR_COMMENT,
    ATTR_CONVERSATION_ID,
    ATTR_DEVICE_ID,
    ATTR_DIRECTION,
    ATTR_HOUSEHOLD,
    ATTR_MEMORY_ID,
    ATTR_RATING,
    ATTR_TEXT,
    ATTR_TURN,
    ATTR_USER_ID,
)
from .stack import StackFailed
from .tools.people import person_of_user


async def _require_admin(hass: HomeAssistant, call: ServiceCall) -> None:
    if call.context.user_id is None:
        return  # automations and scripts
    user = await hass.auth.async_get_user(call.context.user_id)
    if user is None or not user.is_admin:
        raise Unauthorized(context=call.context)


async def _namespaces(
    hass: HomeAssistant, call: ServiceCall, *, writes: bool
) -> tuple[tuple[str, ...], ...]:
    """The memory namespaces a call targets, the one written first, after checking the
    caller may touch them: a user's are their person's and their user id's
    (agent/memory/memories.py)."""
    if call.data[ATTR_HOUSEHOLD]:
        if writes and call.service == "clear_memories":
            await _require_admin(hass, call)
        return ((MEMORY_ROOT, HOUSEHOLD),)
    user_id = call.data.get(ATTR_USER_ID) or call.context.user_id
    if user_id is None:
        raise ServiceValidationError(
            translation_domain=DOMAIN, translation_key="memory_owner_needed"
        )
    if user_id != call.context.user_id:
        await _require_admin(hass, call)
    namespaces = ()
    if person_label(user_id) is not None:
        namespaces = personal_namespaces(user_id, person_of_user(hass, user_id))
    if not namespaces or (
        await hass.auth.async_get_user(user_id) is None
        and not await _any_item(_store(hass), namespaces)
    ):
        raise ServiceValidationError(
            translation_domain=DOMAIN,
            translation_key="unknown_user",
            translation_placeholders={"user_id": clean_text(user_id)[:100]},
        )
    return namespaces


async def _any_item(store: Any, namespaces: tuple[tuple[str, ...], ...]) -> bool:
    for namespace in namespaces:
        if await store.asearch(namespace, limit=1):
            return True
    return False


def _store(hass: HomeAssistant) -> Any:
    shared = hass.data.get(DATA_STORAGE)
    if shared is None or shared.memory is None:
        raise HomeAssistantError(translation_domain=DOMAIN, translation_key="memory_not_loaded")
    return shared.memory


async def _all_items(store: Any, namespaces: tuple[tuple[str, ...], ...]) -> list[Any]:
    items: list[Any] = []
    for namespace in namespaces:
        found: list[Any] = []
        while batch := await store.asearch(namespace, limit=100, offset=len(found)):
            found += batch
        items += found
    return items


async def list_memories(hass: HomeAssistant, call: ServiceCall) -> ServiceResponse:
    items = await _all_items(_store(hass), await _namespaces(hass, call, writes=False))
    return {
        "memories": [
            {
                "id": item.key,
                "text": item.value.get("text", ""),
                "updated": item.updated_at.isoformat(),
            }
            for item in items
        ]
    }


async def add_memory(hass: HomeAssistant, call: ServiceCall) -> ServiceResponse:
    namespace = (await _namespaces(hass, call, writes=True))[0]
    text = " ".join(clean_text(call.data[ATTR_TEXT]).split())
    key = uuid.uuid4().hex[:12]
    await _store(hass).aput(namespace, key, {"text": text})
    return {"id": key}


async def delete_memory(hass: HomeAssistant, call: ServiceCall) -> None:
    namespaces = await _namespaces(hass, call, writes=True)
    store = _store(hass)
    memory_id = clean_text(call.data[ATTR_MEMORY_ID])
    for namespace in namespaces:
        if await store.aget(namespace, memory_id) is not None:
            await store.adelete(namespace, memory_id)
            return
    raise ServiceValidationError(
        translation_domain=DOMAIN,
        translation_key="memory_not_found",
        translation_placeholders={"memory_id": memory_id[:100]},
    )


async def clear_memories(hass: HomeAssistant, call: ServiceCall) -> ServiceResponse:
    store = _store(hass)
    items = await _all_items(store, await _namespaces(hass, call, writes=True))
    for item in items:
        await store.adelete(item.namespace, item.key)
    return {"deleted": len(items)}


async def _thread(hass: HomeAssistant, call: ServiceCall) -> tuple[AgentRuntime, str]:
    """The runtime and thread id of an agent's conversation, found as a turn finds it."""
    entry_id = None
    subentry_id = None
    if entity := er.async_get(hass).async_get(call.data[ATTR_AGENT]):
        entry_id, subentry_id = entity.config_entry_id, entity.unique_id
    entry: LangGraphConfigEntry | None = (
        hass.config_entries.async_get_entry(entry_id) if entry_id else None
    )
    # A loaded entry of ours has its runtime (set up, not yet unloading).
    if entry is None or entry.domain != DOMAIN or entry.state is not ConfigEntryState.LOADED:
        raise ServiceValidationError(
            translation_domain=DOMAIN,
            translation_key="not_an_agent",
            translation_placeholders={"agent": call.data[ATTR_AGENT]},
        )
    runtime = await _runtime_of(entry)
    thread_id = await runtime.find_thread(
        subentry_id,
        storable_key(call.data[ATTR_CONVERSATION_ID]),
        party_of_action(call.context, call.data),
    )
    return runtime, thread_id


async def _runtime_of(entry: LangGraphConfigEntry) -> AgentRuntime:
    """The runtime of the entry an action works on, built now if needed; when its build
    failed (the log says why; the next call tries again), an error naming the entry."""
    try:
        return await entry.runtime_data.async_runtime()
    except StackFailed:
        raise HomeAssistantError(
            translation_domain=DOMAIN,
            translation_key="entry_failed",
            translation_placeholders={"title": entry.title},
        ) from None


async def export_thread(hass: HomeAssistant, call: ServiceCall) -> ServiceResponse:
    await _require_admin(hass, call)
    runtime, thread_id = await _thread(hass, call)
    ratings = await runtime.ratings.of_thread(thread_id)
    return {
        "messages": [
            {
                "role": message.type,
                "content": message.text,
                **(
                    {
                        "tool_calls": [
                            {"name": c["name"], "args": c["args"]} for c in message.tool_calls
                        ]
                    }
                    if getattr(message, "tool_calls", None)
                    else {}
                ),
                **({"rating": ratings[message.id]} if message.id in ratings else {}),
            }
            for message in await runtime.messages(thread_id)
        ]
    }


async def clear_thread(hass: HomeAssistant, call: ServiceCall) -> None:
    await _require_admin(hass, call)
    runtime, thread_id = await _thread(hass, call)
    await runtime.delete_thread(thread_id)


async def rate_answer(hass: HomeAssistant, call: ServiceCall) -> ServiceResponse:
    """Thumbs up or down (and a comment) on an answer of the caller's conversation."""
    named_user = call.data.get(ATTR_USER_ID)
    if call.data.get(ATTR_DEVICE_ID) or (named_user and named_user != call.context.user_id):
        await _require_admin(hass, call)
    runtime, thread_id = await _thread(hass, call)
    turn = call.data[ATTR_TURN]
    try:
        number = await runtime.rate_answer(
            thread_id,
            None if turn == "last" else turn,
            call.data[ATTR_RATING],
            call.data.get(ATTR_COMMENT, ""),
            dt_util.utcnow().timestamp(),
        )
    except LookupError:
        raise ServiceValidationError(
            translation_domain=DOMAIN,
            translation_key="answer_not_found",
            translation_placeholders={"turn": str(turn)},
        ) from None
    # Like the turns' activity events: names and counts, never the comment's words.
    hass.bus.async_fire(
        EVENT_ACTIVITY,
        {
            "type": "answer_rated",
            "agent_id": call.data[ATTR_AGENT],
            "conversation_id": call.data[ATTR_CONVERSATION_ID],
            "turn": number,
            "rating": call.data[ATTR_RATING],
            "has_comment": bool(call.data.get(ATTR_COMMENT)),
        },
        context=call.context,
    )
    return {"turn": number}


async def reindex_knowledge(hass: HomeAssistant, call: ServiceCall) -> ServiceResponse:
    """Read the documents of one agent, or of every agent that uses documents, again."""
    await _require_admin(hass, call)
    wanted = call.data.get(ATTR_AGENT)
    registry = er.async_get(hass)
    if wanted is not None:
        entity = registry.async_get(wanted)
        if entity is None or entity.platform != DOMAIN or entity.domain != "conversation":
            raise ServiceValidationError(
                translation_domain=DOMAIN,
                translation_key="not_an_agent",
                translation_placeholders={"agent": wanted},
            )
    report: dict[str, Any] = {}
    # Agents of entries whose build failed, left out of a read of every agent's documents.
    not_started: list[str] = []
    entries: list[LangGraphConfigEntry] = hass.config_entries.async_loaded_entries(DOMAIN)
    for entry in entries:
        agents = _knowledge_agents(hass, registry, entry, wanted)
        if not agents:
            continue
        if wanted is not None:
            runtime = await _runtime_of(entry)
        elif await entry.runtime_data.async_built():
            runtime = entry.runtime_data.runtime
        else:
            not_started += [name for name, _knowledge in agents]
            continue
        for name, knowledge in agents:
            result = await runtime.reindex_knowledge(knowledge)
            if result is None:
                raise HomeAssistantError(
                    translation_domain=DOMAIN, translation_key="memory_not_loaded"
                )
            report[name] = result.as_dict()
    if wanted is not None and not report:
        raise ServiceValidationError(
            translation_domain=DOMAIN,
            translation_key="not_an_agent",
            translation_placeholders={"agent": wanted},
        )
    return {"agents": report, **({"not_started": not_started} if not_started else {})}


def _knowledge_agents(
    hass: HomeAssistant,
    registry: er.EntityRegistry,
    entry: LangGraphConfigEntry,
    wanted: str | None,
) -> list[tuple[str, Any]]:
    """(entity id, documents) of the entry's agents to read again: the `wanted` one, or
    every one that uses documents."""
    found: list[tuple[str, Any]] = []
    for subentry in entry.subentries.values():
        if subentry.subentry_type != SUBENTRY_CONVERSATION:
            continue
        entity_id = registry.async_get_entity_id("conversation", DOMAIN, subentry.subentry_id)
        if wanted is not None and entity_id != wanted:
            continue
        agent = agent_profile(hass, subentry, entry.runtime_data.access).agent
        if (wanted is None and not agent.uses_knowledge) or agent.knowledge is None:
            continue
        found.append((entity_id or subentry.subentry_id, agent.knowledge))
    return found


@callback
async def migrate_storage(hass: HomeAssistant, call: ServiceCall) -> ServiceResponse:
    """Copying every conversation and memory (migrate.py) is for an administrator."""
    await _require_admin(hass, call)
    return await async_migrate(hass, call.data[ATTR_DIRECTION])
