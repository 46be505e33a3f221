"""Lets pytest-homeassistant-custom-component load on a Home Assistant it does not pin yet.

Loaded only on a leg whose requirement file names a core newer than the plugin's
("# lgc-core:", see scripts/lib/leg_venv.sh): scripts/lib/run_leg.sh passes
`-p tests.compat_newest`, which pytest imports before the plugins it finds installed.
Each shim names the upstream change it bridges; remove each once a plugin release for
that Home Assistant exists (and this module with the last of them).
"""

from __future__ import annotations

# Shim 1 (Home Assistant 2026.11: `homeassistant/__init__.py` aliases httpx to httpx2 at
# import and refuses to start if httpx was imported before it). The plugin 0.13.375
# imports respx, hence httpx, before homeassistant; importing homeassistant first makes
# respx get the alias. Remove once a plugin release for 2026.11 exists.
import homeassistant  # noqa: F401  (the import is the shim)

# Shim 2 (Home Assistant 2026.11 moved `_clear_logger_overwrites` to
# `homeassistant.components.logger.helpers` and no longer re-exports it from the package;
# the plugin's common.py imports it from `homeassistant.components.logger`). Remove once a
# plugin release for 2026.11 exists.
from homeassistant.components import logger as _logger
from homeassistant.components.logger import helpers as _logger_helpers

if not hasattr(_logger, "_clear_logger_overwrites"):
    _logger._clear_logger_overwrites = _logger_helpers._clear_logger_overwrites
