"""The LangGraph agent. Knows nothing about Home Assistant entities.

LiteLLM reads its environment switches at import time, and this package is imported
before any module that imports LiteLLM, so the switches are set here: no network fetch of
the model price map, no `.env` loading, no Anthropic beta-header fetch, and strict
msgpack revival for checkpoints. `setdefault` keeps a user's explicit override.
"""

from __future__ import annotations

import logging
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")

# After the switches: the guard package imports langchain_core.
from .guard import install_redaction

# LiteLLM loads with the cyclic garbage collector paused and its heap frozen after
# (upstream/heap.py): imported after the switches above, so they are read.
from .upstream import heap

litellm = heap.import_frozen("litellm")

litellm.suppress_debug_info = True
litellm.telemetry = False
# LiteLLM's default aiohttp transport treats a connection that drops mid-stream as a
# normal end of the answer, so a cut-off sentence would be spoken as if complete. httpx's
# own transport raises instead, which the runtime turns into a clear error.
litellm.disable_aiohttp_transport = True
# LiteLLM attaches its own stderr handlers; Home Assistant's logging is the only sink.
for _name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
    logging.getLogger(_name).handlers.clear()
# ...and never with an API key in it (LiteLLM logs every call's arguments at DEBUG).
install_redaction()


# Workarounds applied at import, each on the library version it was written for
# (upstream/): LiteLLM's logging threads become ours to stop.
from .upstream import litellm_release  # noqa: E402, F401
