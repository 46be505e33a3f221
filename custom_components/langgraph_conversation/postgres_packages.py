"""PostgreSQL's packages, installed by Home Assistant when a user chooses PostgreSQL.

They are not in the manifest, so the default SQLite path installs nothing more. Home
Assistant's requirements helper installs them (under its own constraints) the first time
they are needed and remembers they are there; offline, once installed, nothing is fetched.
storage/postgres/ is imported only after that, in the executor (importing psycopg reads
files and loads libpq).

Home Assistant started with --skip-pip installs nothing for integrations, but its
`async_process_requirements` does not look at that switch (only the loading of an
integration's manifest requirements does): called anyway, it would install. So under
skip_pip the packages are only looked for, and when they are missing the user is told
that Home Assistant was asked not to install them, which a generic install failure would
hide. A package named in skip_pip_packages is left out by Home Assistant in the same way.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from homeassistant.core import HomeAssistant
from homeassistant.requirements import RequirementsNotFound, async_process_requirements
from homeassistant.util import package as pkg_util

from .const import DOMAIN, POSTGRES_REQUIREMENTS

_MODULE = f"{__package__}.storage.postgres"


class PostgresNotInstalled(Exception):
    """Home Assistant could not install PostgreSQL's packages."""

    # The repair issue's problem (persistence.py).
    problem = "not_installed"


class PostgresInstallSkipped(PostgresNotInstalled):
    """The packages are missing and Home Assistant was told not to install packages."""

    problem = "install_skipped"


def _missing_skipped(skip_all: bool, skip_names: list[str]) -> list[str]:
    """The requirements Home Assistant is told not to install that are not installed
    (reads package metadata: run it in the executor)."""
    skipped = [
        requirement
        for requirement in POSTGRES_REQUIREMENTS
        if skip_all
        or (
            (parsed := pkg_util.parse_requirement_safe(requirement)) is not None
            and parsed.name in skip_names
        )
    ]
    return [requirement for requirement in skipped if not pkg_util.is_installed(requirement)]


async def async_load_postgres(hass: HomeAssistant) -> ModuleType:
    """storage/postgres/, its packages installed first if they are missing."""
    skip_all = hass.config.skip_pip
    if missing := await hass.async_add_executor_job(
        _missing_skipped, skip_all, list(hass.config.skip_pip_packages)
    ):
        raise PostgresInstallSkipped(
            "Home Assistant runs with "
            + ("--skip-pip" if skip_all else "skip_pip_packages naming them")
            + f", so it does not install {', '.join(missing)}"
        )
    if not skip_all:
        try:
            await async_process_requirements(hass, DOMAIN, POSTGRES_REQUIREMENTS, is_built_in=False)
        except RequirementsNotFound as err:
            raise PostgresNotInstalled(str(err)) from err
    return await hass.async_add_import_executor_job(importlib.import_module, _MODULE)
