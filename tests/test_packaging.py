"""Packaging: manifest and hacs.json as hassfest and HACS check them, and installability.

The resolution test asks the package registry (pip's default index, through the
machine's own pip configuration) whether Home Assistant could install our requirements
under its own pins, for glibc and musl (Home Assistant OS and Container) wheels.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
import json
import os
from pathlib import Path
import re
import subprocess
import sys

from awesomeversion import AwesomeVersion
import pytest

from custom_components.langgraph_conversation.const import POSTGRES_REQUIREMENTS
import homeassistant

ROOT = Path(__file__).resolve().parent.parent
INTEGRATION = ROOT / "custom_components" / "langgraph_conversation"
MANIFEST = json.loads((INTEGRATION / "manifest.json").read_text())
HA_CONSTRAINTS = Path(homeassistant.__file__).parent / "package_constraints.txt"

# hassfest's manifest schema for custom integrations: these keys and no others.
ALLOWED_KEYS = {
    "domain",
    "name",
    "after_dependencies",
    "codeowners",
    "config_flow",
    "dependencies",
    "documentation",
    "import_executor",
    "integration_type",
    "iot_class",
    "issue_tracker",
    "loggers",
    "requirements",
    "single_config_entry",
    "version",
    "bluetooth",
    "dhcp",
    "homekit",
    "mqtt",
    "ssdp",
    "usb",
    "zeroconf",
}
IOT_CLASSES = {
    "assumed_state",
    "calculated",
    "cloud_polling",
    "cloud_push",
    "local_polling",
    "local_push",
}
COMPROMISED_LITELLM = re.compile(r"^(1\.82\.7|1\.82\.8|1\.107\.\d+)$")
PLATFORMS = {
    "manylinux x86_64": ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"],
    "manylinux aarch64": [
        "manylinux_2_28_aarch64",
        "manylinux_2_17_aarch64",
        "manylinux2014_aarch64",
    ],
    "musllinux x86_64": ["musllinux_1_2_x86_64", "musllinux_1_1_x86_64"],
    "musllinux aarch64": ["musllinux_1_2_aarch64", "musllinux_1_1_aarch64"],
}


def test_manifest_is_valid_for_hassfest() -> None:
    """Keys, order, required fields and values as hassfest demands for custom integrations."""
    keys = list(MANIFEST)
    assert keys[:2] == ["domain", "name"]
    assert keys[2:] == sorted(keys[2:]), "hassfest wants the keys after domain and name sorted"
    assert set(keys) <= ALLOWED_KEYS, set(keys) - ALLOWED_KEYS
    assert MANIFEST["domain"] == INTEGRATION.name
    for required in ("codeowners", "documentation", "issue_tracker", "iot_class", "version"):
        assert MANIFEST.get(required), required
    assert MANIFEST["iot_class"] in IOT_CLASSES
    assert MANIFEST["documentation"].startswith("https://")
    assert "home-assistant.io/integrations" not in MANIFEST["documentation"]
    assert AwesomeVersion(MANIFEST["version"]).valid
    assert all(owner.startswith("@") for owner in MANIFEST["codeowners"])
    assert MANIFEST["config_flow"] is True
    # Exact pins where a range could admit a compromised release.
    assert "litellm==1.83.0" in MANIFEST["requirements"]
    # SQLite is the standard library's: no SQLite package (langgraph-checkpoint-sqlite
    # needs sqlite-vec, which does not install on Home Assistant OS).
    assert not any("sqlite" in req for req in MANIFEST["requirements"])
    # PostgreSQL's packages are installed on demand (const.POSTGRES_REQUIREMENTS), never
    # for everyone.
    assert not any(
        req.startswith(("psycopg", "langgraph-checkpoint-postgres"))
        for req in MANIFEST["requirements"]
    )


def test_hacs_json_is_valid() -> None:
    """hacs.json holds only keys HACS knows, with a name and a minimum HA version."""
    hacs = json.loads((ROOT / "hacs.json").read_text())
    assert set(hacs) <= {
        "name",
        "homeassistant",
        "render_readme",
        "zip_release",
        "filename",
        "hide_default_branch",
        "content_in_root",
        "country",
        "hacs",
        "persistent_directory",
    }
    assert hacs["name"]
    assert AwesomeVersion(hacs["homeassistant"]) <= AwesomeVersion("2026.2.0")
    # HACS's brands check accepts the integration's own brand/icon.png (served by Home
    # Assistant 2026.3+) in place of an entry in Home Assistant's brands repository.
    assert (INTEGRATION / "brand" / "icon.png").is_file()


def test_translations_match_strings() -> None:
    """Runtime reads translations/en.json only; it must equal strings.json, no references."""
    strings = (INTEGRATION / "strings.json").read_text()
    english = (INTEGRATION / "translations" / "en.json").read_text()
    assert json.loads(strings) == json.loads(english)
    assert "[%key:" not in english


def _resolve(platforms: list[str], requirements: list[str]) -> dict:
    python_version = "".join(str(part) for part in sys.version_info[:2])
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--quiet",
        "--report",
        "-",
        "--ignore-installed",
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        python_version,
        "--constraint",
        str(HA_CONSTRAINTS),
        "--disable-pip-version-check",
    ]
    for platform in platforms:
        command += ["--platform", platform]
    env = {**os.environ, "PIP_NO_INPUT": "1"}
    done = subprocess.run(
        command + requirements, capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, f"{platforms[0]} {requirements}:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)


@pytest.mark.registry
def test_requirements_resolve_under_home_assistant_pins() -> None:
    """Every manifest requirement installs under this HA's constraints, glibc and musl."""
    requirements = MANIFEST["requirements"]
    jobs = [(platforms, requirements) for platforms in PLATFORMS.values()]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        reports = list(pool.map(lambda job: _resolve(*job), jobs))
    for report in reports:
        resolved = {
            item["metadata"]["name"].lower(): item["metadata"]["version"]
            for item in report["install"]
        }
        assert "sqlite-vec" not in resolved
        assert "langgraph-checkpoint-sqlite" not in resolved
        assert resolved["litellm"] == "1.83.0"
        assert not COMPROMISED_LITELLM.match(resolved["litellm"])
        for requirement in requirements:
            name = re.split(r"[<>=!~ ]", requirement, maxsplit=1)[0].lower()
            assert name in resolved, f"{name} missing from the resolution"


@pytest.mark.registry
def test_postgres_requirements_resolve_with_the_manifest() -> None:
    """The on-demand PostgreSQL packages install beside the manifest's, glibc and musl."""
    requirements = MANIFEST["requirements"] + POSTGRES_REQUIREMENTS
    jobs = [(platforms, requirements) for platforms in PLATFORMS.values()]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        reports = list(pool.map(lambda job: _resolve(*job), jobs))
    for report in reports:
        resolved = {
            item["metadata"]["name"].lower(): item["metadata"]["version"]
            for item in report["install"]
        }
        assert resolved["langgraph-checkpoint-postgres"] == "3.2.0"
        assert resolved["psycopg"] == "3.3.9"
        assert resolved["psycopg-binary"] == "3.3.9"
        assert "psycopg-pool" in resolved
        # The manifest's pins hold with the PostgreSQL packages beside them.
        assert resolved["langgraph"] == "1.2.24"
        assert resolved["litellm"] == "1.83.0"
