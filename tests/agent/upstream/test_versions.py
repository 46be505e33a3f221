"""The version check every workaround makes at import (agent/upstream/versions.py)."""

from __future__ import annotations

from importlib import metadata
import logging

import pytest

from custom_components.langgraph_conversation.agent.upstream import versions


def test_the_installed_version_comes_from_package_metadata() -> None:
    assert versions.installed("litellm") == metadata.version("litellm")
    assert versions.installed("no-such-distribution-here") == "unknown"


def test_a_checked_version_matches_quietly(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert versions.matches("litellm", {"1.0.0"}, "a fix", "plain", version="1.0.0")
    assert not caplog.records


def test_another_version_says_what_happens_instead(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert not versions.matches(
            "litellm", {"1.0.0", "1.1.0"}, "a fix", "the plain path is used", version="2.0.0"
        )
    [record] = caplog.records
    assert record.getMessage() == (
        "litellm 2.0.0 is installed; a fix was written for 1.0.0 / 1.1.0 and stays off: "
        "the plain path is used"
    )
