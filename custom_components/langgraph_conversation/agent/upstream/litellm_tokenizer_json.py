"""LiteLLM's parsed copy of the Anthropic tokenizer, kept after it served its purpose.

Behaviour worked around (checked on LiteLLM 1.83.0): `litellm.utils` parses its bundled
Anthropic tokenizer file (1.7 MB of JSON) into the module global `json_data` at import,
only to turn it back into the string `claude_json_str`, from which the tokenizer is built
when a pre-Claude-3 model's tokens are counted. The parsed copy is never read again yet
lives as long as the process: about 5 MiB of resident memory (issue #29). LiteLLM has no
setting for this; the warm-up drops the global (the string stays: what LiteLLM uses).

On another version nothing is dropped (one log line says so).
"""

from __future__ import annotations

from litellm import utils as litellm_utils

from .versions import matches

CHECKED_VERSIONS = frozenset({"1.83.0"})
ACTIVE = matches(
    "litellm",
    CHECKED_VERSIONS,
    "dropping LiteLLM's parsed copy of the Anthropic tokenizer",
    "LiteLLM keeps it (about 5 MiB)",
)
# The module global that holds the parsed copy, and the string LiteLLM made of it.
PARSED = "json_data"
KEPT = "claude_json_str"


def drop_parsed_tokenizer() -> bool:
    """Let go of LiteLLM's parsed tokenizer JSON; True when it was there to drop."""
    if not ACTIVE or not hasattr(litellm_utils, KEPT):
        return False
    # Popped from the module's namespace: a second call (another warm-up) finds nothing.
    return vars(litellm_utils).pop(PARSED, None) is not None
