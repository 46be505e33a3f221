"""The brand icon in the browser: where Home Assistant serves it, whether an <img> of the
page shows it, and what the browser fetched and logged for it.

Home Assistant 2026.3+ serves custom_components/<domain>/brand/ itself (its brands view);
older releases ask the brands CDN, which knows nothing of this integration.
"""

from __future__ import annotations

from pathlib import Path
import time
from typing import Any

DOMAIN = "langgraph_conversation"
BRAND_ICON = (
    Path(__file__).resolve().parents[2] / "custom_components" / DOMAIN / "brand" / "icon.png"
)
BRAND_PATH = f"/api/brands/integration/{DOMAIN}/"
# Any integration's brand images, for telling ours from the rest.
BRANDS_PATH = "/api/brands/"
SERVES_CUSTOM_BRANDS = (2026, 3)

# Every <img> below an element (its shadow root included, and every shadow root under
# it) whose address holds the fragment.
_BRAND_IMAGES_JS = """(root, fragment) => {
  const found = [];
  const walk = node => {
    if (node.shadowRoot) walk(node.shadowRoot);
    for (const el of node.querySelectorAll('*')) {
      if (el.tagName === 'IMG' && el.src.includes(fragment)) {
        found.push({src: el.src, alt: el.alt, complete: el.complete, width: el.naturalWidth});
      }
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(root);
  return found;
}"""


def serves_custom_brands(version: str) -> bool:
    year, month = (int(part) for part in version.split(".")[:2])
    return (year, month) >= SERVES_CUSTOM_BRANDS


def brand_images(root: Any) -> list[dict[str, Any]]:
    """Our brand <img> elements under the element of the locator `root`."""
    return list(root.evaluate(_BRAND_IMAGES_JS, BRAND_PATH))


def loaded_brand_images(
    root: Any, at_least: int = 1, timeout: float = 30
) -> tuple[list[dict], list[dict]]:
    """(loaded, all) of our brand images under `root`, once `at_least` have loaded or at
    the timeout: an image counts as loaded when the browser decoded it (naturalWidth > 0);
    a broken one shows its alt text instead and has no natural width."""
    deadline = time.monotonic() + timeout
    while True:
        images = brand_images(root)
        loaded = [i for i in images if i["complete"] and i["width"] > 0]
        if len(loaded) >= at_least or time.monotonic() > deadline:
            return loaded, images
        root.page.wait_for_timeout(250)


class BrandTraffic:
    """What a page fetched and logged for brand images while it is watched."""

    def __init__(self, page: Any) -> None:
        self.ours: list[tuple[int, str]] = []  # (status, address) of our brand images
        self.others_failed: set[str] = set()  # addresses of other integrations' that failed
        self.console_errors: list[str] = []  # console errors that name our brand path
        page.on("response", self._response)
        page.on("console", self._console)

    def _response(self, response: Any) -> None:
        if BRAND_PATH in response.url:
            self.ours.append((response.status, response.url.split("?")[0]))
        elif BRANDS_PATH in response.url and response.status >= 400:
            self.others_failed.add(response.url.split("?")[0])

    def _console(self, message: Any) -> None:
        where = (message.location or {}).get("url", "")
        if message.type == "error" and BRAND_PATH in f"{message.text} {where}":
            self.console_errors.append(f"{message.text} ({where.split('?')[0]})")
