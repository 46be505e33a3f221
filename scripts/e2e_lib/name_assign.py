"""Adding the integration as a person does, up to Home Assistant's "Name and assign" dialog.

Settings → Devices & services → Add integration → search "LangGraph" → LangGraph
Conversation → the "Model access" form, filled for the stand-in → Submit. The dialog that
follows the created entry lists its devices (the default agent and the AI task), each with
the integration's icon and fields to name it and assign an area. Before the integration
shipped brand/ images, each icon was a broken image showing its alt text, cut to
"LangG Conve", and the browser's console logged a 404 for it.

Home Assistant's flow refuses a model and base URL that an entry already uses, so the form
gets the stand-in's other model name (fakes/offline_model.py lists two). The entry is
deleted again afterwards: the other steps expect the stand-in's entry alone.
"""

from __future__ import annotations

from pathlib import Path
import re
from typing import Any

from .brand import BRAND_PATH, BrandTraffic, loaded_brand_images
from .browser import call_ws
from .ha_api import HomeAssistant
from .reconfigure import standin_entry, stored_data

DOMAIN = "langgraph_conversation"
INTEGRATION_NAME = "LangGraph Conversation"
# The stand-in's model list (fakes/offline_model.py: MODEL, OTHER_MODEL).
STANDIN_MODELS = ("openai/offline-demo", "openai/offline-demo-alt")
TIMEOUT_MS = 30_000


class NameAssignFailed(AssertionError):
    """The walk to "Name and assign" did not end as a person would expect."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise NameAssignFailed(message)


def free_standin_model(page: Any) -> str:
    """The stand-in model name no entry is titled with (an entry's title is its model)."""
    entries = call_ws(page, {"type": "config_entries/get", "domain": DOMAIN})
    assert isinstance(entries, list)
    titles = {entry["title"] for entry in entries}
    free = [model for model in STANDIN_MODELS if model not in titles]
    check(bool(free), f"every stand-in model already has an entry: {sorted(titles)}")
    return free[0]


def delete_entries_titled(page: Any, title: str, keep: str) -> list[str]:
    """Delete the entries titled `title` except `keep`, as the entry menu's Delete does
    (the frontend's own REST call); their ids."""
    entries = call_ws(page, {"type": "config_entries/get", "domain": DOMAIN})
    assert isinstance(entries, list)
    doomed = [e["entry_id"] for e in entries if e["title"] == title and e["entry_id"] != keep]
    for entry_id in doomed:
        page.evaluate(
            "id => document.querySelector('home-assistant').hass.callApi("
            "'DELETE', `config/config_entries/entry/${id}`)",
            entry_id,
        )
    return doomed


def _name_and_assign(page: Any, flow: Any, shot: Path) -> tuple[int, list[dict]]:
    """Check the created-entry step's devices and their icons, then leave it as a person
    with nothing to rename does; (devices, loaded brand images)."""
    created = flow.locator("step-flow-create-entry")
    try:
        created.wait_for(timeout=TIMEOUT_MS)
    except Exception as err:
        shown = " ".join((flow.text_content() or "").split())
        raise NameAssignFailed(
            f"no created-entry step after Submit; the dialog shows {shown!r}"
        ) from err
    heading = flow.get_by_text("Name and assign").first
    heading.wait_for(timeout=TIMEOUT_MS)
    devices = created.locator(".device").count()
    check(devices > 0, "the created-entry step lists no devices to name and assign")
    # Every device row's icon, loaded: one broken icon is what a person would notice.
    loaded, images = loaded_brand_images(created, at_least=devices)
    page.screenshot(path=str(shot))
    check(
        len(images) == devices and len(loaded) == len(images),
        f"'Name and assign' lists {devices} device(s); brand images {images}",
    )

    # As a person leaves it: nothing to rename.
    flow.get_by_role("button", name=re.compile(r"^(Skip and finish|Finish)$")).click()
    flow.wait_for(state="hidden", timeout=TIMEOUT_MS)
    return devices, loaded


def add_entry_to_name_and_assign(
    page: Any, ha: HomeAssistant, traffic: BrandTraffic, shot: Path
) -> str:
    """Walk "Add integration" to "Name and assign" on `page` (logged in, watched by
    `traffic` since before the login); return what was seen. `shot` is where the dialog's
    screenshot goes."""
    standin = standin_entry(page)
    api_base = stored_data(ha, standin["entry_id"])["api_base"]
    model = free_standin_model(page)

    # Settings → Devices & services, through the sidebar and the settings page.
    page.locator("ha-sidebar").get_by_text("Settings", exact=True).click()
    page.wait_for_url(re.compile(r"/config/dashboard"), timeout=TIMEOUT_MS)
    page.locator("ha-config-navigation").get_by_text("Devices & services", exact=True).click()
    page.wait_for_url(re.compile(r"/config/integrations"), timeout=TIMEOUT_MS)
    page.get_by_role("button", name=re.compile(r"Add integration", re.I)).click()
    page.get_by_placeholder(re.compile(r"Search for a brand", re.I)).fill("LangGraph")
    page.locator("dialog-add-integration ha-integration-list-item").filter(
        has_text=INTEGRATION_NAME
    ).first.click(timeout=TIMEOUT_MS)

    flow = page.locator("dialog-data-entry-flow")
    form = flow.locator("step-flow-form")
    form.wait_for(timeout=TIMEOUT_MS)
    form.get_by_role("textbox", name=re.compile(r"^Model")).fill(model)
    form.locator("input[type=password]").fill("no-key")  # the stand-in takes any key
    form.get_by_role("textbox", name=re.compile(r"^Base URL")).fill(api_base)
    flow.get_by_role("button", name="Submit").click()

    try:
        devices, loaded = _name_and_assign(page, flow, shot)
    finally:
        # Whatever happened after Submit, the stand-in's entry is left alone again.
        deleted = delete_entries_titled(page, model, keep=standin["entry_id"])
    check(len(deleted) == 1, f"expected one new entry titled {model!r}, deleted {deleted}")

    ours_failed = [(status, url) for status, url in traffic.ours if status != 200]
    check(not ours_failed, f"brand requests that did not answer 200: {ours_failed}")
    shown = loaded[0]["src"].split("?")[0]
    check(
        (200, shown) in traffic.ours,
        f"no request for the dialog's icon {shown} answered 200: {traffic.ours}",
    )
    check(not traffic.console_errors, f"console errors for our brand: {traffic.console_errors}")
    return (
        f"added {model} at {api_base} through Add integration; 'Name and assign' lists "
        f"{devices} devices, each icon loaded ({loaded[0]['width']}px, alt "
        f"{loaded[0]['alt']!r}); {len(traffic.ours)} request(s) for {BRAND_PATH}: all 200; "
        f"no console error for it ({len(traffic.others_failed)} other integrations' brand "
        "images failed: Home Assistant fetches core brands from the internet, offline here); "
        "the entry deleted again"
    )
