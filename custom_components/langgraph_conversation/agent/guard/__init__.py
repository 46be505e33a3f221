"""What keeps a turn safe and clean: the prompt-injection scan, quoting of untrusted
text, secret redaction in logs, the unattended-request safety check, confirmation of
risky effects, and text hygiene (invalid Unicode).

The names here are what code outside this folder may use.
"""

from __future__ import annotations

from .confirmation import (
    CONFIRMATION_TIMEOUT,
    INTERRUPT_KIND,
    Decision,
    EffectGuard,
    HeldEffects,
    Released,
    Requester,
    current_tool_call,
    decide,
    pause_value,
)
from .injection import Finding, pattern_ids, scan_data_async, scan_name, scan_text
from .quoting import flag_note, quoted, quoted_flagged, quoted_json
from .redaction import PLACEHOLDER, SECRET_FILTER, install_redaction, redact_data
from .safety import SafetyRating, rate_unattended_request
from .text import clean_text, clean_value, has_invalid_text, storable_key

__all__ = [
    "CONFIRMATION_TIMEOUT",
    "INTERRUPT_KIND",
    "PLACEHOLDER",
    "SECRET_FILTER",
    "Decision",
    "EffectGuard",
    "Finding",
    "HeldEffects",
    "Released",
    "Requester",
    "SafetyRating",
    "clean_text",
    "clean_value",
    "current_tool_call",
    "decide",
    "flag_note",
    "has_invalid_text",
    "install_redaction",
    "pattern_ids",
    "pause_value",
    "quoted",
    "quoted_flagged",
    "quoted_json",
    "rate_unattended_request",
    "redact_data",
    "scan_data_async",
    "scan_name",
    "scan_text",
    "storable_key",
]
