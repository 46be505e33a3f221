"""How an agent reaches the models it chose for its roles (fast, fallback, vision,
search): plain data and the key reuse rule (roles.py), light enough for the agent form and
the profile, which name them without loading LiteLLM."""

from __future__ import annotations

from dataclasses import dataclass

from .access import ModelAccess, same_place


def role_access(
    main: ModelAccess, model: str | None, api_key: str | None, api_base: str | None
) -> ModelAccess | None:
    """How to reach a role's model, borrowing the entry's key only where it belongs.

    None when the role names no model (it then uses the main model).
    """
    model = (model or "").strip()
    if not model:
        return None
    api_key = (api_key or "").strip() or None
    api_base = (api_base or "").strip() or None
    if same_place(model, api_base, main):
        return ModelAccess(model, api_key or main.api_key, api_base or main.api_base)
    return ModelAccess(model, api_key, api_base)


@dataclass(frozen=True, slots=True)
class RoleAccesses:
    """The models one agent chose for its roles; None means the main model / no fallback
    / no model of its own for images or web searches."""

    fast: ModelAccess | None = None
    fallback: ModelAccess | None = None
    vision: ModelAccess | None = None
    # Web search (#27): the model that searches the web for the agent (web_search.py).
    search: ModelAccess | None = None
