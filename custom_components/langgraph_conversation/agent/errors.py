"""The exceptions every layer of the agent shares: a model call's, a tool's, a turn's."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ModelErrorKind(StrEnum):
    """What went wrong with a model call, in terms a user can act on."""

    AUTH = "auth"
    # No key given, and the provider needs one: LiteLLM refused before sending anything.
    MISSING_KEY = "missing_key"
    MODEL_NOT_FOUND = "model_not_found"
    RATE_LIMIT = "rate_limit"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    SERVER = "server"
    BAD_REQUEST = "bad_request"
    # The request does not fit the model's context window (a 400 of its own kind).
    CONTEXT_WINDOW = "context_window"
    UNKNOWN = "unknown"


class ModelError(Exception):
    """A model call failed; `kind` says how, `detail` is safe to log (no secrets)."""

    def __init__(self, kind: ModelErrorKind, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class ToolFailure(Exception):
    """Raised by a tool to hand the model a structured error instead of a result."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data.get("error_text") or data.get("error") or "tool failed")
        self.data = data


class TurnError(Exception):
    """A turn could not finish. `kind` is a ModelErrorKind value or "tool_rounds"."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail
