"""scripts/develop's layout: Home Assistant sees every component in custom_components/.

scripts/develop links the integration into the development config's custom_components/
and starts Home Assistant from the config directory. Started from the repository instead,
`python -m homeassistant` would put the repository first on sys.path, and the repository's
own custom_components package (tests import the integration through it) would shadow the
config's folder: a second component there would go unseen. Both cases are shown here with
Home Assistant's own loader in a fresh interpreter.
"""

from __future__ import annotations

import json
from pathlib import Path
import re
import subprocess
import sys

from custom_components.langgraph_conversation.const import DOMAIN

ROOT = Path(__file__).resolve().parent.parent
PROBE = "develop_probe"
# What Home Assistant's loader lists as custom integrations of the config directory.
LIST_CUSTOM = """
import asyncio, sys
from homeassistant import loader
from homeassistant.core import HomeAssistant

async def main():
    hass = HomeAssistant(sys.argv[1])
    loader.async_setup(hass)
    print(" ".join(sorted(await loader.async_get_custom_components(hass))))

asyncio.run(main())
"""


def _develop_config(config_dir: Path) -> None:
    """The config directory as scripts/develop lays it out, plus a second component."""
    components = config_dir / "custom_components"
    components.mkdir(parents=True)
    (components / DOMAIN).symlink_to(ROOT / "custom_components" / DOMAIN)
    probe = components / PROBE
    probe.mkdir()
    (probe / "__init__.py").write_text('"""A second component next to ours."""\n')
    (probe / "manifest.json").write_text(
        json.dumps({"domain": PROBE, "name": "Develop probe", "version": "0.0.1"})
    )


def _custom_components_seen(config_dir: Path, cwd: Path) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", LIST_CUSTOM, str(config_dir)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return set(done.stdout.split())


def test_started_from_the_config_directory_both_components_are_found(tmp_path: Path) -> None:
    config_dir = tmp_path / "develop-config"
    _develop_config(config_dir)
    assert _custom_components_seen(config_dir, cwd=config_dir) >= {DOMAIN, PROBE}


def test_started_from_the_repository_the_repository_package_shadows_the_config(
    tmp_path: Path,
) -> None:
    """Why scripts/develop changes directory: from the repository the probe is unseen."""
    config_dir = tmp_path / "develop-config"
    _develop_config(config_dir)
    assert PROBE not in _custom_components_seen(config_dir, cwd=ROOT)


def test_scripts_develop_starts_home_assistant_from_the_config_directory() -> None:
    """The directory change comes before both ways scripts/develop starts Home Assistant."""
    script = (ROOT / "scripts" / "develop").read_text(encoding="utf-8")
    change = re.search(r'^\s*cd "\$config_dir"', script, re.MULTILINE)
    assert change is not None
    for start in ('exec "${hass[@]}"', '"$LGC_REPO/scripts/develop_lib/config.py" check'):
        assert change.start() < script.index(start), start
