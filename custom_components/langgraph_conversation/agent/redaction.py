"""Keeping API keys out of LiteLLM's own log lines.

At DEBUG level LiteLLM logs every call with all its arguments, the API key included
(`litellm.acompletion(..., api_key='sk-...')`). Home Assistant users turn on debug
logging to report problems and paste the log into public issues, so a key must never be
in it. A filter on LiteLLM's loggers replaces every key this process was given with a
placeholder before any handler sees the line. It only costs anything when DEBUG (or the
level of the line) is enabled, since loggers run filters after the level check.
"""

from __future__ import annotations

import logging
import threading

PLACEHOLDER = "**REDACTED**"
# LiteLLM's loggers (its SDK, router and proxy parts log under these exact names).
LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
# Shorter strings are no keys, and replacing them would mangle ordinary words.
_MIN_SECRET_LENGTH = 8


class SecretRedactingFilter(logging.Filter):
    """Replaces known secrets in a record's message (and drops its now-merged args)."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def add(self, secret: str | None) -> None:
        """Redact `secret` from now on (keys typed into a setup form included)."""
        if secret and len(secret) >= _MIN_SECRET_LENGTH:
            with self._lock:
                self._secrets = self._secrets | {secret}

    def redact(self, text: str) -> str:
        """`text` with every known secret replaced."""
        for secret in self._secrets:
            text = text.replace(secret, PLACEHOLDER)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record in place if it holds a secret; never drop it."""
        secrets = self._secrets
        if not secrets:
            return True
        message = record.getMessage()
        if any(secret in message for secret in secrets):
            record.msg = self.redact(message)
            record.args = None
        return True


SECRET_FILTER = SecretRedactingFilter()


def install() -> None:
    """Attach the filter to LiteLLM's loggers (idempotent)."""
    for name in LITELLM_LOGGERS:
        logger = logging.getLogger(name)
        if SECRET_FILTER not in logger.filters:
            logger.addFilter(SECRET_FILTER)
