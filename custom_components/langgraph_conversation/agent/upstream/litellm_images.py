"""An OpenAI SDK client for LiteLLM's image generation that does not retry on its own.

Behaviour worked around (checked on LiteLLM 1.83.0): `OpenAIChatCompletion.image_generation`
pops `max_retries` from the request data with a default of 2, but the image path never puts
it there (`image_generation` drops it with the other client options), and a client passed
in as `client=` gets that 2 written onto it (`_set_dynamic_params_on_client`). The OpenAI
SDK would then retry a rate limit or a server error twice by itself, with its own waits,
before our retries (the subentry's setting, the same as a text task's) begin: a setting of
0 would still mean three attempts. `no_retry_client` gives LiteLLM a client whose
`max_retries` stays 0 whatever is written to it.

On another LiteLLM version the client is a plain `AsyncOpenAI(max_retries=0)`, which that
version may or may not reset (one log line says so): at worst the SDK retries, as LiteLLM
does by default.
"""

from __future__ import annotations

from typing import Any

import openai

from .versions import matches

CHECKED_VERSIONS = frozenset({"1.83.0"})
ACTIVE = matches(
    "litellm",
    CHECKED_VERSIONS,
    "the image client without SDK retries",
    "LiteLLM may let the OpenAI SDK retry image requests on its own",
)


class _NoRetryAsyncOpenAI(openai.AsyncOpenAI):
    """AsyncOpenAI whose `max_retries` is always 0 (writes are ignored, see above)."""

    @property  # type: ignore[override]
    def max_retries(self) -> int:
        """Never more than the one attempt: retries are the caller's."""
        return 0

    @max_retries.setter
    def max_retries(self, value: int) -> None:
        """Ignored: LiteLLM writes its default here."""


def no_retry_client(**kwargs: Any) -> openai.AsyncOpenAI:
    """An AsyncOpenAI (its usual keyword arguments) that makes exactly one attempt."""
    kwargs["max_retries"] = 0
    if ACTIVE:
        return _NoRetryAsyncOpenAI(**kwargs)
    return openai.AsyncOpenAI(**kwargs)
