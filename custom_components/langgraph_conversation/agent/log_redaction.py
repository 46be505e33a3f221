"""API keys kept out of LiteLLM's log records.

With debug logging on, LiteLLM logs every call's arguments, the API key among them
(`litellm.acompletion(..., api_key='sk-...')`). A filter on its loggers replaces every key
this integration was given before any handler sees the record. Filters run only for
records whose level is enabled, so with debug logging off this costs nothing.
"""

from __future__ import annotations

import logging

REDACTED = "**REDACTED**"
# LiteLLM's loggers (litellm/_logging.py).
LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
# Shorter values are no keys, and replacing them would mangle unrelated text.
_MIN_SECRET_CHARS = 8

_secrets: set[str] = set()


class _RedactSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not _secrets:
            return True
        message = record.getMessage()
        redacted = message
        for secret in _secrets:
            redacted = redacted.replace(secret, REDACTED)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


_FILTER = _RedactSecrets()


def redact_in_logs(secret: str | None) -> None:
    """From now on, `secret` never appears in a LiteLLM log record."""
    if not secret or len(secret) < _MIN_SECRET_CHARS:
        return
    _secrets.add(secret)
    for name in LITELLM_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
