"""LiteLLM for code on the event loop that may run before anything has loaded it.

Only a configured model that needs LiteLLM loads it (stack.py); an Ollama setup never
does (chat.py `needs_litellm`). A feature that reaches LiteLLM on its own (an embedding
model, an image model, a web search) asks here: LiteLLM is imported, and set up
(library.py), in the executor the first time, and looked up after that.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from types import ModuleType

_LIBRARY = f"{__package__}.library"


async def async_litellm() -> ModuleType:
    """The litellm module, set up; imported off the event loop if it is not yet."""
    library = sys.modules.get(_LIBRARY)
    if library is None:
        library = await asyncio.to_thread(importlib.import_module, _LIBRARY)
    return library.litellm


def litellm_loaded() -> bool:
    """Whether this process has loaded LiteLLM through library.py."""
    return _LIBRARY in sys.modules
