"""Contract of agent/upstream/litellm_tokenizer_json.py: LiteLLM's parsed tokenizer JSON."""

from __future__ import annotations

import inspect
import json
import re

from litellm import utils as litellm_utils

from custom_components.langgraph_conversation.agent.upstream import litellm_tokenizer_json, versions


def test_the_installed_litellm_is_the_checked_one() -> None:
    """An upgrade lands here first: review agent/upstream/litellm_tokenizer_json.py for it."""
    assert versions.installed("litellm") in litellm_tokenizer_json.CHECKED_VERSIONS
    assert litellm_tokenizer_json.ACTIVE


def test_litellm_reads_the_parsed_copy_only_to_make_its_string() -> None:
    """In litellm.utils the global is assigned (twice: two ways to open the file) and read
    once, to make the string; nothing else in LiteLLM's utils names it."""
    source = inspect.getsource(litellm_utils)
    uses = re.findall(rf"\b{litellm_tokenizer_json.PARSED}\b", source)
    assert len(uses) == 3
    assert len(re.findall(rf"\b{litellm_tokenizer_json.PARSED} = json\.load\(f\)", source)) == 2
    assert f"{litellm_tokenizer_json.KEPT} = json.dumps({litellm_tokenizer_json.PARSED})" in source
    # The string is what the tokenizer is built from.
    assert f"Tokenizer.from_str({litellm_tokenizer_json.KEPT})" in source


def test_dropping_keeps_the_string_and_counting_works() -> None:
    """The parsed copy goes (once), the string stays, and LiteLLM still builds the
    Anthropic tokenizer from it and counts tokens with it."""
    string = getattr(litellm_utils, litellm_tokenizer_json.KEPT)
    # As LiteLLM left it at import (an earlier warm-up in this process may have dropped it).
    dropped_before = not hasattr(litellm_utils, litellm_tokenizer_json.PARSED)
    setattr(litellm_utils, litellm_tokenizer_json.PARSED, json.loads(string))
    try:
        assert litellm_tokenizer_json.drop_parsed_tokenizer() is True
        assert not hasattr(litellm_utils, litellm_tokenizer_json.PARSED)
        assert litellm_tokenizer_json.drop_parsed_tokenizer() is False
        assert getattr(litellm_utils, litellm_tokenizer_json.KEPT) is string
    finally:
        if not dropped_before:  # leave the module as this test found it
            setattr(litellm_utils, litellm_tokenizer_json.PARSED, json.loads(string))
    old_claude = next(
        model
        for model in sorted(litellm_utils.litellm.anthropic_models)
        if "claude-3" not in model and model.startswith("claude")
    )
    tokenizer = litellm_utils._return_huggingface_tokenizer(old_claude)
    assert tokenizer is not None
    assert tokenizer["type"] == "huggingface_tokenizer"
    assert len(tokenizer["tokenizer"].encode("hello there, general Kenobi").ids) > 3
