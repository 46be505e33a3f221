"""Embeddings for semantic memory search, through LiteLLM's `aembedding`.

An embedding model is optional: without one, memories are found by their words (FTS5).
With one, the memory store ranks by words and meaning together (storage/sqlite/store.py).

Whose key goes where: the embedding model may have its own key and base URL. Without its
own key it borrows the chat model's key only when both models belong to the same provider
and go to the same address; any other provider or address gets no key from us (LiteLLM
then reads the provider's usual environment variable). A key is never sent to a server it
was not given for.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

from ..errors import ModelErrorKind
from ..upstream.sdk_imports import FIRST_EMBEDDING_MODULES
from .access import ModelAccess, same_place
from .client_users import SHARED_CLIENT_USERS
from .error_kinds import classify_error
from .litellm_loading import async_litellm

# What the first embedding request imports (about 470 modules, most of the OpenAI SDK's
# resources) after the chat model's warm-up; imported in the executor instead. Some are
# private modules, named (and version-checked) in upstream/sdk_imports.py.
_FIRST_CALL_MODULES = FIRST_EMBEDDING_MODULES


class EmbeddingError(Exception):
    """The embedding model failed; `kind` says how, the message holds no secret."""

    def __init__(self, kind: ModelErrorKind, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


def embedding_access(
    model: str, api_key: str | None, api_base: str | None, *, chat: ModelAccess
) -> ModelAccess:
    """How to reach the embedding model, borrowing the chat model's key only when safe.

    Without a base URL of its own, an embedding model of the chat model's provider uses the
    chat model's base URL too (the same local server, the same proxy).
    """
    if api_key:
        return ModelAccess(model, api_key, api_base or None)
    if same_place(model, api_base, chat):
        return ModelAccess(model, chat.api_key, api_base or chat.api_base)
    return ModelAccess(model, None, api_base or None)


def warm_up_embeddings(access: ModelAccess) -> None:
    """Do the first embedding call's imports now (blocking: run it in the executor)."""
    for name in _FIRST_CALL_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            continue  # another SDK version: its first call imports what it needs
    # LiteLLM's provider configs, which the chat warm-up leaves out (upstream/litellm_lazy.py).
    from ..upstream import litellm_lazy
    from .library import litellm

    litellm_lazy.resolve_provider_configs()
    try:
        litellm.embedding(model=access.model, input=["warm up"], mock_response=[0.0])
    except Exception:  # noqa: BLE001  a bad model string is reported by the real call
        return


class LiteLLMEmbedder:
    """The store's embedding function for one model; after a failure it pauses a while.

    A model that is down would otherwise cost every turn a timeout before the memory
    search falls back to words; for `pause` seconds after a failure it is not asked.
    """

    def __init__(self, access: ModelAccess, *, timeout: float, pause: float = 60) -> None:
        """`timeout` bounds one request, in seconds."""
        self.access = access
        self._timeout = timeout
        self._pause = pause
        self._paused_until = 0.0

    @property
    def model(self) -> str:
        """The model string, which also tags the vectors it makes."""
        return self.access.model

    async def __call__(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order."""
        if time.monotonic() < self._paused_until:
            raise EmbeddingError(
                ModelErrorKind.CONNECTION, f"{self.model} failed recently; not asked again yet"
            )
        try:
            vectors = await async_embed(self.access, texts, self._timeout)
        except EmbeddingError:
            self._paused_until = time.monotonic() + self._pause
            raise
        self._paused_until = 0.0
        return vectors


async def async_embed(access: ModelAccess, texts: list[str], timeout: float) -> list[list[float]]:
    """Embed `texts` with one request; EmbeddingError (key removed) if it fails."""
    try:
        async with SHARED_CLIENT_USERS.use():
            litellm = await async_litellm()
            response = await litellm.aembedding(
                **access.litellm_kwargs(), input=texts, timeout=timeout, max_retries=0
            )
        data = sorted(response.data, key=_field("index"))
        vectors = [list(_field("embedding")(item)) for item in data]
    except Exception as err:  # noqa: BLE001  every failure becomes an EmbeddingError
        detail = access.redact(f"{type(err).__name__}: {err}")[:500]
        raise EmbeddingError(classify_error(err), detail) from None
    if len(vectors) != len(texts):
        raise EmbeddingError(
            ModelErrorKind.BAD_REQUEST,
            f"{access.model} returned {len(vectors)} vectors for {len(texts)} texts",
        )
    return vectors


def _field(name: str) -> Any:
    """Read a field of an embedding entry, whether LiteLLM gives a dict or an object."""

    def read(item: Any) -> Any:
        return item[name] if isinstance(item, dict) else getattr(item, name)

    return read
