"""Driving Home Assistant's frontend in Chromium: the login page and the Assist dialog.

Home Assistant's frontend is made of web components with open shadow roots; Playwright's
CSS selectors pierce them, so the selectors below name the components as they appear in
the page: `ha-assist-chat` (the chat of the Assist dialog), its `.message.user` and
`.message.hass` bubbles, and `ha-markdown-element`, which holds an answer's text.
"""

from __future__ import annotations

from contextlib import contextmanager
import re
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from playwright.sync_api import (
    Browser,
    Page,
    TimeoutError as PlaywrightTimeoutError,
    sync_playwright,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 1000}
# A phone: the Assist dialog fills the screen, so a whole short conversation is in view.
PHONE = {"viewport": {"width": 430, "height": 932}, "device_scale_factor": 2}
ANSWER_TIMEOUT = 45.0  # seconds for one answer, tool calls included
# An answer counts as complete once its text has not changed for this long (it streams).
SETTLED = 1.0


class BrowserError(Exception):
    """The page did not do what a person would see it do."""


@contextmanager
def chromium(marker: str) -> Iterator[Browser]:
    """Debian's Chromium, headless, through Playwright; closed on the way out.

    `marker` is an extra, ignored switch on Chromium's command line, so that scripts/e2e
    can find this run's browser processes if this process dies without closing them.
    """
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, f"--{marker}"]
        )
        try:
            yield browser
        finally:
            browser.close()


# How long a click on "Log in" may go unanswered before the person clicks again.
_LOGIN_CLICK_WAIT_MS = 8_000


def _past_login(url: str) -> bool:
    """Whether the frontend has left the login page and its redirect for a dashboard."""
    return urlsplit(url).path not in ("", "/") and "/auth/" not in url


def log_in(page: Page, base_url: str, username: str, password: str) -> None:
    """Through Home Assistant's login page, like a person; ends on the overview.

    URLs are awaited until they are committed, not until the page's "load" event: that
    event waits for every resource, and the elements awaited next say when the page can
    be used.
    """
    page.goto(f"{base_url}/")
    page.wait_for_url(re.compile(r"/auth/authorize"), timeout=30_000, wait_until="commit")
    page.locator("input[name=username]").fill(username)
    page.locator("input[name=password]").fill(password)
    log_in_button = page.get_by_role("button", name="Log in")
    log_in_button.click()
    # The frontend takes the auth code from the redirect (/?auth_callback=1), then goes to
    # "/" and on to the default dashboard; a dialog opened before that would close again.
    # A click the login form did not take (seen once in a fresh-clone run: the form still
    # filled in, 30 s later) is made again, as a person would.
    deadline = time.monotonic() + 40
    while True:
        try:
            page.wait_for_url(_past_login, timeout=_LOGIN_CLICK_WAIT_MS, wait_until="commit")
            break
        except PlaywrightTimeoutError:
            if time.monotonic() > deadline:
                raise
            if "/auth/authorize" in page.url and log_in_button.is_visible():
                log_in_button.click()
    page.locator("home-assistant-main").wait_for(timeout=30_000)
    page.wait_for_load_state("networkidle")


class AssistDialog:
    """The Assist dialog's chat: one conversation as long as the dialog stays open."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.chat = page.locator("ha-assist-chat")
        self.input = self.chat.locator("#message-input input")

    def open(self, *, shortcut: bool = False) -> None:
        """With the Assist button of the top bar, or with its keyboard shortcut "a"."""
        if shortcut:
            # The shortcut works once the panel has finished loading; until then, press again.
            deadline = time.monotonic() + 30
            while True:
                self.page.locator("body").press("a")
                try:
                    self.input.wait_for(timeout=1_500)
                    return
                except PlaywrightTimeoutError:
                    if time.monotonic() > deadline:
                        raise
        else:
            self.page.get_by_role("button", name=re.compile(r"^Assist")).click(timeout=15_000)
        self.input.wait_for(timeout=15_000)

    def _answers(self) -> list[str]:
        return [
            " ".join(text.split())
            for text in self.chat.locator(".message.hass").evaluate_all(
                "bubbles => bubbles.map(b => {"
                " const md = b.querySelector('ha-markdown');"
                " const el = md && md.shadowRoot && md.shadowRoot.querySelector("
                "   'ha-markdown-element');"
                " return el ? el.innerText : ''; })"
            )
        ]

    def ask(self, text: str, timeout: float = ANSWER_TIMEOUT) -> str:
        """Type a request, send it, and return the answer once it has finished streaming."""
        before = len(self._answers())
        asked = self.chat.locator(".message.user").count()
        self.input.fill(text)
        self.input.press("Enter")
        self.chat.locator(".message.user").nth(asked).wait_for(timeout=10_000)
        deadline = time.monotonic() + timeout
        seen, since = "", time.monotonic()
        while time.monotonic() < deadline:
            answers = self._answers()
            current = answers[-1] if len(answers) > before else ""
            if current.strip("…. ") == "":  # the frontend's placeholder while it waits
                current = ""
            if current != seen:
                seen, since = current, time.monotonic()
            elif current and time.monotonic() - since >= SETTLED:
                return current
            time.sleep(0.1)
        raise BrowserError(f"no complete answer to {text!r} within {timeout:.0f}s (saw {seen!r})")

    def scroll_to_latest(self) -> None:
        """Show the latest messages (the dialog may keep the first ones in view)."""
        messages = self.chat.locator(".messages")
        if messages.count():
            messages.evaluate("el => { el.scrollTop = el.scrollHeight; }")


def call_ws(page: Page, message: dict) -> object:
    """A websocket command through the logged-in frontend's own connection."""
    return page.evaluate(
        "message => document.querySelector('home-assistant').hass.callWS(message)", message
    )
