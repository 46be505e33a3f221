"""LiteLLM, loaded once and set up as the agent uses it.

Every module here that calls LiteLLM imports it from this module, so however the first
import happens (the stack's background load, a test importing one module) the setup below
has run before any call. LiteLLM's environment switches are set earlier, by the agent
package's face, which every import of this module passes through.
"""

from __future__ import annotations

import logging

from ..guard import install_redaction

# LiteLLM loads with the cyclic garbage collector paused and its heap frozen after
# (upstream/heap.py).
from ..upstream import heap

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
from ..upstream import litellm_release  # noqa: E402, F401


def load_model_library() -> None:
    """Nothing left to do: importing this module loaded and set up LiteLLM.

    The stack's loader calls it first, so LiteLLM's import is the one with the frozen heap.
    """
