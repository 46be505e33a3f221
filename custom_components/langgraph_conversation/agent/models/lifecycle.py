"""A model's life in this process: warm-up off the event loop (LiteLLM's and
langchain-core's first-call imports, a local model registered), the access check a
config flow makes, and closing LiteLLM's shared clients when the last entry goes."""

from __future__ import annotations

import asyncio
import importlib
import logging

from langchain_core import messages as lc_messages, tools as lc_tools
from langchain_core.tools import StructuredTool
from langchain_core.utils import function_calling as lc_function_calling

from ..errors import ModelError, ModelErrorKind
from ..upstream import heap, litellm_lazy, litellm_release, litellm_tokenizer_json
from ..upstream.sdk_imports import FIRST_CHAT_MODULES
from .access import ModelAccess, ModelSettings, provider_of
from .chat import build_chat_model
from .client_users import SHARED_CLIENT_USERS
from .error_kinds import to_model_error
from .library import litellm
from .ollama_chat import async_close_client, prepare_client

_LOGGER = logging.getLogger(__name__)


_LOCAL_PROVIDERS = ("ollama", "ollama_chat")


def register_local_model(access: ModelAccess) -> None:
    """Tell LiteLLM what a local Ollama model is, so it never asks Ollama at call time.

    LiteLLM looks up every model in its price map; for an Ollama model missing there it
    POSTs to `<ollama>/api/show` with a synchronous HTTP client, from the event loop, at
    every call (and to localhost:11434 whatever the configured base URL). A local model
    costs nothing and, on the chat API, takes tools natively.
    """
    provider, _, name = access.model.partition("/")
    if provider not in _LOCAL_PROVIDERS or not name:
        return
    entry = {
        "litellm_provider": provider,
        "mode": "chat",
        "supports_function_calling": True,
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
    }
    # The bare name first: registering a new key looks it up, and for an Ollama key that
    # LiteLLM does not know yet the lookup POSTs to localhost:11434/api/show (whatever the
    # configured server). Once the bare name is known, the prefixed one is found without.
    litellm.register_model({name: entry})
    litellm.register_model({access.model: entry})


def warm_up(access: ModelAccess) -> None:
    """Run the first call's lazy imports once, off the event loop.

    The first real request would otherwise import the provider's transformation modules
    and set up the tokenizer on the event loop, which Home Assistant reports as blocking.
    For LiteLLM, a mock response exercises the same code paths without any network
    traffic; an Ollama model (ollama_chat.py) needs its client's TLS context and the
    modules its first streamed request imports.
    """
    register_local_model(access)
    if provider_of(access.model) == "ollama_chat":
        prepare_client()
    else:
        _warm_up_litellm(access)
    resolve_langchain_exports()
    build_chat_model(access, ModelSettings()).bind_tools([_WARM_UP_TOOL])
    # What the first real call would still import on the loop: langchain-core's tracers,
    # LiteLLM's service logger, anyio's backend (upstream/sdk_imports.py).
    _import_present(FIRST_CHAT_MODULES)
    # LiteLLM's parsed tokenizer JSON, never read again (upstream/litellm_tokenizer_json.py).
    litellm_tokenizer_json.drop_parsed_tokenizer()
    # What the (first) warm-up imported lives as long as the process too.
    heap.freeze_after_first_warm_up()
    _WARMED_PROVIDERS.add(provider_of(access.model))


def _warm_up_litellm(access: ModelAccess) -> None:
    """A mock streamed completion through LiteLLM, and what its first real call builds."""
    stream = litellm.completion(
        model=access.model,
        messages=[{"role": "user", "content": "hi"}],
        mock_response="ok",
        stream=True,
    )
    for _chunk in stream:
        pass
    # LiteLLM's stream wrapper counts the answer's tokens when a stream ends without
    # usage, with the model's own encoding (o200k for OpenAI's): built here, off the
    # loop (0.7 s, ~70 MB).
    litellm.token_counter(model="gpt-4o", text="warm up")
    # LiteLLM's lazy module attributes, resolved here once instead of on the loop at the
    # first failure (upstream/litellm_lazy.py).
    litellm_lazy.resolve_lazy_attributes()
    if provider_of(access.model) not in _LOCAL_PROVIDERS:
        resolve_openai_chat_resources()


def _import_present(names: tuple[str, ...]) -> None:
    """Import each module that this install has (a public module may move in a release:
    then the first call imports what replaced it, once, as before)."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            _LOGGER.debug("No module %s to import ahead", name)


def resolve_openai_chat_resources() -> None:
    """Import the OpenAI SDK's chat resources now (blocking: run it in the executor).

    openai 3.26 (Home Assistant 2026.11's pin) imports its API resources lazily: the
    client's first request resolves `from .resources.chat import AsyncChat` through the
    package's __getattr__ and a relative import_module, on the event loop. Resolving the
    packages' exports here caches them; earlier versions import them eagerly. Not for
    Ollama, whose calls LiteLLM makes with its own HTTP handler: on openai 3.10 (Home
    Assistant 2026.10's pin) the resources package imports every API of the SDK, 460
    modules and 16 MiB that an Ollama setup never uses (issue #29).
    """
    for package in ("openai.resources.chat", "openai.resources.chat.completions"):
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            getattr(module, name)


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
    check a model before any entry is set up); a local model is registered every time,
    as each model name is new to LiteLLM."""
    if provider_of(access.model) in _WARMED_PROVIDERS:
        register_local_model(access)
        return
    warm_up(access)


async def _never_called() -> None:
    """Coroutine of the warm-up tool; binding a tool never runs it."""


_WARM_UP_TOOL = StructuredTool(
    name="warm_up",
    description="Binding a tool once at setup imports what binding needs.",
    args_schema={"type": "object", "properties": {}},
    coroutine=_never_called,
)


async def async_check_access(access: ModelAccess, timeout: float) -> None:
    """Make one minimal real request; raise ModelError if the model is unreachable."""
    try:
        async with SHARED_CLIENT_USERS.use():
            if provider_of(access.model) == "ollama_chat":
                # As a turn asks it (ollama_chat.py): what passes here works in a turn.
                model = build_chat_model(
                    access, ModelSettings(max_tokens=5, request_timeout=timeout)
                )
                await model.ainvoke([lc_messages.HumanMessage("Reply with OK.")])
            else:
                await litellm.acompletion(
                    **access.litellm_kwargs(),
                    messages=[{"role": "user", "content": "Reply with OK."}],
                    max_tokens=5,
                    timeout=timeout,
                    num_retries=0,
                )
    except Exception as err:  # noqa: BLE001  every failure becomes a typed ModelError
        error = to_model_error(err, access)
        if access.request_key is None and await asyncio.to_thread(lacks_key, access):
            # LiteLLM refuses a call without the provider's key before sending it, and
            # reports that in the provider's own words: an AuthenticationError with status
            # 500 from the OpenAI SDK, a 401 for Anthropic. Neither server was contacted.
            raise ModelError(ModelErrorKind.MISSING_KEY, error.detail) from None
        raise error from None


def lacks_key(access: ModelAccess) -> bool:
    """Whether the provider needs a key that neither the call nor the environment has.

    LiteLLM's own check of a model's environment (names of variables it would read a key
    from); names that are not keys (OLLAMA_API_BASE) do not count. Run off the event
    loop: it may import a provider's module on first use.
    """
    try:
        found = litellm.validate_environment(model=access.model, api_base=access.api_base)
    except Exception as err:  # noqa: BLE001  an unknown provider: no verdict on its key
        _LOGGER.debug("LiteLLM cannot tell which key %s needs: %s", access.model, err)
        return False
    missing = found.get("missing_keys") or []
    return any("KEY" in name or "TOKEN" in name for name in missing)


async def async_release_shared_clients() -> None:
    """Close what LiteLLM keeps open on the event loop between calls.

    LiteLLM caches its HTTP clients and runs a logging worker task in module globals,
    bound to the loop that first used them, plus a logging thread pool. When the last
    entry unloads or Home Assistant stops, nothing of ours may stay behind, and a closed
    client must not be handed out again, so the cache is emptied too. A flow's check
    still running on them finishes first (models/client_users.py).
    """
    async with SHARED_CLIENT_USERS.closing():
        await litellm_release.close_shared_clients()
        await async_close_client()
