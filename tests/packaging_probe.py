"""Run inside a bare install (Home Assistant plus the manifest's requirements, nothing else).

    python tests/packaging_probe.py CONFIG_DIR API_BASE PORT

Used by tests/test_install.py: it starts a real Home Assistant core on CONFIG_DIR (HTTP on
127.0.0.1:PORT), sets the integration up with an entry for the scripted stand-in model at
API_BASE, lets Home Assistant install what the integrations it loads need (as it does for
a user: its own installer, its constraints), has one conversation turn, and then imports
every module of the integration. Prints one JSON line: {"modules": [...], "speech": "..."}.
This file runs without pytest and without the test tools; it imports only what a user's
installation has.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
from pathlib import Path
import pkgutil
import sys

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, its own folder (tests/) heads sys.path; nothing there may be imported.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "tests"]
DOMAIN = "langgraph_conversation"


# Modules whose packages Home Assistant installs only when the user chooses what needs
# them (PostgreSQL, const.POSTGRES_REQUIREMENTS): a bare install does not have them.
ON_DEMAND = {
    f"custom_components.{DOMAIN}.storage.postgres{name}" for name in ("", ".backend", ".house")
}


def import_every_module() -> list[str]:
    """Every module of the package, imported as Home Assistant would (by its full name);
    the on-demand ones only where their packages are installed."""
    package = importlib.import_module(f"custom_components.{DOMAIN}")
    names = [package.__name__]
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
        if info.name in ON_DEMAND and importlib.util.find_spec("psycopg") is None:
            continue
        importlib.import_module(info.name)
        names.append(info.name)
    return names


async def one_turn(config_dir: Path, api_base: str, port: int) -> str:
    from homeassistant import bootstrap, config_entries, core_config, loader
    from homeassistant.core import Context, HomeAssistant
    from homeassistant.helpers import entity_registry as er
    from homeassistant.setup import async_setup_component

    # scripts/, not the repository root: the integration must come from the config directory.
    sys.path.insert(0, str(ROOT / "scripts"))
    from develop_lib import config as develop_config

    subentry_id = develop_config.seed_offline_entry(config_dir, api_base)
    hass = HomeAssistant(str(config_dir))
    hass.config.skip_pip = False  # Home Assistant installs what its integrations need
    loader.async_setup(hass)
    hass.config_entries = config_entries.ConfigEntries(hass, {})
    try:
        # What bootstrap does before any integration: registries, the core integrations,
        # core settings (and auth).
        await loader.async_get_custom_components(hass)
        # None on 2026.2; a bool, False when a store is too new, from 2026.3 on.
        assert await bootstrap.async_load_base_functionality(hass) is not False
        for domain in bootstrap.CORE_INTEGRATIONS:
            assert await async_setup_component(hass, domain, {}), domain
        await core_config.async_process_ha_core_config(hass, {"time_zone": "UTC"})
        http = {"server_host": ["127.0.0.1"], "server_port": port}
        assert await async_setup_component(hass, "http", {"http": http})
        assert await async_setup_component(hass, DOMAIN, {})
        await hass.async_block_till_done()
        entity_id = next(
            e.entity_id
            for e in er.async_get(hass).entities.values()
            if e.platform == DOMAIN and e.config_subentry_id == subentry_id
        )
        # Imported once set up: it needs hassil, which Home Assistant has just installed.
        from homeassistant.components import conversation

        result = await conversation.async_converse(
            hass, "Tell me a joke", None, Context(), language="en", agent_id=entity_id
        )
        return str(result.response.speech["plain"]["speech"])
    finally:
        await hass.async_stop()


def main() -> None:
    config_dir, api_base, port = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    # The integration as Home Assistant finds it: custom_components/ of the config directory.
    (config_dir / "custom_components").mkdir(parents=True, exist_ok=True)
    link = config_dir / "custom_components" / DOMAIN
    if not link.exists():
        link.symlink_to(ROOT / "custom_components" / DOMAIN)
    sys.path.insert(0, str(config_dir))
    # The turn first: Home Assistant installs the requirements of the integrations ours
    # depends on (conversation's hassil, say) before it imports ours, as it does for a user.
    speech = asyncio.run(one_turn(config_dir, api_base, port))
    modules = import_every_module()
    print(json.dumps({"modules": modules, "speech": speech}))


if __name__ == "__main__":
    main()
