"""Contract of agent/upstream/langchain_core.py: merge_dicts merges as chunk addition does."""

from __future__ import annotations

import inspect
import logging

from langchain_core.messages import AIMessageChunk
from langchain_core.utils import _merge
import pytest

from custom_components.langgraph_conversation.agent.upstream import langchain_core, versions

# Metadata as providers stream it: a model name repeated, a finish reason at the end, a
# nested mapping filled in over several chunks.
_SEQUENCE = [
    {"model_name": "llama3.2"},
    {"model_name": "llama3.2", "system_fingerprint": "fp"},
    {"finish_reason": "stop", "usage": {"prompt": 3}},
    {"usage": {"completion": 5}},
]


def _by_chunks() -> dict:
    total = AIMessageChunk(content="")
    for metadata in _SEQUENCE:
        total += AIMessageChunk(content="", response_metadata=metadata)
    return dict(total.response_metadata)


def test_the_installed_langchain_core_is_the_checked_one() -> None:
    """An upgrade lands here first: review agent/upstream/langchain_core.py for it."""
    assert versions.installed("langchain-core") in langchain_core.CHECKED_VERSIONS
    assert langchain_core.ACTIVE
    assert langchain_core.merge_metadata is _merge.merge_dicts


def test_merge_dicts_keeps_its_signature() -> None:
    assert list(inspect.signature(_merge.merge_dicts).parameters) == ["left", "others"]


@pytest.mark.parametrize(
    "merge", [_merge.merge_dicts, langchain_core._merged_by_chunks], ids=["private", "public"]
)
def test_both_paths_merge_as_adding_chunks_does(merge) -> None:
    merged: dict = {}
    for metadata in _SEQUENCE:
        merged = merge(merged, metadata)
    assert merged == _by_chunks()
    assert merged["usage"] == {"prompt": 3, "completion": 5}


def test_another_version_uses_the_public_path(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert not versions.matches(
            "langchain-core",
            langchain_core.CHECKED_VERSIONS,
            "merging",
            "chunks",
            version="9.9.9",
        )
    assert "langchain-core 9.9.9 is installed" in caplog.text
