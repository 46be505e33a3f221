"""The import-time version check every workaround here makes.

A workaround reaches into one library's private parts as they are in one exact release.
`matches` compares the installed release with the ones it was checked on and, when they
differ, logs one line naming the library, both versions and what happens instead.
"""

from __future__ import annotations

from collections.abc import Collection
import functools
from importlib import metadata
import logging

_LOGGER = logging.getLogger(__name__)


@functools.cache  # each lookup scans the installed distributions (~6 ms)
def installed(distribution: str) -> str:
    """The installed version of a distribution, from its package metadata."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def matches(
    distribution: str,
    checked: Collection[str],
    workaround: str,
    instead: str,
    *,
    version: str | None = None,
) -> bool:
    """Whether the installed (or given) version is one `workaround` was checked on.

    Otherwise logs, once per call: "<distribution> <version> is installed; <workaround> was
    written for <checked> and stays off: <instead>".
    """
    version = installed(distribution) if version is None else version
    if version in checked:
        return True
    _LOGGER.warning(
        "%s %s is installed; %s was written for %s and stays off: %s",
        distribution,
        version,
        workaround,
        " / ".join(sorted(checked)),
        instead,
    )
    return False
