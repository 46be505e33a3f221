"""The LangGraph agent. Knows nothing about Home Assistant entities.

LiteLLM reads its environment switches at import time, and this package is imported
before any module that imports LiteLLM (Python runs a package's face before any module
below it), so the switches are set here: no network fetch of
the model price map, no `.env` loading, no Anthropic beta-header fetch, and strict
msgpack revival for checkpoints. `setdefault` keeps a user's explicit override.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")

# Nothing heavy is imported here: the subpackages' faces are lazy (lazy_face.py), LiteLLM is
# loaded and set up by models/library.py when a module that calls it is first imported.
