"""LiteLLM's lazy attributes and its default tokenizer.

Behaviour worked around (checked on LiteLLM 1.83.0):

- Lazy attributes. LiteLLM resolves many module attributes through
  `importlib.import_module` on first access (its error and cost paths among them), listed
  by `litellm._lazy_imports._get_lazy_import_registry()`. The warm-up resolves them once,
  off the event loop (about 0.25 s and 3 MB), instead of stalls on the loop at the first
  failure. All but the providers' config classes (`LLM_CONFIG_NAMES` of
  `litellm._lazy_imports_registry`: about 200 of them, 340 modules and some 5 MiB, issue
  #29): a chat call reads only its own provider's, and the warm-up's mock call of each
  model has resolved those already (tests/agent/models/test_warm_up_imports.py checks that
  real calls and their failures resolve nothing more). Image generation and embeddings
  have no such mock call: their first-use steps in the executor resolve the configs
  (`resolve_provider_configs`; a Gemini image's first call reads one on the loop
  otherwise, tests/test_blocking.py).
- The default encoding. `litellm.completion` hands every call the default tiktoken
  encoding (cl100k, cached in `litellm.main._encoding_cache`), which the Ollama code
  never uses; building it costs 40 MB and one 55 ms stretch in native code holding the
  GIL. LiteLLM has no setting for this, so for Ollama the cache starts as EncodingOnDemand,
  a stand-in that builds the real encoding (`litellm._lazy_imports._get_default_encoding`,
  what LiteLLM fills the cache with) on first use and forwards to it.

On another version neither is done (one log line says so): the lazy attributes resolve on
first use as LiteLLM designed, the encoding is built by LiteLLM when it wants it.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import litellm
from litellm import main as litellm_main

from .versions import matches

CHECKED_VERSIONS = frozenset({"1.83.0"})
ACTIVE = matches(
    "litellm",
    CHECKED_VERSIONS,
    "resolving LiteLLM's lazy attributes ahead and sparing its default encoding",
    "LiteLLM resolves them, and builds the encoding, on first use",
)

# Lazy attributes of litellm whose resolution builds the default tiktoken encoding.
TOKENIZER_ATTRIBUTES = frozenset({"encoding", "get_modified_max_tokens"})


class EncodingOnDemand:
    """LiteLLM's default tiktoken encoding, built the first time something really uses it."""

    __slots__ = ("_encoding",)

    def __init__(self) -> None:
        self._encoding: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._encoding is None:
            from litellm._lazy_imports import _get_default_encoding

            self._encoding = _get_default_encoding()
        return getattr(self._encoding, name)


def spare_default_encoding() -> None:
    """Let LiteLLM hand Ollama calls the on-demand stand-in of its default encoding."""
    if ACTIVE and litellm_main._encoding_cache is None:
        litellm_main._encoding_cache = EncodingOnDemand()


def resolve_lazy_attributes(skip: Collection[str] = ()) -> None:
    """Resolve LiteLLM's lazy module attributes now, except `skip` and the providers'
    config classes (blocking: run it in the executor)."""
    if not ACTIVE:
        return
    from litellm._lazy_imports import _get_lazy_import_registry
    from litellm._lazy_imports_registry import LLM_CONFIG_NAMES

    left_out = {*skip, *LLM_CONFIG_NAMES}
    for name in _get_lazy_import_registry():
        if name not in left_out:
            getattr(litellm, name)


def resolve_provider_configs() -> None:
    """Resolve the providers' config classes the warm-up leaves out (blocking: executor)."""
    if not ACTIVE:
        return
    from litellm._lazy_imports_registry import LLM_CONFIG_NAMES

    for name in LLM_CONFIG_NAMES:
        getattr(litellm, name)
