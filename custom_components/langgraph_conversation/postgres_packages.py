"""PostgreSQL's packages, installed by Home Assistant when a user chooses PostgreSQL.

They are not in the manifest, so the default SQLite path installs nothing more. Home
Assistant's requirements helper installs them (under its own constraints) the first time
they are needed and remembers they are there; offline, once installed, nothing is fetched.
storage/postgres.py is imported only after that, in the executor (importing psycopg reads
files and loads libpq).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from homeassistant.core import HomeAssistant
from homeassistant.requirements import RequirementsNotFound, async_process_requirements

from .const import DOMAIN, POSTGRES_REQUIREMENTS

_MODULE = f"{__package__}.storage.postgres"


class PostgresNotInstalled(Exception):
    """Home Assistant could not install PostgreSQL's packages."""


async def async_load_postgres(hass: HomeAssistant) -> ModuleType:
    """storage/postgres.py, its packages installed first if they are missing."""
    try:
        await async_process_requirements(hass, DOMAIN, POSTGRES_REQUIREMENTS, is_built_in=False)
    except RequirementsNotFound as err:
        raise PostgresNotInstalled(str(err)) from err
    return await hass.async_add_import_executor_job(importlib.import_module, _MODULE)
