"""Helpers for scripts/develop, run with the leg virtualenv's Python (Home Assistant importable).

develop_config.py prepare CONFIG_DIR PORT  (before Home Assistant starts)
    Binds Home Assistant's HTTP server to 127.0.0.1:PORT. Version 2026.10 keeps that in
    .storage/http: an http: block in YAML is imported once, as a trial that reverts after
    five minutes, and is ignored afterwards.
    With LANGGRAPH_MODEL set (LANGGRAPH_API_KEY, LANGGRAPH_API_BASE optional) and no
    langgraph_conversation entry yet: writes one (model access entry plus one
    "conversation" agent subentry) into .storage/core.config_entries, and points the
    preferred Assist pipeline at its entity.
    Then prints, one per line, the requirements of the integrations this configuration
    sets up that the virtualenv lacks (scripts/develop installs them: Home Assistant runs
    with --skip-pip). Notes go to stderr.

develop_config.py check CONFIG_DIR PORT -- HASS COMMAND...
    Starts Home Assistant, waits until it runs and serves HTTP, stops it with SIGINT,
    checks that the integration's entity was live when an entry exists, scans the run's
    log, and prints one "develop --check: OK|FAILED (...)" line; exit status 0 or 1.
"""

from __future__ import annotations

import argparse
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


def seed_entry(config_dir: Path) -> str | None:
    """Adds the model access entry once; returns its entry id, or None when not added."""
    from homeassistant import config_entries
    from homeassistant.helpers import llm
    from homeassistant.util.ulid import ulid_now

    model = os.environ.get("LANGGRAPH_MODEL", "").strip()
    if not model:
        return None
    path = config_dir / ".storage" / config_entries.STORAGE_KEY
    store = read_store(path) or {
        "version": config_entries.STORAGE_VERSION,
        "minor_version": config_entries.STORAGE_VERSION_MINOR,
        "key": config_entries.STORAGE_KEY,
        "data": {"entries": []},
    }
    entries: list[dict[str, Any]] = store["data"]["entries"]
    if models := [e.get("data", {}).get("model") for e in entries if e.get("domain") == DOMAIN]:
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
    now = datetime.now(UTC).isoformat()
    entry_id = ulid_now()
    entries.append(
        {
            # The layout of ConfigEntry.as_dict() (storage 1.5: with subentries).
            "created_at": now,
            "data": data,
            "discovery_keys": {},
            "disabled_by": None,
            "domain": DOMAIN,
            "entry_id": entry_id,
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
                        **AGENT_DEFAULTS,
                    },
                    "subentry_id": ulid_now(),
                    "subentry_type": SUBENTRY_TYPE,
                    "title": AGENT_TITLE,
                    "unique_id": None,
                }
            ],
            "title": model,  # what the config flow names it
            "unique_id": None,
            "version": 1,
        }
    )
    write_store(path, store)
    note(f"configured {DOMAIN} with model {model} (entry {entry_id})")
    return entry_id


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
    if seed_entry(config_dir):
        seed_pipeline(config_dir, EXPECTED_ENTITY_ID)
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


def live_agent(config_dir: Path, since: datetime) -> tuple[str | None, str | None]:
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
    return found[0], None


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
    if not problems:
        # Judged from what Home Assistant flushed on stopping: its entity registry, and the
        # restore-state dump stamping every entity that was live.
        if expect_agent:
            entity_id, problem = live_agent(config_dir, since)
            if problem:
                problems.append(problem)
            else:
                details.append(f"{DOMAIN} loaded: {entity_id}")
                problems.extend(pipeline_problems(config_dir, entity_id))
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


def pipeline_problems(config_dir: Path, entity_id: str) -> list[str]:
    store = read_store(config_dir / ".storage" / "assist_pipeline.pipelines")
    if not store:
        return ["no Assist pipeline store"]
    data = store["data"]
    preferred = next((i for i in data["items"] if i["id"] == data.get("preferred_item")), None)
    if preferred is None:
        return ["no preferred Assist pipeline"]
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
    prepare.set_defaults(func=cmd_prepare)
    check = commands.add_parser("check")
    check.add_argument("config_dir")
    check.add_argument("port", type=int)
    check.add_argument("hass", nargs=argparse.REMAINDER)
    check.set_defaults(func=cmd_check)
    args = parser.parse_args()
    if getattr(args, "hass", None) and args.hass[0] == "--":
        args.hass = args.hass[1:]
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
