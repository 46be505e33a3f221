"""The entry's Reconfigure step, as a person walks it: the entry's menu on the integration
page, Reconfigure, another model from the server's list, Submit.

Checked from outside the browser afterwards: the entry's stored model (its diagnostics,
through the REST API, as a person would download them) and that the agent still answers.
"""

from __future__ import annotations

import re
import time
from typing import Any

from .browser import call_ws
from .ha_api import HomeAssistant, request

DOMAIN = "langgraph_conversation"
# The stand-in lists this second name next to its own (fakes/offline_model.py).
NEW_MODEL = "openai/offline-demo-alt"


class ReconfigureFailed(AssertionError):
    """The reconfigure walk did not end as a person would expect."""


def standin_entry(page: Any, entry_id: str | None = None) -> dict[str, Any]:
    """The stand-in's entry (other steps may have added entries for other servers), or
    the entry `entry_id` once it is known (its title changes with the model)."""
    entries = call_ws(page, {"type": "config_entries/get", "domain": DOMAIN})
    assert isinstance(entries, list)
    if entry_id is not None:
        found = [entry for entry in entries if entry["entry_id"] == entry_id]
    else:
        found = [entry for entry in entries if "offline-demo" in entry["title"]]
    if len(found) != 1:
        titles = [entry["title"] for entry in entries]
        raise ReconfigureFailed(f"expected one stand-in {DOMAIN} entry among {titles}")
    return found[0]


def stored_data(ha: HomeAssistant, entry_id: str) -> dict[str, Any]:
    """The entry's data, from its diagnostics (the key is redacted there)."""
    response = request(ha.url(f"/api/diagnostics/config_entry/{entry_id}"), token=ha.token)
    if response.status != 200:
        raise ReconfigureFailed(f"diagnostics: HTTP {response.status} {response.body}")
    return response.body["data"]["entry"]["data"]


def stored_model(ha: HomeAssistant, entry_id: str) -> str:
    """The model in the entry's data, from its diagnostics."""
    return stored_data(ha, entry_id)["model"]


def ask_agent(ha: HomeAssistant, agent_id: str, text: str) -> str:
    response = request(
        ha.url("/api/conversation/process"),
        data={"text": text, "agent_id": agent_id, "language": "en"},
        token=ha.token,
    )
    if response.status != 200:
        raise ReconfigureFailed(f"conversation/process: HTTP {response.status} {response.body}")
    return response.body["response"]["speech"]["plain"]["speech"]


def reconfigure_model(page: Any, ha: HomeAssistant, agent_id: str) -> str:
    """Walk Reconfigure to NEW_MODEL; return what was seen."""
    entry = standin_entry(page)
    if not entry.get("supports_reconfigure"):
        raise ReconfigureFailed(f"the entry does not offer Reconfigure: {entry}")
    before = stored_model(ha, entry["entry_id"])
    if before == NEW_MODEL:
        raise ReconfigureFailed(f"the entry already uses {NEW_MODEL}")

    page.goto(f"{ha.base_url}/config/integrations/integration/{DOMAIN}")
    row = page.locator("ha-config-entry-row").filter(has_text=entry["title"]).first
    row.wait_for(timeout=30_000)
    # The first menu of the row is the entry's own (its agents' rows follow, with theirs).
    row.get_by_role("button", name="Menu").first.click()
    # Each entry's row has its own menu (another step may have added an entry).
    row.locator('ha-dropdown-item[value="reconfigure"]').first.click()

    form = page.locator("dialog-data-entry-flow step-flow-form")
    form.wait_for(timeout=30_000)
    # The model field lists the server's models (a picker that also takes typed text).
    picker = form.locator("ha-generic-picker").first
    picker.wait_for(timeout=15_000)
    picker.click()
    search = page.locator("ha-picker-combo-box input, ha-generic-picker input").first
    search.wait_for(timeout=10_000)
    search.fill("offline-demo-alt")
    item = page.locator("ha-combo-box-item").filter(has_text=NEW_MODEL).first
    item.wait_for(timeout=10_000)
    # The list filters as one types and may still be re-rendering: let it settle.
    page.wait_for_timeout(500)
    item.click()
    dialog = page.locator("dialog-data-entry-flow")
    deadline = time.monotonic() + 5
    picked = str(picker.evaluate("el => el.value"))
    while picked != NEW_MODEL and time.monotonic() < deadline:
        time.sleep(0.2)
        picked = str(picker.evaluate("el => el.value"))
    if NEW_MODEL not in picked:
        raise ReconfigureFailed(f"the model field shows {picked!r} after picking {NEW_MODEL}")
    dialog.get_by_role("button", name="Submit").click()
    # Home Assistant's own "successful" sentence (its common string since 2026.10).
    done = dialog.locator("step-flow-abort").get_by_text(re.compile(r"successful", re.I)).first
    done.wait_for(timeout=45_000)
    said = " ".join((done.text_content() or "").split())
    dialog.get_by_role("button", name=re.compile(r"^(Close|Finish|OK)$")).first.click()

    # The title follows the model (the entry was not renamed); the stored data, seen in
    # the diagnostics, changed with it. The stand-in's key is "offline-demo", which the
    # diagnostics redact wherever it appears, inside the model's name too.
    deadline = time.monotonic() + 30
    reloaded = standin_entry(page, entry["entry_id"])
    while reloaded["title"] != NEW_MODEL and time.monotonic() < deadline:
        time.sleep(0.5)
        reloaded = standin_entry(page, entry["entry_id"])
    if reloaded["title"] != NEW_MODEL:
        raise ReconfigureFailed(f"the entry is titled {reloaded['title']!r}, not {NEW_MODEL!r}")
    after = stored_model(ha, entry["entry_id"])
    if after == before:
        raise ReconfigureFailed(f"the entry's stored model is still {before!r}")
    while reloaded["state"] != "loaded" and time.monotonic() < deadline:
        time.sleep(0.5)
        reloaded = standin_entry(page, entry["entry_id"])
    if reloaded["state"] != "loaded":
        raise ReconfigureFailed(f"the entry is {reloaded['state']} after reconfiguring")
    deadline = time.monotonic() + 30
    while ha.state(agent_id)["state"] == "unavailable" and time.monotonic() < deadline:
        time.sleep(0.5)
    answer = ask_agent(ha, agent_id, "Tell me a joke")
    if "scripted stand-in" not in answer:
        raise ReconfigureFailed(f"the agent's answer after reconfiguring: {answer!r}")
    return (
        f"entry {entry['title']!r} → {reloaded['title']!r} through the dialog ({said!r}); "
        f"diagnostics model {before!r} → {after!r}; the agent answers"
    )
