"""Brand images: drawn by scripts/brand, shipped in brand/, served by Home Assistant.

The shipped files must be exactly what the script makes (so nobody edits a PNG by hand and
loses the source), in the sizes and form Home Assistant's brands rules ask for, and Home
Assistant (2026.3 and later) must serve them for our domain at /api/brands/integration/.
"""

from __future__ import annotations

from http import HTTPStatus
from pathlib import Path

from awesomeversion import AwesomeVersion
from PIL import Image
import pytest

from custom_components.langgraph_conversation.const import DOMAIN
from homeassistant.const import __version__ as HA_VERSION
from homeassistant.core import HomeAssistant
from homeassistant.setup import async_setup_component
from scripts.brand_lib import draw

ROOT = Path(__file__).resolve().parent.parent
BRAND = ROOT / "custom_components" / DOMAIN / "brand"
NAMES = [
    f"{theme}{kind}{scale}.png"
    for theme in ("", "dark_")
    for kind in ("icon", "logo")
    for scale in ("", "@2x")
]
# Home Assistant serves custom integrations' brand/ folders from this release on.
SERVES_CUSTOM_BRANDS = AwesomeVersion(HA_VERSION) >= AwesomeVersion("2026.3.0")


@pytest.fixture(scope="module")
def generated() -> dict[str, bytes]:
    return draw.images()


def test_the_shipped_images_are_what_the_script_makes(generated: dict[str, bytes]) -> None:
    """Byte for byte: the script is the source, brand/ holds its output and nothing else."""
    assert sorted(generated) == sorted(NAMES)
    assert sorted(p.name for p in BRAND.iterdir()) == sorted(NAMES)
    for name in NAMES:
        assert (BRAND / name).read_bytes() == generated[name], (
            f"brand/{name} differs from what scripts/brand draws; run it"
        )


@pytest.mark.parametrize("name", NAMES)
def test_sizes_and_form_follow_the_brands_rules(name: str) -> None:
    """PNG, RGBA, transparent background, trimmed; icon square, logo's short side 128/256."""
    image = Image.open(BRAND / name)
    image.load()
    assert image.format == "PNG"
    assert image.mode == "RGBA"
    width, height = image.size
    double = "@2x" in name
    if "icon" in name:
        assert (width, height) == ((512, 512) if double else (256, 256))
    else:
        assert min(width, height) == (256 if double else 128)
        assert width > height, "the logo is the mark beside the words"
    alpha = image.getchannel("A")
    # Transparent background: the rounded corner of the bubble leaves the top-left clear.
    assert alpha.getpixel((0, 0)) == 0
    # Trimmed: the drawing reaches every edge (no empty margin rows or columns).
    assert alpha.getbbox() == (0, 0, width, height)
    # The dark variants differ from the light ones (they exist for dark themes).
    if name.startswith("dark_"):
        light = Image.open(BRAND / name.removeprefix("dark_"))
        assert light.size == image.size
        assert light.tobytes() != image.tobytes()


@pytest.mark.skipif(
    not SERVES_CUSTOM_BRANDS, reason=f"Home Assistant {HA_VERSION} serves no custom brands"
)
@pytest.mark.parametrize("name", ["icon.png", "dark_logo@2x.png"])
async def test_home_assistant_serves_the_brand_images(
    hass: HomeAssistant, hass_client, name: str
) -> None:
    """Through the brands view a browser asks (the frontend's image URL for our domain)."""
    assert await async_setup_component(hass, "brands", {})
    client = await hass_client()
    response = await client.get(f"/api/brands/integration/{DOMAIN}/{name}?placeholder=no")
    assert response.status == HTTPStatus.OK
    assert response.content_type == "image/png"
    assert await response.read() == (BRAND / name).read_bytes()
