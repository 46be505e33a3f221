"""Model roles: which model does what for an agent, and when the fallback takes over.

An agent has a `main` model (the entry's), optionally a `fast` one for housekeeping
(summaries of long threads, query rewriting, memory extraction), optionally a
`fallback` that answers when the main model fails with an error that may pass on
another provider (rate limit, server error, dropped connection, timeout), and
optionally a `vision` model that looks at camera images (vision.py).

Key reuse rule: a role that names no key of its own borrows the entry's key (and base
URL) only when it speaks to the same place, that is the same LiteLLM provider prefix
and no base URL of its own or the entry's base URL. Anything else gets no key from the
entry, so a key never travels to a provider or server it was not given for (LiteLLM may
still read the provider's usual environment variable).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from langchain_core.language_models import BaseChatModel

from ..errors import ModelErrorKind
from .access import ModelAccess, ModelSettings
from .chat import build_chat_model
from .error_kinds import classify_error, is_retryable
from .role_accesses import RoleAccesses


class ModelRole(StrEnum):
    """What a model is used for in a turn."""

    MAIN = "main"
    FAST = "fast"
    FALLBACK = "fallback"


def falls_back(err: BaseException) -> bool:
    """Whether another model may succeed where the main one failed.

    Rate limits, server errors and dropped connections, as for retries, and timeouts
    too: retrying a slow model keeps the user waiting twice, another one may be quick.
    """
    return is_retryable(err) or classify_error(err) is ModelErrorKind.TIMEOUT


@dataclass(frozen=True, slots=True)
class RoleModel:
    """One role's chat model, with the model string that names it in activity records."""

    role: ModelRole
    name: str
    model: BaseChatModel


@dataclass(frozen=True, slots=True)
class RoleModels:
    """The chat models of one turn, by role."""

    main: RoleModel
    # The main model when the agent has no fast model.
    fast: RoleModel
    fallback: RoleModel | None = None


class ModelCache:
    """One chat model per (access, settings), created on first use and reused by every turn.

    Building a chat model validates its fields and resolves the provider; doing that once
    per configuration instead of once per turn keeps a turn's start cheap.
    """

    def __init__(self) -> None:
        self._models: dict[tuple[ModelAccess, ModelSettings], BaseChatModel] = {}

    def get(self, access: ModelAccess, settings: ModelSettings) -> BaseChatModel:
        """The cached model for this access and settings."""
        key = (access, settings)
        model = self._models.get(key)
        if model is None:
            model = self._models[key] = build_chat_model(access, settings)
        return model

    def roles(self, main: ModelAccess, chosen: RoleAccesses, settings: ModelSettings) -> RoleModels:
        """The models of every role for one agent's settings."""
        main_model = RoleModel(ModelRole.MAIN, main.model, self.get(main, settings))
        fast = main_model
        if chosen.fast is not None:
            fast = RoleModel(ModelRole.FAST, chosen.fast.model, self.get(chosen.fast, settings))
        fallback = None
        if chosen.fallback is not None:
            fallback = RoleModel(
                ModelRole.FALLBACK, chosen.fallback.model, self.get(chosen.fallback, settings)
            )
        return RoleModels(main_model, fast, fallback)

    def __len__(self) -> int:
        """How many distinct models were built."""
        return len(self._models)
