"""LiteLLM and LangGraph read their switches at import: the integration sets them first.

Runs in its own interpreter (marker `isolated`): in the shared test process another
module may import LangGraph before the integration does.
"""

from __future__ import annotations

import importlib
import os
import sys

import pytest

pytestmark = pytest.mark.isolated


def test_switches_are_set_before_the_libraries_load() -> None:
    """Strict msgpack revival is on, LiteLLM uses its bundled cost map and httpx."""
    assert (
        "langgraph" not in sys.modules or "custom_components.langgraph_conversation" in sys.modules
    )
    integration = importlib.import_module("custom_components.langgraph_conversation")
    assert integration is not None
    from langgraph.checkpoint.serde import _msgpack

    assert _msgpack.STRICT_MSGPACK_ENABLED is True
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    # LiteLLM as the integration loads it, when a model needs it (agent/models/library.py).
    library = importlib.import_module(
        "custom_components.langgraph_conversation.agent.models.library"
    )
    assert library.litellm.disable_aiohttp_transport is True
