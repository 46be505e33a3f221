"""LiteLLM's lazy attributes.

Behaviour worked around (checked on LiteLLM 1.83.0): LiteLLM resolves many module
attributes through `importlib.import_module` on first access (its error and cost paths
among them), listed by `litellm._lazy_imports._get_lazy_import_registry()`. The warm-up
resolves them once, off the event loop (about 0.25 s and 3 MB), instead of stalls on the
loop at the first failure. All but the providers' config classes (`LLM_CONFIG_NAMES` of
`litellm._lazy_imports_registry`: about 200 of them, 340 modules and some 5 MiB, issue
#29): a chat call reads only its own provider's, and the warm-up's mock call of each
model has resolved those already (tests/agent/models/test_warm_up_imports.py checks that
real calls and their failures resolve nothing more). Image generation and embeddings
have no such mock call: their first-use steps in the executor resolve the configs
(`resolve_provider_configs`; a Gemini image's first call reads one on the loop
otherwise, tests/test_blocking.py).

On another version nothing is done (one log line says so): the lazy attributes resolve on
first use as LiteLLM designed.
"""

from __future__ import annotations

from collections.abc import Collection

import litellm

from .versions import matches

CHECKED_VERSIONS = frozenset({"1.83.0"})
ACTIVE = matches(
    "litellm",
    CHECKED_VERSIONS,
    "resolving LiteLLM's lazy attributes ahead",
    "LiteLLM resolves them on first use",
)


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
