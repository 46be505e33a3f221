"""The development config of scripts/develop: prepared before Home Assistant starts, checked.

Run with the leg virtualenv's Python (Home Assistant importable), by path (see __init__.py):

python scripts/develop_lib/config.py prepare CONFIG_DIR PORT  (before Home Assistant starts)
    Binds Home Assistant's HTTP server to 127.0.0.1:PORT. Version 2026.10 keeps that in
    .storage/http: an http: block in YAML is imported once, as a trial that reverts after
    five minutes, and is ignored afterwards.
    With LANGGRAPH_MODEL set (LANGGRAPH_API_KEY, LANGGRAPH_API_BASE optional) and no
    langgraph_conversation entry yet: writes one (model access entry plus one
    "conversation" agent subentry) into .storage/core.config_entries, and points the
    preferred Assist pipeline at its entity.
    With --offline-model API_BASE (scripts/develop --offline-model, the scripted stand-in
    model of fakes/offline_model.py listening there): keeps one entry for the
    stand-in (model openai/offline-demo) pointed at API_BASE, points the preferred Assist
    pipeline at its agent, and exposes the demo locks, weather entities and camera to
    Assist (Home Assistant does not expose those domains by default; the demo phrases need
    them). A new stand-in agent may look through cameras, the stand-in as its vision model,
    search the web, the stand-in (under a search model's name) as its web search model,
    and create automations;
    a new entry also gets an AI Task whose image model is the stand-in's, for
    ai_task.generate_image.
    Then prints, one per line, the requirements of the integrations this configuration
    sets up that the virtualenv lacks (scripts/develop installs them: Home Assistant runs
    with --skip-pip). Notes go to stderr.

python scripts/develop_lib/config.py check CONFIG_DIR PORT
        [--offline-model API_BASE --offline-pid PID] -- HASS COMMAND...
    Starts Home Assistant, waits until it runs and serves HTTP, stops it with SIGINT,
    checks that the integration's entity was live when an entry exists, scans the run's
    log, and prints one "develop --check: OK|FAILED (...)" line; exit status 0 or 1.
    With --offline-model it also asks the stand-in one demo phrase over HTTP, checks that
    the stand-in's agent was live and is the pipeline's, and stops the stand-in (PID).
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterable
from datetime import UTC, datetime
import json
import os
from pathlib import Path
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any
import urllib.error
import urllib.request

DOMAIN = "langgraph_conversation"
SUBENTRY_TYPE = "conversation"
AGENT_TITLE = "LangGraph Conversation"
# has_entity_name with name None: the entity is named after its device (the subentry title).
EXPECTED_ENTITY_ID = "conversation.langgraph_conversation"
AGENT_DEFAULTS: dict[str, Any] = {
    "temperature": 0.7,
    "max_tokens": 1024,
    "max_tool_rounds": 8,
    "request_timeout": 60,
}
# The scripted stand-in model of scripts/develop --offline-model (fakes/offline_model.py).
OFFLINE_MODEL = "openai/offline-demo"
OFFLINE_API_KEY = "offline-demo"  # the stand-in takes any key
OFFLINE_AGENT_TITLE = "LangGraph offline demo"
OFFLINE_ENTITY_ID = "conversation.langgraph_offline_demo"
# The offline entry's AI Task: the stand-in draws its images (coloured bands per word).
OFFLINE_AI_TASK_TITLE = "LangGraph offline AI Task"
OFFLINE_IMAGE_MODEL = "openai/offline-demo-image"
# Demo entities the offline demo phrases need that Home Assistant does not expose to Assist
# by default (locks and weather are not among its default exposed domains). The locks have
# no unique id, so their exposure lives in homeassistant.exposed_entities; the weather
# entities have one, so theirs lives in the entity registry.
OFFLINE_EXPOSE_UNREGISTERED = (
    "lock.front_door",
    "lock.kitchen_door",
    "lock.poorly_installed_door",
    "lock.openable_lock",
    # For "who is at the front door?": the demo camera has no unique id either.
    "camera.demo_camera",
)
# A new stand-in agent may look through cameras; the stand-in is its vision model too
# (LiteLLM's map does not know it sees, and it cannot: it reads the picture's header).
OFFLINE_AGENT_OPTIONS: dict[str, Any] = {
    "look_through_cameras": True,
    "vision_model": {"model": OFFLINE_MODEL},
    # It may search the web too: its web search model is one LiteLLM's map says searches,
    # at the stand-in's address (the entry's key and base URL: same provider), which
    # answers that it reaches no web, citing one page.
    "web_search": True,
    "web_search_model": {"model": "openai/gpt-4o-mini-search-preview"},
    # "Every weekday at seven turn on the kitchen lights": the stand-in drafts it, the
    # agent asks, and after a yes it is in automations.yaml (the developer is an admin).
    "create_automations": True,
}
OFFLINE_EXPOSE_REGISTERED = {
    # (domain, platform, unique_id): entity_id
    ("weather", "demo", "demo-weather-south"): "weather.demo_weather_south",
    ("weather", "demo", "demo-weather-north"): "weather.demo_weather_north",
}
ASSISTANT = "conversation"
STARTUP_TIMEOUT = 600  # seconds; a first start compiles translations and loads LiteLLM
STOP_TIMEOUT = 120


def note(message: str) -> None:
    print(f"develop: {message}", file=sys.stderr, flush=True)


# --- .storage files, in Home Assistant's own format ----------------------------------------


def read_store(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def write_store(path: Path, store: dict[str, Any]) -> None:
    """Atomic and private, like Home Assistant's own Store (entries may hold an API key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(store, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_http(config_dir: Path, port: int) -> None:
    """127.0.0.1:PORT in both slots of Home Assistant's HTTP config store, every start."""
    from homeassistant.components.http import config as http_config

    path = config_dir / ".storage" / http_config.STORAGE_KEY
    store = read_store(path)
    meta = ("created_at", "error", "error_message")
    now = datetime.now(UTC).isoformat()

    def bound(slot: dict[str, Any] | None) -> dict[str, Any]:
        kept = {key: value for key, value in (slot or {}).items() if key not in meta}
        kept.update(server_host=["127.0.0.1"], server_port=port)
        validated = http_config.HTTP_STORAGE_SCHEMA(kept)
        created = (slot or {}).get("created_at", now)
        return {**validated, "created_at": created, "error": None, "error_message": None}

    data = (store or {}).get("data") or {}
    pending = data.get("pending")
    write_store(
        path,
        {
            "version": http_config.STORAGE_VERSION,
            "minor_version": http_config.STORAGE_MINOR_VERSION,
            "key": http_config.STORAGE_KEY,
            "data": {
                "stable": bound(data.get("stable")),
                # A change made in the UI stays a pending trial, on the same address.
                "pending": bound(pending) if pending else None,
                "yaml_migration_done": True,
            },
        },
    )


def default_tool_categories() -> list[str]:
    """DEFAULT_TOOL_CATEGORIES of the integration's const.py: what the UI gives a new agent."""
    const = Path(__file__).resolve().parents[2] / "custom_components" / DOMAIN / "const.py"
    for node in ast.parse(const.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        named = any(isinstance(t, ast.Name) and t.id == "DEFAULT_TOOL_CATEGORIES" for t in targets)
        if named and node.value is not None:
            return list(ast.literal_eval(node.value))
    return []


def config_entries_store(config_dir: Path) -> tuple[Path, dict[str, Any]]:
    from homeassistant import config_entries

    path = config_dir / ".storage" / config_entries.STORAGE_KEY
    store = read_store(path) or {
        "version": config_entries.STORAGE_VERSION,
        "minor_version": config_entries.STORAGE_VERSION_MINOR,
        "key": config_entries.STORAGE_KEY,
        "data": {"entries": []},
    }
    return path, store


def new_entry(data: dict[str, Any], agent_title: str) -> dict[str, Any]:
    """A model access entry with one conversation agent subentry, as the UI would add it."""
    from homeassistant import config_entries
    from homeassistant.helpers import llm
    from homeassistant.util.ulid import ulid_now

    now = datetime.now(UTC).isoformat()
    return {
        # The layout of ConfigEntry.as_dict() (storage 1.5: with subentries).
        "created_at": now,
        "data": data,
        "discovery_keys": {},
        "disabled_by": None,
        "domain": DOMAIN,
        "entry_id": ulid_now(),
        "minor_version": 1,
        "modified_at": now,
        "options": {},
        "pref_disable_new_entities": False,
        "pref_disable_polling": False,
        "source": config_entries.SOURCE_USER,
        "subentries": [
            {
                "data": {
                    "llm_hass_api": [llm.LLM_API_ASSIST],
                    "prompt": llm.DEFAULT_INSTRUCTIONS_PROMPT,
                    "tool_categories": default_tool_categories(),
                    **AGENT_DEFAULTS,
                },
                "subentry_id": ulid_now(),
                "subentry_type": SUBENTRY_TYPE,
                "title": agent_title,
                "unique_id": None,
            }
        ],
        "title": data["model"],  # what the config flow names it
        "unique_id": None,
        "version": 1,
    }


def is_offline_entry(entry: dict[str, Any]) -> bool:
    data = entry.get("data") or {}
    return (
        entry.get("domain") == DOMAIN
        and data.get("model") == OFFLINE_MODEL
        and str(data.get("api_base", "")).startswith("http://127.0.0.1:")
    )


def seed_entry(config_dir: Path) -> str | None:
    """Adds the model access entry once; returns its entry id, or None when not added."""
    model = os.environ.get("LANGGRAPH_MODEL", "").strip()
    if not model:
        return None
    path, store = config_entries_store(config_dir)
    entries: list[dict[str, Any]] = store["data"]["entries"]
    ours = [e for e in entries if e.get("domain") == DOMAIN and not is_offline_entry(e)]
    if models := [e.get("data", {}).get("model") for e in ours]:
        if model not in models:
            note(
                f"keeping the existing {DOMAIN} entry ({', '.join(map(str, models))}); "
                f"LANGGRAPH_MODEL={model} is not applied (change it in the UI, or --reset)"
            )
        return None
    data = {"model": model}
    for key, variable in (("api_key", "LANGGRAPH_API_KEY"), ("api_base", "LANGGRAPH_API_BASE")):
        if value := os.environ.get(variable, "").strip():
            data[key] = value
    entry = new_entry(data, AGENT_TITLE)
    entries.append(entry)
    write_store(path, store)
    note(f"configured {DOMAIN} with model {model} (entry {entry['entry_id']})")
    return entry["entry_id"]


def seed_offline_entry(config_dir: Path, api_base: str) -> str:
    """Keeps one entry for the stand-in, pointed at API_BASE; returns its agent's subentry id.

    The stand-in listens on a new free port at every start, so an existing entry only gets
    its api_base updated (anything else about it, changed in the UI, stays).
    """
    path, store = config_entries_store(config_dir)
    entries: list[dict[str, Any]] = store["data"]["entries"]
    entry = next((e for e in entries if is_offline_entry(e)), None)
    if entry is None:
        entry = new_entry(
            {"model": OFFLINE_MODEL, "api_key": OFFLINE_API_KEY, "api_base": api_base},
            OFFLINE_AGENT_TITLE,
        )
        entry["subentries"].append(offline_ai_task())
        entry["subentries"][0]["data"].update(OFFLINE_AGENT_OPTIONS)
        entries.append(entry)
        note(f"configured {DOMAIN} for the offline stand-in model (entry {entry['entry_id']})")
    elif entry["data"].get("api_base") != api_base or entry.get("disabled_by"):
        entry["data"]["api_base"] = api_base
        entry["disabled_by"] = None
        entry["modified_at"] = datetime.now(UTC).isoformat()
    else:
        return offline_subentry_id(entry)
    write_store(path, store)
    return offline_subentry_id(entry)


def offline_ai_task() -> dict[str, Any]:
    """An AI Task subentry whose image model is the stand-in's (it borrows the entry's key
    and base URL: the same provider and server)."""
    from homeassistant.util.ulid import ulid_now

    return {
        "data": {"image_model": {"model": OFFLINE_IMAGE_MODEL}},
        "subentry_id": ulid_now(),
        "subentry_type": "ai_task_data",
        "title": OFFLINE_AI_TASK_TITLE,
        "unique_id": None,
    }


def offline_subentry_id(entry: dict[str, Any]) -> str:
    agents = [s for s in entry.get("subentries", []) if s.get("subentry_type") == SUBENTRY_TYPE]
    if not agents:
        raise SystemExit(
            f"develop: the offline demo entry {entry['entry_id']} has no conversation agent; "
            "add one in the UI, or --reset"
        )
    return str(agents[0]["subentry_id"])


def offline_entry_without_model(config_dir: Path) -> bool:
    """An offline demo entry exists (from an earlier --offline-model start)."""
    _path, store = config_entries_store(config_dir)
    return any(is_offline_entry(e) for e in store["data"]["entries"])


def agent_entity_id(config_dir: Path, subentry_id: str, default: str) -> str:
    """The entity of an agent subentry: from the entity registry once Home Assistant made it."""
    registry = read_store(config_dir / ".storage" / "core.entity_registry") or {}
    for entity in registry.get("data", {}).get("entities", []):
        if entity.get("platform") == DOMAIN and entity.get("config_subentry_id") == subentry_id:
            return str(entity["entity_id"])
    return default


def new_registry_entry(entity_id: str, unique_id: str, platform: str) -> Any:
    """An entity registry entry as Home Assistant stores it, knowing only the ids.

    Built with Home Assistant's own RegistryEntry, in the storage layout of the installed
    version. Fields without a default get "not known yet" values (None, 0 features, no
    entity name), which the integration fills in when it adds the entity.
    """
    import attr

    from homeassistant.helpers import entity_registry as er
    from homeassistant.util import dt as dt_util, uuid as uuid_util

    values: dict[str, Any] = {
        "entity_id": entity_id,
        "unique_id": unique_id,
        "platform": platform,
        "created_at": dt_util.utcnow(),
        "id": uuid_util.random_uuid_hex(),
        "options": {},
        "has_entity_name": False,
        "supported_features": 0,
    }
    for field in attr.fields(er.RegistryEntry):
        if field.default is attr.NOTHING and field.name not in values:
            values[field.name] = None
    return er.RegistryEntry(**values).as_storage_fragment


def expose_offline_demo(config_dir: Path) -> list[str]:
    """Exposes the demo locks, weather entities and camera to Assist; returns the ones
    changed."""
    from types import SimpleNamespace

    from homeassistant.components.homeassistant import exposed_entities
    from homeassistant.helpers import entity_registry as er
    from homeassistant.helpers.json import json_bytes

    def exposed(options: dict[str, Any]) -> bool:
        settings = options.get(ASSISTANT) or {}
        if settings.get("should_expose") is True:
            return False
        options[ASSISTANT] = {**settings, "should_expose": True}
        return True

    changed: list[str] = []
    path = config_dir / ".storage" / exposed_entities.STORAGE_KEY
    store = read_store(path) or {
        "version": exposed_entities.STORAGE_VERSION,
        "minor_version": 1,
        "key": exposed_entities.STORAGE_KEY,
        "data": {"assistants": {}, "exposed_entities": {}},
    }
    unregistered = store["data"].setdefault("exposed_entities", {})
    for entity_id in OFFLINE_EXPOSE_UNREGISTERED:
        settings = unregistered.setdefault(entity_id, {"assistants": {}})
        if exposed(settings.setdefault("assistants", {})):
            changed.append(entity_id)
    if changed:
        write_store(path, store)

    # Registered entities keep their exposure in the registry. Before Home Assistant's
    # first start there is none: entries made with its own RegistryEntry, in the current
    # storage layout, are adopted by the demo integration when it adds the entities.
    path = config_dir / ".storage" / er.STORAGE_KEY
    registry = read_store(path)
    if registry is None:
        empty = SimpleNamespace(
            entities={}, deleted_entities={}, settings=er.EntityRegistrySettings()
        )
        registry = {
            "version": er.STORAGE_VERSION_MAJOR,
            "minor_version": er.STORAGE_VERSION_MINOR,
            "key": er.STORAGE_KEY,
            "data": json.loads(json_bytes(er.EntityRegistry._data_to_save(empty))),  # type: ignore[arg-type]
        }
    entities: list[dict[str, Any]] = registry["data"]["entities"]
    registered_changed = []
    for (domain, platform, unique_id), entity_id in OFFLINE_EXPOSE_REGISTERED.items():
        entity = next(
            (
                e
                for e in entities
                if e["platform"] == platform
                and e["unique_id"] == unique_id
                and e["entity_id"].startswith(f"{domain}.")
            ),
            None,
        )
        if entity is None:
            entity = json.loads(json_bytes(new_registry_entry(entity_id, unique_id, platform)))
            entities.append(entity)
        if exposed(entity.setdefault("options", {})):
            registered_changed.append(entity["entity_id"])
    if registered_changed:
        write_store(path, registry)
    return changed + registered_changed


def seed_pipeline(config_dir: Path, entity_id: str) -> None:
    """Points the preferred Assist pipeline at the agent (creating the pipeline store)."""
    from homeassistant.components.assist_pipeline import pipeline
    from homeassistant.const import MATCH_ALL
    from homeassistant.util.ulid import ulid_now

    path = config_dir / ".storage" / pipeline.STORAGE_KEY
    store = read_store(path)
    if store is None:
        # What Home Assistant would create on its first start, with the agent instead of
        # the built-in one (and no speech engines: pick them under Settings → Voice assistants).
        item_id = ulid_now()
        store = {
            "version": pipeline.STORAGE_VERSION,
            "minor_version": pipeline.STORAGE_VERSION_MINOR,
            "key": pipeline.STORAGE_KEY,
            "data": {
                "items": [
                    {
                        "conversation_engine": entity_id,
                        "conversation_language": MATCH_ALL,
                        "id": item_id,
                        "language": "en",
                        "name": "Home Assistant",
                        "stt_engine": None,
                        "stt_language": None,
                        "tts_engine": None,
                        "tts_language": None,
                        "tts_voice": None,
                        "wake_word_entity": None,
                        "wake_word_id": None,
                        "prefer_local_intents": False,
                    }
                ],
                "preferred_item": item_id,
            },
        }
    else:
        data = store["data"]
        preferred = next(
            (item for item in data["items"] if item["id"] == data.get("preferred_item")),
            None,
        )
        if preferred is None:
            note("no preferred Assist pipeline found; pick the agent under Voice assistants")
            return
        if (
            preferred["conversation_engine"] == entity_id
            and preferred.get("conversation_language") == MATCH_ALL
        ):
            return
        # An LLM agent speaks every language: Home Assistant's UI stores "*" for it.
        preferred["conversation_engine"] = entity_id
        preferred["conversation_language"] = MATCH_ALL
    write_store(path, store)
    note(f"the preferred Assist pipeline now uses {entity_id}")


# --- which requirements this configuration needs --------------------------------------------


def configured_domains(config_dir: Path) -> set[str]:
    """Top-level keys of configuration.yaml ("light 2" counts as light), without parsing tags."""
    text = (config_dir / "configuration.yaml").read_text(encoding="utf-8")
    return {
        match.group(1)
        for match in re.finditer(r"^([a-z0-9_]+)(?:\s+[^:\s]+)?\s*:", text, re.MULTILINE)
    }


def entry_domains(config_dir: Path) -> set[str]:
    store = read_store(config_dir / ".storage" / "core.config_entries")
    if not store:
        return set()
    return {
        entry["domain"]
        for entry in store["data"]["entries"]
        if not entry.get("disabled_by") and entry.get("source") != "ignore"
    }


def manifest(domain: str, config_dir: Path) -> dict[str, Any] | None:
    import homeassistant.components as components

    for base in (config_dir / "custom_components", Path(components.__path__[0])):
        path = base / domain / "manifest.json"
        if path.exists():
            return json.loads(path.read_text(encoding="utf-8"))
    return None


def missing_requirements(config_dir: Path) -> list[str]:
    """Requirements of every integration this configuration sets up, as bootstrap does."""
    from homeassistant import bootstrap
    from homeassistant.const import BASE_PLATFORMS
    from homeassistant.util.package import is_installed

    domains = configured_domains(config_dir) | entry_domains(config_dir)
    domains |= bootstrap.CORE_INTEGRATIONS | bootstrap.DEFAULT_INTEGRATIONS
    domains |= set(BASE_PLATFORMS)  # bootstrap loads every base platform's manifest
    if "demo" in domains:
        from homeassistant.components import demo

        domains |= {str(p) for p in demo.COMPONENTS_WITH_CONFIG_ENTRY_DEMO_PLATFORM}
        domains |= {str(p) for p in demo.COMPONENTS_WITH_DEMO_PLATFORM}
        domains |= {"sun", "script", "scene", "group", "zone"}
    seen: set[str] = set()
    requirements: dict[str, None] = {}
    todo = sorted(domains)
    while todo:
        domain = todo.pop()
        if domain in seen:
            continue
        seen.add(domain)
        info = manifest(domain, config_dir)
        if info is None:
            continue
        # after_dependencies only order the setup; they are loaded when configured.
        todo.extend(info.get("dependencies", []))
        # The integration's own requirements come with the leg's virtualenv (leg_venv.sh).
        if domain != DOMAIN:
            requirements.update(dict.fromkeys(info.get("requirements", [])))
    return [req for req in requirements if not is_installed(req)]


def cmd_prepare(args: argparse.Namespace) -> int:
    config_dir = Path(args.config_dir)
    write_http(config_dir, args.port)
    if seed_entry(config_dir) and not args.offline_model:
        seed_pipeline(config_dir, EXPECTED_ENTITY_ID)
    if args.offline_model:
        subentry_id = seed_offline_entry(config_dir, args.offline_model)
        seed_pipeline(config_dir, agent_entity_id(config_dir, subentry_id, OFFLINE_ENTITY_ID))
        if changed := expose_offline_demo(config_dir):
            note(f"exposed to Assist for the offline demo: {', '.join(changed)}")
    elif offline_entry_without_model(config_dir):
        note(
            "this config has an agent for the offline stand-in model, which is not running "
            "now (start with --offline-model, or pick another agent under Voice assistants)"
        )
    for requirement in missing_requirements(config_dir):
        print(requirement)
    return 0


# --- check: start, probe, stop, judge ---------------------------------------------------------


def http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code
    except (OSError, ValueError):
        return None


def fetch(url: str) -> tuple[int | None, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            body = response.read(200_000).decode("utf-8", "replace")
            return response.status, response.headers.get("Content-Type", ""), body
    except urllib.error.HTTPError as err:
        return err.code, "", ""
    except (OSError, ValueError):
        return None, "", ""


def parse_time(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def live_agent(
    config_dir: Path, since: datetime, *, offline: bool = False
) -> tuple[str | None, str | None]:
    """(entity_id, problem): the integration's entity, if it was live during this run.

    Home Assistant dumps core.restore_state when it starts and when it stops, with every
    live restorable entity (a conversation entity is one) stamped with the current time;
    its entity registry tells which entity ids belong to the integration.
    """
    registry = read_store(config_dir / ".storage" / "core.entity_registry") or {}
    ours = [
        entity["entity_id"]
        for entity in registry.get("data", {}).get("entities", [])
        if entity.get("platform") == DOMAIN
    ]
    restore = read_store(config_dir / ".storage" / "core.restore_state") or {}
    live = {
        item["state"]["entity_id"]
        for item in restore.get("data", [])
        if parse_time(item["last_seen"]) >= since
    }
    found = [entity_id for entity_id in ours if entity_id in live]
    if not found:
        return None, f"no live {DOMAIN} entity (registered: {ours or 'none'})"
    if offline and (offline_id := offline_agent_entity(config_dir)):
        # With --offline-model, the stand-in's agent must be live.
        if offline_id not in found:
            return None, f"the offline demo agent {offline_id} was not live (live: {found})"
        return offline_id, None
    return found[0], None


def offline_agent_entity(config_dir: Path) -> str | None:
    _path, store = config_entries_store(config_dir)
    entry = next((e for e in store["data"]["entries"] if is_offline_entry(e)), None)
    if entry is None:
        return None
    return agent_entity_id(config_dir, offline_subentry_id(entry), OFFLINE_ENTITY_ID)


# A request as the agent sends it, cut down: the stand-in must answer with a real tool call.
PROBE_PROMPT = (
    "Static Context: An overview of the areas and the devices in this smart home:\n"
    "- Kitchen: Kitchen Lights (light)\n"
)


def probe_offline_model(api_base: str) -> str:
    """Asks the stand-in one demo phrase over HTTP; returns what it called (or raises)."""
    tool = {
        "type": "function",
        "function": {"name": "HassTurnOn", "parameters": {"type": "object", "properties": {}}},
    }
    body = {
        "model": OFFLINE_MODEL.split("/", 1)[1],
        "messages": [
            {"role": "system", "content": PROBE_PROMPT},
            {"role": "user", "content": "Turn on the kitchen lights"},
        ],
        "tools": [tool],
    }
    request = urllib.request.Request(
        f"{api_base}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer x"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer = json.load(response)
    calls = answer["choices"][0]["message"].get("tool_calls") or []
    if not calls:
        raise ValueError(f"no tool call in its answer: {answer['choices'][0]['message']}")
    function = calls[0]["function"]
    return f"{function['name']} {function['arguments']}"


def stop_offline_model(pid: int) -> str | None:
    """Stops the stand-in (a child of this process since scripts/develop exec'd it)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "the offline stand-in had exited already"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child after all: poll for it to go away
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return None
            done, status = 0, 0
        if done:
            code = os.waitstatus_to_exitcode(status)
            return None if code == 0 else f"the offline stand-in exited with {code}"
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return "the offline stand-in did not stop on SIGTERM"


def running(pid: int) -> bool:
    """Home Assistant is running: it sets its SIGTERM/SIGINT handlers only once started.

    Before that (while "wrapping up the start up phase"), SIGINT raises KeyboardInterrupt
    and SIGTERM kills it outright, skipping the final writes of its .storage files.
    """
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return False
    match = re.search(r"^SigCgt:\s*([0-9a-fA-F]+)", status, re.MULTILINE)
    return match is not None and bool(int(match.group(1), 16) & (1 << (signal.SIGTERM - 1)))


LOG_RECORD = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? (?P<level>[A-Z]+) \((?P<thread>[^)]*)\) "
    r"\[(?P<logger>[^\]]+)\] (?P<message>.*)$"
)


def log_records(path: Path) -> Iterable[dict[str, str]]:
    """The run's log as records; a record's continuation lines (tracebacks) join it."""
    if not path.exists():
        return []
    records: list[dict[str, str]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if match := LOG_RECORD.match(line):
            records.append(match.groupdict())
        elif records:
            records[-1]["message"] += "\n" + line
    return records


def concerns_us(record: dict[str, str]) -> bool:
    text = f"{record['logger']} {record['message']}"
    return (
        DOMAIN in text
        or record["logger"].startswith("homeassistant.components.demo")
        or re.search(r"\b(demo|frontend)\b", record["message"].split("\n")[0]) is not None
        or "recovery mode" in text
    )


def stop(process: subprocess.Popen[bytes], *, signal_it: bool = True) -> int:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while signal_it and process.poll() is None and not running(process.pid):
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if signal_it and process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        return process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def cmd_check(args: argparse.Namespace) -> int:
    config_dir = Path(args.config_dir)
    base = f"http://127.0.0.1:{args.port}"
    log_path = config_dir / "home-assistant.log"
    if log_path.exists():  # so only this run's log is judged (Home Assistant keeps one old log)
        log_path.replace(config_dir / "home-assistant.log.1")
    expect_agent = DOMAIN in entry_domains(config_dir)
    since = datetime.now(UTC).replace(microsecond=0)
    started = time.monotonic()
    console = open(config_dir / "develop-check.out", "wb")  # noqa: SIM115
    process = subprocess.Popen(args.hass, stdout=console, stderr=subprocess.STDOUT)
    problems: list[str] = []
    details: list[str] = []
    if args.offline_model:
        try:
            called = probe_offline_model(args.offline_model)
            details.append(f"offline stand-in answered a demo phrase: {called}")
        except (OSError, ValueError, KeyError, IndexError) as err:
            problems.append(f"the offline stand-in on {args.offline_model} failed: {err}")
    interrupted = False
    try:
        frontend = None
        while time.monotonic() - started < STARTUP_TIMEOUT:
            if process.poll() is not None:
                problems.append(f"Home Assistant exited early ({process.returncode})")
                break
            # The frontend's manifest needs no login, so polling it logs no failed auth.
            frontend = http_status(f"{base}/manifest.json")
            if frontend is not None and running(process.pid):
                break
            time.sleep(1)
        else:
            problems.append(f"not started after {STARTUP_TIMEOUT}s (/manifest.json: {frontend})")
        up_after = time.monotonic() - started
        if not problems:
            api = http_status(f"{base}/api/")  # 401 without a token: the API is up
            if api in (200, 401):
                details.append(f"up on {base} in {up_after:.0f}s (/api/ {api})")
            else:
                problems.append(f"/api/ gave {api}")
            status, content_type, body = fetch(f"{base}/")
            if status == 200 and "text/html" in content_type and "<html" in body.lower():
                details.append("frontend serves HTML")
            else:
                problems.append(f"frontend: GET / gave {status} {content_type or ''}".strip())
    except KeyboardInterrupt:
        interrupted = True
        problems.append("interrupted")
    finally:
        # On Ctrl-C the whole process group, Home Assistant too, had its SIGINT already.
        stopping = time.monotonic()
        code = stop(process, signal_it=not interrupted)
        stop_seconds = time.monotonic() - stopping
        console.close()
    if code != 0 and not interrupted:
        problems.append(f"Home Assistant exited with {code} on SIGINT")
    if args.offline_pid:
        if problem := stop_offline_model(args.offline_pid):
            problems.append(problem)
        else:
            details.append("offline stand-in stopped")
    if not problems:
        # Judged from what Home Assistant flushed on stopping: its entity registry, and the
        # restore-state dump stamping every entity that was live.
        if expect_agent:
            entity_id, problem = live_agent(config_dir, since, offline=bool(args.offline_model))
            if problem:
                problems.append(problem)
            else:
                details.append(f"{DOMAIN} loaded: {entity_id}")
                problems.extend(
                    pipeline_problems(config_dir, entity_id, strict=bool(args.offline_model))
                )
        else:
            details.append(f"no {DOMAIN} entry (set LANGGRAPH_MODEL to pre-configure one)")
    errors = [
        r for r in log_records(log_path) if r["level"] in ("ERROR", "CRITICAL") and concerns_us(r)
    ]
    for record in errors:
        print(f"  {record['level']} [{record['logger']}] {record['message']}", file=sys.stderr)
    if errors:
        problems.append(f"{len(errors)} error(s) about {DOMAIN}/demo/frontend in {log_path}")
    verdict = "FAILED" if problems else "OK"
    summary = "; ".join(problems + details)
    stopped = f"stopped in {stop_seconds:.0f}s, exit {code}"
    print(f"develop --check: {verdict} ({summary}; {stopped})", flush=True)
    return 1 if problems else 0


def pipeline_problems(config_dir: Path, entity_id: str, *, strict: bool = False) -> list[str]:
    """With strict (--offline-model), the pipeline must use the agent; else a note."""
    store = read_store(config_dir / ".storage" / "assist_pipeline.pipelines")
    if not store:
        return ["no Assist pipeline store"]
    data = store["data"]
    preferred = next((i for i in data["items"] if i["id"] == data.get("preferred_item")), None)
    if preferred is None:
        return ["no preferred Assist pipeline"]
    if preferred["conversation_engine"] != entity_id and strict:
        return [f"the preferred Assist pipeline uses {preferred['conversation_engine']}"]
    if preferred["conversation_engine"] != entity_id:
        # Only a warning: the developer may have chosen another agent in the UI.
        note(f"the preferred Assist pipeline uses {preferred['conversation_engine']}")
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prepare = commands.add_parser("prepare")
    prepare.add_argument("config_dir")
    prepare.add_argument("port", type=int)
    prepare.add_argument("--offline-model", metavar="API_BASE")
    prepare.set_defaults(func=cmd_prepare)
    check = commands.add_parser("check")
    check.add_argument("config_dir")
    check.add_argument("port", type=int)
    check.add_argument("--offline-model", metavar="API_BASE")
    check.add_argument("--offline-pid", type=int)
    check.add_argument("hass", nargs=argparse.REMAINDER)
    check.set_defaults(func=cmd_check)
    args = parser.parse_args()
    if getattr(args, "hass", None) and args.hass[0] == "--":
        args.hass = args.hass[1:]
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
