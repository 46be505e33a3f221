"""A model's life in this process: warm-up off the event loop (langchain-core's and the
provider's first-call imports), the access check a config flow makes, and closing the
shared clients (ours for Ollama, LiteLLM's) when the last entry goes.

LiteLLM's part lives in litellm_chat.py, imported here only for a model that needs it
(`needs_litellm`): in the executor for a warm-up, on the loop only once the stack or
the config flow has loaded it.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from langchain_core import messages as lc_messages, tools as lc_tools
from langchain_core.tools import StructuredTool
from langchain_core.utils import function_calling as lc_function_calling

from ..errors import ModelError, ModelErrorKind
from ..upstream import heap
from ..upstream.sdk_imports import FIRST_CHAT_MODULES, import_present
from .access import ModelAccess, ModelSettings, provider_of
from .chat import build_chat_model, needs_litellm
from .client_users import SHARED_CLIENT_USERS
from .error_kinds import to_model_error
from .ollama_chat import async_close_client, prepare_client

_LOGGER = logging.getLogger(__name__)

_LITELLM_CHAT = f"{__package__}.litellm_chat"


def warm_up(access: ModelAccess) -> None:
    """Run the first call's lazy imports once, off the event loop (blocking: the executor).

    The first real request would otherwise import the provider's modules on the event
    loop, which Home Assistant reports as blocking. Through LiteLLM a mock response
    exercises the same code paths without any network traffic (litellm_chat.py); an
    Ollama model (ollama_chat.py) needs its client's TLS context.
    """
    if needs_litellm(access.model):
        from .litellm_chat import warm_up_litellm

        warm_up_litellm(access)
    else:
        prepare_client()
    resolve_langchain_exports()
    build_chat_model(access, ModelSettings()).bind_tools([_WARM_UP_TOOL])
    # What the first real call would still import on the loop: langchain-core's tracers,
    # anyio's backend (upstream/sdk_imports.py).
    import_present(FIRST_CHAT_MODULES)
    # What the (first) warm-up imported lives as long as the process too.
    heap.freeze_after_first_warm_up()
    _WARMED_PROVIDERS.add(provider_of(access.model))


def resolve_langchain_exports() -> None:
    """Import what langchain-core's packages import lazily on first use (blocking: run it
    in the executor): binding tools imports langchain_core.tools.simple, compiling a graph
    langchain_core.messages.tool. The setup runs it before it builds the runtime's graphs,
    the warm-up (which the setup leaves to the background) again."""
    for package in (lc_tools, lc_messages, lc_function_calling):
        for name in getattr(package, "__all__", ()):
            getattr(package, name)


# Providers whose first-call imports this process has done (warm_up).
_WARMED_PROVIDERS: set[str] = set()


def warm_up_once(access: ModelAccess) -> None:
    """The warm-up for a provider this process has not warmed up yet (a config flow may
    check a model before any entry is set up); a local model LiteLLM serves is
    registered every time, as each model name is new to LiteLLM."""
    if provider_of(access.model) not in _WARMED_PROVIDERS:
        warm_up(access)
    elif needs_litellm(access.model):
        from .litellm_chat import register_local_model

        register_local_model(access)


async def _never_called() -> None:
    """Coroutine of the warm-up tool; binding a tool never runs it."""


_WARM_UP_TOOL = StructuredTool(
    name="warm_up",
    description="Binding a tool once at setup imports what binding needs.",
    args_schema={"type": "object", "properties": {}},
    coroutine=_never_called,
)


async def async_check_access(access: ModelAccess, timeout: float) -> None:
    """Make one minimal real request; raise ModelError if the model is unreachable.

    For a model LiteLLM serves, the config flow has loaded litellm_chat.py (and warmed
    the provider up) in the executor before it asks.
    """
    uses_litellm = needs_litellm(access.model)
    try:
        async with SHARED_CLIENT_USERS.use():
            if uses_litellm:
                from .litellm_chat import async_check_litellm_access

                await async_check_litellm_access(access, timeout)
            else:
                # As a turn asks it (ollama_chat.py): what passes here works in a turn.
                model = build_chat_model(
                    access, ModelSettings(max_tokens=5, request_timeout=timeout)
                )
                await model.ainvoke([lc_messages.HumanMessage("Reply with OK.")])
    except Exception as err:  # noqa: BLE001  every failure becomes a typed ModelError
        error = to_model_error(err, access)
        if uses_litellm and access.request_key is None:
            from .litellm_chat import lacks_key

            if await asyncio.to_thread(lacks_key, access):
                # LiteLLM refuses a call without the provider's key before sending it,
                # and reports that in the provider's own words: an AuthenticationError
                # with status 500 from the OpenAI SDK, a 401 for Anthropic. Neither
                # server was contacted.
                raise ModelError(ModelErrorKind.MISSING_KEY, error.detail) from None
        raise error from None


async def async_release_shared_clients() -> None:
    """Close the clients every entry and flow shares: ours for Ollama, and LiteLLM's
    cached clients, logging worker and threads if this process has loaded it.

    When the last entry unloads or Home Assistant stops, nothing of ours may stay
    behind, and a closed client must not be handed out again. A flow's check still
    running on them finishes first (models/client_users.py).
    """
    async with SHARED_CLIENT_USERS.closing():
        await async_close_client()
        if _LITELLM_CHAT in sys.modules:
            await sys.modules[_LITELLM_CHAT].async_close_litellm_clients()
