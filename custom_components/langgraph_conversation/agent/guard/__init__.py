"""What keeps a turn safe and clean: the prompt-injection scan, quoting of untrusted
text, secret redaction in logs, the unattended-request safety check, confirmation of
risky effects, and text hygiene (invalid Unicode).

The names here are what code outside this folder may use.
"""

from __future__ import annotations

from ..lazy_face import lazy_face

__getattr__, __dir__, __all__ = lazy_face(
    __name__,
    {
        "confirmation": (
            "CONFIRMATION_TIMEOUT",
            "INTERRUPT_KIND",
            "Decision",
            "EffectGuard",
            "HeldEffects",
            "Released",
            "Requester",
            "current_tool_call",
            "decide",
            "pause_value",
        ),
        "injection": ("Finding", "pattern_ids", "scan_data_async", "scan_name", "scan_text"),
        "quoting": ("flag_note", "quoted", "quoted_flagged", "quoted_json"),
        "redaction": ("PLACEHOLDER", "SECRET_FILTER", "install_redaction", "redact_data"),
        "safety": ("SafetyRating", "rate_unattended_request"),
        "text": ("clean_text", "clean_value", "has_invalid_text", "storable_key"),
    },
)
