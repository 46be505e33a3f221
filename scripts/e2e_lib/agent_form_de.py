"""The agent form as a person whose profile language is German sees it.

The profile's language is set as Home Assistant's profile page sets it: the frontend's
user data "language" (every open page of that user follows it at once). Then, on the
integration's page, the "add agent" button of the stand-in's entry opens the agent form.
Every label the form shows and every section's name must be the one `translations/de.json`
gives, none of them the English one; every section starts closed, with its fields hidden,
and opening it shows its fields' German labels. The form is closed without creating an
agent (the flow is gone afterwards, the entry's agents are the same), and the profile's
language is set back, also when a check fails.

The labels expected are those of the fields the form's own schema holds (the dialog's
`step.data_schema`): which fields a form shows depends on the model (Ollama's settings
appear only for Ollama models), so a translated key the form does not use is not looked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
import json
from pathlib import Path
import re
import time
from typing import Any

from .browser import call_ws
from .ha_api import HomeAssistant, request
from .reconfigure import standin_entry

DOMAIN = "langgraph_conversation"
SUBENTRY = "conversation"
LANGUAGE = "de"
TRANSLATIONS = Path(__file__).resolve().parents[2] / "custom_components" / DOMAIN / "translations"
TIMEOUT_MS = 30_000
# How long a section may take to open (it animates) before its fields must be shown.
OPEN_SECONDS = 10.0

# Every text node of an element's composed tree (shadow roots included), with whether it is
# laid out on the page: a label in a closed section, in a slot's unused fallback or in a
# hidden element has no box. Labels are often text nodes of their own directly in a shadow
# root, which Playwright's text selectors do not match.
TEXTS_JS = """
root => {
  const found = [];
  const walk = node => {
    if (node.nodeType === Node.TEXT_NODE) {
      const text = node.textContent.replace(/\\s+/g, ' ').trim();
      if (!text) return;
      const range = document.createRange();
      range.selectNodeContents(node);
      const shown = [...range.getClientRects()].some(r => r.width > 0 && r.height > 0);
      found.push([text, shown]);
      return;
    }
    if (node.nodeType !== Node.ELEMENT_NODE && node.nodeType !== Node.DOCUMENT_FRAGMENT_NODE) {
      return;
    }
    if (node.shadowRoot) walk(node.shadowRoot);
    for (const child of node.childNodes) walk(child);
  };
  walk(root);
  return found;
}
"""


class GermanFormFailed(AssertionError):
    """The German agent form was not what a German-speaking person should see."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise GermanFormFailed(message)


def subentry_strings(language: str) -> dict[str, Any]:
    """The agent form's strings in one of the shipped languages."""
    strings = json.loads((TRANSLATIONS / f"{language}.json").read_text(encoding="utf-8"))
    return strings["config_subentries"][SUBENTRY]


def texts(locator: Any) -> tuple[set[str], set[str]]:
    """(texts shown, every text) in the element's composed tree; a required field's
    marker ("Name*") does not count as part of its label."""
    shown: set[str] = set()
    every: set[str] = set()
    for text, laid_out in locator.evaluate(TEXTS_JS):
        text = text.rstrip("* ").strip()
        every.add(text)
        if laid_out:
            shown.add(text)
    return shown, every


def language_of(page: Any) -> str:
    return str(page.evaluate("document.querySelector('home-assistant').hass.language"))


def wait_for_language(page: Any, language: str) -> None:
    page.wait_for_function(
        "lang => document.querySelector('home-assistant')?.hass?.language === lang",
        arg=language,
        timeout=TIMEOUT_MS,
    )


def set_profile_language(page: Any, value: Any) -> None:
    call_ws(page, {"type": "frontend/set_user_data", "key": "language", "value": value})


@contextmanager
def profile_language(page: Any, language: str) -> Iterator[None]:
    """The signed-in user's profile language set to `language` (the page follows it);
    the user's earlier setting back on the way out, the page in its earlier language."""
    stored = call_ws(page, {"type": "frontend/get_user_data", "key": "language"})
    assert isinstance(stored, dict)
    locale = page.evaluate("document.querySelector('home-assistant').hass.locale")
    earlier = locale["language"]
    set_profile_language(page, {**locale, "language": language})
    try:
        wait_for_language(page, language)
        yield
    finally:
        # The page follows a stored language, not a removed setting: store the earlier
        # language first, and the user's own setting (none, on a new user) once the page
        # speaks it again.
        set_profile_language(page, {**locale, "language": earlier})
        try:
            wait_for_language(page, earlier)
        finally:
            set_profile_language(page, stored["value"])


def agents_of(page: Any, entry_id: str) -> list[tuple[str, str]]:
    """The entry's subentries as (type, title)."""
    listed = call_ws(page, {"type": "config_entries/subentries/list", "entry_id": entry_id})
    assert isinstance(listed, list)
    return sorted((item["subentry_type"], item["title"]) for item in listed)


def open_agent_form(page: Any, ha: HomeAssistant, standin: dict[str, Any], button: str) -> Any:
    """The integration's page → its "add agent" button (for the stand-in's entry when the
    page asks which entry); the dialog, once its form shows."""
    page.goto(ha.url(f"/config/integrations/integration/{DOMAIN}"))
    page.get_by_role("button", name=button, exact=True).first.click(timeout=TIMEOUT_MS)
    dialog = page.locator("dialog-data-entry-flow")
    form = dialog.locator("step-flow-form")
    # With more than one entry the frontend asks which entry the agent is for first.
    choice = (
        page.locator("dialog-pick-config-entry ha-list-item-button")
        .filter(has_text=standin["title"])
        .first
    )
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while not form.is_visible():
        if choice.is_visible():
            choice.click()
        check(time.monotonic() < deadline, f"no agent form after {button!r}")
        page.wait_for_timeout(200)
    # The form's fields render after the dialog; the last section comes last.
    dialog.locator("ha-expansion-panel").last.wait_for(timeout=TIMEOUT_MS)
    return dialog


def check_labels(
    where: str, shown: set[str], every: set[str], labels: dict[str, tuple[str, str]]
) -> None:
    """Each German label shown, no English one (where the two differ) anywhere."""
    missing = sorted(german for german, _ in labels.values() if german not in shown)
    check(not missing, f"{where}: German labels not shown: {missing}")
    english = sorted(en for german, en in labels.values() if en != german and en in every)
    check(not english, f"{where}: English labels in the German form: {english}")


def section_panels(dialog: Any) -> list[dict[str, Any]]:
    """The form's expansion panels as (header text, expanded), in order."""
    return dialog.locator("ha-expansion-panel").evaluate_all(
        "panels => panels.map(p => ({"
        " header: (p.querySelector('[slot=header]')?.textContent || '').trim(),"
        " expanded: Boolean(p.expanded) }))"
    )


def close_form(page: Any) -> None:
    """Closed as a person leaves a form they do not want: the dialog's close button (Home
    Assistant's own German "Schließen"), which ends the flow; Escape if that is not there."""
    form = page.locator("dialog-data-entry-flow step-flow-form")
    if not form.is_visible():
        return
    with suppress(Exception):
        page.locator("dialog-data-entry-flow").get_by_role(
            "button", name="Schließen", exact=True
        ).first.click(timeout=5_000)
    with suppress(Exception):
        form.wait_for(state="hidden", timeout=10_000)
    if form.is_visible():
        page.keyboard.press("Escape")
        form.wait_for(state="hidden", timeout=10_000)


def walk_german_agent_form(page: Any, ha: HomeAssistant, docs_shot: Path) -> str:
    """The walk above on `page` (logged in); the form's screenshot goes to `docs_shot`."""
    de, en = subentry_strings(LANGUAGE), subentry_strings("en")
    de_user, en_user = de["step"]["user"], en["step"]["user"]
    button = de["initiate_flow"]["user"]
    standin = standin_entry(page)
    agents_before = agents_of(page, standin["entry_id"])
    with profile_language(page, LANGUAGE):
        try:
            dialog = open_agent_form(page, ha, standin, button)
            step = dialog.locator("step-flow-form").evaluate("form => form.step")
            flow_id = step["flow_id"]
            detail = _check_form(page, dialog, step, standin, de_user, en_user, docs_shot)
        finally:
            close_form(page)
    check(language_of(page) == "en", f"the page speaks {language_of(page)!r} afterwards")
    gone = request(ha.url(f"/api/config/config_entries/subentries/flow/{flow_id}"), token=ha.token)
    check(gone.status == 404, f"the agent flow is still open after closing: {gone.status}")
    agents_after = agents_of(page, standin["entry_id"])
    check(
        agents_after == agents_before,
        f"the entry's agents changed: {agents_before} → {agents_after}",
    )
    return (
        f"{detail}; closed without an agent (flow gone, {len(agents_after)} subentries as "
        "before); profile language back to English"
    )


def _check_form(
    page: Any,
    dialog: Any,
    step: dict[str, Any],
    standin: dict[str, Any],
    de_user: dict[str, Any],
    en_user: dict[str, Any],
    docs_shot: Path,
) -> str:
    check(
        list(step["handler"]) == [standin["entry_id"], SUBENTRY] and step["step_id"] == "user",
        f"not the stand-in entry's agent form: handler {step['handler']}, {step['step_id']}",
    )
    schema = step["data_schema"]
    fields = [item["name"] for item in schema if item.get("type") != "expandable"]
    sections = [item for item in schema if item.get("type") == "expandable"]
    translated = de_user["sections"]
    check(
        sorted(item["name"] for item in sections) == sorted(translated),
        f"the form's sections {[s['name'] for s in sections]} are not de.json's "
        f"{sorted(translated)}",
    )

    # The dialog's title, the common fields' labels and the sections' names, in German.
    shown, every = texts(dialog)
    top = {"title": (de_user["title"], en_user["title"])} | {
        name: (de_user["data"][name], en_user["data"][name]) for name in fields
    }
    check_labels("the form", shown, every, top)
    check(
        de_user["data"]["prompt"] in shown and len(fields) >= 3,
        f"the form shows {fields}",
    )
    names = {
        item["name"]: (translated[item["name"]]["name"], en_user["sections"][item["name"]]["name"])
        for item in sections
    }
    check_labels("the section names", shown, every, names)

    # Every section an expansion panel, in the form's order, closed, its fields hidden.
    panels = section_panels(dialog)
    expected = [names[item["name"]][0] for item in sections]
    check(
        [panel["header"] for panel in panels] == expected,
        f"the panels {[p['header'] for p in panels]} are not the sections {expected}",
    )
    open_ones = [panel["header"] for panel in panels if panel["expanded"]]
    check(not open_ones, f"sections open when the form opens: {open_ones}")
    hidden: dict[str, dict[str, tuple[str, str]]] = {}
    for item in sections:
        name = item["name"]
        hidden[name] = {
            child["name"]: (
                translated[name]["data"][child["name"]],
                en_user["sections"][name]["data"][child["name"]],
            )
            for child in item["schema"]
        }
        visible = sorted(german for german, _ in hidden[name].values() if german in shown)
        check(not visible, f"the closed section {names[name][0]!r} shows {visible}")

    # The picture for the docs: the end of the form, its last fields and every section.
    dialog.locator("ha-expansion-panel").last.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    dialog.locator("dialog").first.screenshot(path=str(docs_shot))

    # Opened one by one, as a person would, each shows its fields in German.
    for index, item in enumerate(sections):
        name = item["name"]
        panel = dialog.locator("ha-expansion-panel").nth(index)
        panel.locator("[slot=header]").first.click()
        deadline = time.monotonic() + OPEN_SECONDS
        while True:
            shown, every = texts(panel)
            german = [label for label, _ in hidden[name].values()]
            if panel.evaluate("p => p.expanded") and all(label in shown for label in german):
                break
            if time.monotonic() > deadline:
                break
            page.wait_for_timeout(200)
        check(bool(panel.evaluate("p => p.expanded")), f"{names[name][0]!r} did not open")
        check_labels(f"the section {names[name][0]!r}", shown, every, hidden[name])
    # Every description's placeholders are filled in, those of fields inside sections too
    # (the form's description placeholders reach them: the web search model's status).
    shown, _every = texts(dialog)
    unfilled = sorted(text for text in shown if re.search(r"\{[a-z_]+\}", text))
    check(not unfilled, f"descriptions with a placeholder left unfilled: {unfilled}")
    section_fields = sum(len(labels) for labels in hidden.values())
    return (
        f"dialog {de_user['title']!r}: {len(fields)} field labels in German (e.g. "
        f"{de_user['data']['prompt']!r}), none in English; {len(sections)} sections as "
        f"panels, all closed at first ({', '.join(expected)}); opened one by one, their "
        f"{section_fields} fields' labels in German"
    )
