"""The migrate_storage action: copy conversations (with their links and answer ratings)
and memories between this machine's SQLite files and the PostgreSQL database chosen in
the options (storage/copy.py copies).

It runs while PostgreSQL is the chosen storage, in either direction: "to PostgreSQL"
brings the files' contents in after switching; "to this machine" copies the database's
contents into the files before switching back. The files are opened for the copy only
(the agents use the database then), and nothing is deleted on either side.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError, ServiceValidationError

from .const import DOMAIN, MEMORY_FILE, MIGRATE_TO_POSTGRES, THREADS_FILE
from .persistence import DATA_STORAGE
from .storage import SQLITE_ERRORS, CopyCounts, SqliteStorage, copy_storage

_LOGGER = logging.getLogger(__name__)


async def async_migrate(hass: HomeAssistant, direction: str) -> dict[str, Any]:
    """Copy everything one way; the counts of what was copied and what was there."""
    shared = hass.data.get(DATA_STORAGE)
    if shared is None or not shared.settings.postgres_url:
        raise ServiceValidationError(
            translation_domain=DOMAIN, translation_key="postgres_not_chosen"
        )
    database = shared.backend
    if database is None:
        # PostgreSQL is chosen (above), so an open backend is the database.
        raise HomeAssistantError(translation_domain=DOMAIN, translation_key="postgres_not_open")
    folder = Path(hass.config.path(DOMAIN))
    if direction == MIGRATE_TO_POSTGRES and not await hass.async_add_executor_job(
        lambda: (folder / THREADS_FILE).is_file() or (folder / MEMORY_FILE).is_file()
    ):
        raise ServiceValidationError(translation_domain=DOMAIN, translation_key="no_files_to_copy")
    await hass.async_add_executor_job(lambda: folder.mkdir(parents=True, exist_ok=True))
    counts = CopyCounts()
    try:
        files = await SqliteStorage.open(folder / THREADS_FILE, folder / MEMORY_FILE)
        try:
            if direction == MIGRATE_TO_POSTGRES:
                files.keep_reads_untouched()
                await copy_storage(files, database, counts)
            else:
                await copy_storage(database, files, counts)
        finally:
            await files.aclose()
    except (OSError, *SQLITE_ERRORS, *database.errors) as err:
        # What was copied stays; running the action again goes on from there.
        _LOGGER.error("Storage copy %s stopped: %s (so far: %s)", direction, err, counts)
        raise HomeAssistantError(
            translation_domain=DOMAIN,
            translation_key="migration_failed",
            translation_placeholders={"error": str(err)},
        ) from err
    response = {"direction": direction, **counts.as_response()}
    _LOGGER.info("Storage copied %s: %s", direction, response)
    return response
