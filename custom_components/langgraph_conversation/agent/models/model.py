"""Chat models through LiteLLM: construction, warm-up, access checks, error mapping."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
import contextlib
from contextvars import ContextVar
from dataclasses import dataclass
import importlib
import logging
import threading
from typing import Any

import httpx
from langchain_core import messages as lc_messages, tools as lc_tools
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.runnables import Runnable, RunnableBinding
from langchain_core.tools import StructuredTool
from langchain_core.utils import function_calling as lc_function_calling
from langchain_litellm import ChatLiteLLM
import litellm
from litellm.types.utils import ModelResponseStream
import openai

from ..errors import ModelError, ModelErrorKind
from ..guard import PLACEHOLDER, SECRET_FILTER

# Imported for its effect: on the LiteLLM version it was written for, Ollama requests
# carry the tool-call history again (see the module).
from ..upstream import (
    heap,
    litellm_lazy,
    litellm_ollama,  # noqa: F401
    litellm_release,
    litellm_stream,
)
from ..upstream.langchain_litellm import PerCallCredentials
from .client_users import SHARED_CLIENT_USERS

_LOGGER = logging.getLogger(__name__)


# Sent as the key to an OpenAI-compatible server of the user's own when none is configured
# (see ModelAccess.request_key); says what it is to whoever reads the server's log.
NO_KEY_PLACEHOLDER = "no-key-configured"
# LiteLLM providers that go through the OpenAI SDK's client (which insists on a key) and
# may point at any server with a base URL.
_KEYLESS_OPENAI_PROVIDERS = frozenset({"openai", "text-completion-openai", "custom_openai"})


@dataclass(frozen=True, slots=True)
class ModelAccess:
    """How to reach one model: a LiteLLM model string plus optional key and base URL."""

    model: str
    api_key: str | None = None
    api_base: str | None = None

    def __post_init__(self) -> None:
        # LiteLLM logs each call's arguments at DEBUG; its log lines must not carry the
        # key, nor the password or token inside the base URL.
        SECRET_FILTER.add(self.api_key)
        SECRET_FILTER.add_url(self.api_base)

    @property
    def request_key(self) -> str | None:
        """The key sent with each request: the configured one, or for an OpenAI-compatible
        server of the user's own without a key, a placeholder.

        LiteLLM's `openai/` provider hands the call to the OpenAI SDK, whose client refuses
        to be built without a key, before anything is sent; a local server (llama.cpp,
        vLLM, LM Studio, ...) usually wants none and ignores the Authorization header. A
        placeholder gets such a server its request; one that does check keys refuses it
        like any wrong key. Never for OpenAI's own API (no base URL): there, a missing key
        is the user's mistake and must be reported as such.
        """
        if self.api_key:
            return self.api_key
        if self.api_base and provider_of(self.model) in _KEYLESS_OPENAI_PROVIDERS:
            return NO_KEY_PLACEHOLDER
        return None

    def litellm_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for LiteLLM calls (only the ones that are set)."""
        kwargs: dict[str, Any] = {"model": self.model}
        if key := self.request_key:
            kwargs["api_key"] = key
        if self.api_base:
            kwargs["api_base"] = self.api_base
        return kwargs

    def redact(self, text: str) -> str:
        """Remove the API key and URL credentials from text that may reach a log or a user."""
        if self.api_key:
            # Also a key too short for the process-wide filter.
            text = text.replace(self.api_key, PLACEHOLDER)
        return SECRET_FILTER.redact(text)


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Generation settings of one agent."""

    temperature: float | None = None
    max_tokens: int | None = None
    request_timeout: float = 60
    # Ollama's native API only (`ollama_chat/`); other providers never receive them.
    # The context window in tokens (Ollama's `num_ctx`; None: Ollama's own default).
    context_window: int | None = None
    # Seconds Ollama keeps the model loaded after a request (-1: until it is stopped;
    # None: Ollama's own default of 5 minutes).
    keep_alive: int | None = None
    # Whether a reasoning model thinks first (Ollama's `think`; None: the model decides).
    think: bool | None = None


def ollama_options(access: ModelAccess, settings: ModelSettings) -> dict[str, Any]:
    """The request fields of Ollama's native API for these settings, else nothing.

    LiteLLM 1.83.0's `ollama_chat` provider passes `num_ctx` on in the request's
    `options` and `keep_alive` and `think` at its top level (checked on the wire in
    tests/test_ollama_options.py); an OpenAI-compatible server would reject or ignore
    them, so only `ollama_chat` gets them.
    """
    if provider_of(access.model) != "ollama_chat":
        return {}
    options: dict[str, Any] = {}
    if settings.context_window is not None:
        options["num_ctx"] = settings.context_window
    if settings.keep_alive is not None:
        options["keep_alive"] = settings.keep_alive
    if settings.think is not None:
        options["think"] = settings.think
    return options


# Most specific first: LiteLLM's exception classes inherit from each other
# (e.g. Timeout and ServiceUnavailableError both derive from APIConnectionError or
# APIError depending on the provider path).
_ERROR_KINDS: tuple[tuple[type[BaseException], ModelErrorKind], ...] = (
    (litellm.AuthenticationError, ModelErrorKind.AUTH),
    (litellm.PermissionDeniedError, ModelErrorKind.AUTH),
    (litellm.NotFoundError, ModelErrorKind.MODEL_NOT_FOUND),
    (litellm.RateLimitError, ModelErrorKind.RATE_LIMIT),
    (litellm.Timeout, ModelErrorKind.TIMEOUT),
    (litellm.ContextWindowExceededError, ModelErrorKind.BAD_REQUEST),
    (litellm.BadRequestError, ModelErrorKind.BAD_REQUEST),
    (litellm.ServiceUnavailableError, ModelErrorKind.SERVER),
    (litellm.InternalServerError, ModelErrorKind.SERVER),
    (litellm.APIConnectionError, ModelErrorKind.CONNECTION),
)


def _kind_from_status(status: int) -> ModelErrorKind | None:
    if status in (401, 403):
        return ModelErrorKind.AUTH
    if status == 404:
        return ModelErrorKind.MODEL_NOT_FOUND
    if status == 408:
        return ModelErrorKind.TIMEOUT
    if status == 429:
        return ModelErrorKind.RATE_LIMIT
    if status >= 500:
        return ModelErrorKind.SERVER
    if status == 400:
        return ModelErrorKind.BAD_REQUEST
    return None


_TIMEOUTS = (openai.APITimeoutError, httpx.TimeoutException, TimeoutError)
# A transport that really failed (refused, reset, cut mid-stream)...
_TRANSPORT_FAILURES = (httpx.TransportError, ConnectionError)
# ...as opposed to LiteLLM's generic wrapper, which it also uses for Ollama's HTTP errors.
_CONNECTION_WRAPPERS = (openai.APIConnectionError,)


def _chain(err: BaseException) -> list[BaseException]:
    """The exception and its causes, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _sdk_got_no_answer(exc: BaseException) -> bool:
    """The OpenAI SDK's own APIConnectionError: its request got no HTTP answer at all.

    LiteLLM's subclass of it (litellm.APIConnectionError) is not meant: LiteLLM also
    raises that for answers it could not map (every Ollama error). The SDK's own is
    raised whatever broke the connection, including causes that are not transport
    errors, and the LiteLLM error wrapping it claims a status 500 nobody answered.
    """
    return type(exc) is openai.APIConnectionError


def _provider_status(chain: list[BaseException]) -> int | None:
    """The HTTP status the provider answered, if any.

    LiteLLM's own exceptions carry a status of their own choosing (a refused connection
    is a 500, every Ollama error a 500); the provider's answer is further down the chain.
    """
    for exc in chain:
        status = getattr(exc, "status_code", None)
        if (
            type(exc).__module__ != "litellm.exceptions"
            and isinstance(status, int)
            and status >= 400
        ):
            return status
    return None


# How providers say a request is larger than the model's window, in the body of their 400:
# OpenAI's error code, llama.cpp's llama-server error type (and its message), LiteLLM's
# own class for the cases it recognises.
_WINDOW_MARKERS = (
    "context_length_exceeded",
    "exceed_context_size_error",
    "exceeds the available context size",
)


def _is_window_error(chain: list[BaseException]) -> bool:
    for exc in chain:
        if isinstance(exc, litellm.ContextWindowExceededError):
            return True
        if getattr(exc, "status_code", None) == 400 or isinstance(exc, litellm.BadRequestError):
            text = str(exc)
            if any(marker in text for marker in _WINDOW_MARKERS):
                return True
    return False


def classify_error(err: BaseException) -> ModelErrorKind:
    """Map an exception raised by a LiteLLM call to a ModelErrorKind.

    In order: a timeout anywhere in the chain; a transport failure (or the OpenAI SDK
    saying it got no answer); a request over the model's context window; the provider's
    HTTP status; LiteLLM's connection wrapper; LiteLLM's own status (1.83 raises
    BadRequestError for statuses it does not map, with the real status in `status_code`);
    the exception class.
    """
    chain = _chain(err)
    if any(isinstance(exc, _TIMEOUTS) for exc in chain):
        return ModelErrorKind.TIMEOUT
    if any(isinstance(exc, _TRANSPORT_FAILURES) or _sdk_got_no_answer(exc) for exc in chain):
        return ModelErrorKind.CONNECTION
    if _is_window_error(chain):
        return ModelErrorKind.CONTEXT_WINDOW
    if (status := _provider_status(chain)) is not None:
        return _kind_from_status(status) or ModelErrorKind.UNKNOWN
    if any(isinstance(exc, _CONNECTION_WRAPPERS) for exc in chain):
        return ModelErrorKind.CONNECTION
    status = getattr(err, "status_code", None)
    if isinstance(status, int) and status >= 400:
        return _kind_from_status(status) or ModelErrorKind.UNKNOWN
    for exc_type, kind in _ERROR_KINDS:
        if isinstance(err, exc_type):
            return kind
    return ModelErrorKind.UNKNOWN


RETRYABLE_KINDS = frozenset(
    {ModelErrorKind.RATE_LIMIT, ModelErrorKind.SERVER, ModelErrorKind.CONNECTION}
)
# Longest wait between two attempts, whatever a Retry-After header asks: a person is
# waiting for the answer.
MAX_RETRY_DELAY = 5.0


def is_retryable(err: BaseException) -> bool:
    """Rate limits, server errors and dropped connections may pass; the rest will not.

    A 408 is the provider saying the request took too long on its side: like a 503 it
    usually passes, so it is retried. Our own client timeout is not: the person has
    already waited the whole request timeout once.
    """
    if _provider_status(_chain(err)) == 408:
        return True
    return classify_error(err) in RETRYABLE_KINDS


def retry_delay(err: BaseException, attempt: int) -> float:
    """Seconds to wait before retry number `attempt + 1`: Retry-After if given, capped."""
    # LiteLLM keeps the provider's headers apart; the httpx response may be empty.
    headers = (
        getattr(err, "litellm_response_headers", None)
        or getattr(getattr(err, "response", None), "headers", None)
        or {}
    )
    try:
        asked = float(headers.get("retry-after", ""))
    except ValueError:
        asked = 0.5 * 2**attempt
    return max(0.0, min(asked, MAX_RETRY_DELAY))


def redacted_error(err: BaseException) -> ModelError:
    """The failure as a ModelError whose text holds no secret: no API key this process
    knows, no credentials of any URL.

    LangGraph stores the exception of a failed node in the checkpoint (threads.db) and
    logs it at DEBUG, and some providers echo the refused key or the requested URL in
    their error text.
    """
    if isinstance(err, ModelError):
        return err
    detail = SECRET_FILTER.redact(f"{type(err).__name__}: {err}")
    return ModelError(classify_error(err), detail[:500])


def to_model_error(err: BaseException, access: ModelAccess) -> ModelError:
    """Wrap any exception from a model call, with secrets removed from the detail."""
    if isinstance(err, ModelError):
        return err
    detail = access.redact(f"{type(err).__name__}: {err}")
    return ModelError(classify_error(err), detail[:500])


# Providers whose answers ChatModel streams without LiteLLM's stream wrapper.
LEAN_STREAM_PROVIDERS = frozenset({"ollama_chat"})


def provider_of(model: str) -> str:
    """The LiteLLM provider prefix of a model string ("ollama_chat/llama3.2" → "ollama_chat")."""
    return model.partition("/")[0]


# LiteLLM names Ollama's chat and generate APIs as two providers; one server serves both.
_SAME_SERVER_PROVIDERS = {"ollama_chat": "ollama"}


def _provider_family(model: str) -> str | None:
    """The provider prefix of a model string, Ollama's two APIs as one; None without a
    prefix (LiteLLM would guess the provider from the name, and a guess must not decide
    where a key goes)."""
    provider, separator, _ = model.partition("/")
    return _SAME_SERVER_PROVIDERS.get(provider, provider) if separator else None


def same_place(model: str, api_base: str | None, main: ModelAccess) -> bool:
    """Whether a second model (a role's, the embedding model) is reached where `main` is:
    the same provider, and no base URL of its own or the same one (a trailing slash does
    not make another server). Only then may it borrow the main model's key: a key must
    never reach a provider or server it was not given for."""
    provider = _provider_family(model)
    if provider is None or provider != _provider_family(main.model):
        return False
    return not api_base or (api_base.rstrip("/") == (main.api_base or "").rstrip("/"))


class ChatModel(PerCallCredentials):
    """ChatLiteLLM that keeps its credentials to its own calls (upstream/langchain_litellm.py)
    and streams cheaply."""

    @property
    def _provider(self) -> str:
        return self.custom_llm_provider or provider_of(self.model_name or self.model)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        """Stream an answer; Ollama's straight from the lines LiteLLM's request returned.

        LiteLLM's stream wrapper (CustomStreamWrapper) re-creates every chunk several times
        over as pydantic objects, rebuilds the whole answer at the end for its logging and
        cost machinery, and langchain-litellm then dumps each chunk back to a dict: about
        8 ms of CPU per answer on the event loop, more than Home Assistant's own Ollama
        agent spends on a whole turn. Neither library has a switch for a lean stream. For
        `ollama_chat` LiteLLM's Ollama parser inside the wrapper is read directly
        (upstream/litellm_stream.py), and plain text lines (nearly all of them)
        become chunks without the parser's four pydantic objects per line. Everything else
        (the request and its transformation, credentials, the HTTP client, tool calls,
        reasoning, the final line with usage, error lines) stays LiteLLM's, and a failure
        mid-stream is mapped by the wrapper's own error handling, so `classify_error` sees
        what it saw before. Other providers take langchain-litellm's path unchanged.
        """
        if self._provider not in LEAN_STREAM_PROVIDERS:
            async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
                yield chunk
            return
        async for message in self._lean_messages(messages, stop, **kwargs):
            generation = ChatGenerationChunk(message=message)
            if run_manager:
                await run_manager.on_llm_new_token(message.text, chunk=generation)
            yield generation

    async def _lean_messages(
        self, messages: list[BaseMessage], stop: list[str] | None, **kwargs: Any
    ) -> AsyncIterator[AIMessageChunk]:
        """The lean stream of `_astream`, as message chunks."""
        message_dicts, params = self.request(messages, stop)
        params = {**params, **kwargs, "stream": True}
        if self.stream_options is not None:
            params["stream_options"] = self.stream_options
        with NO_TOKEN_COUNTING:
            # Straight to LiteLLM (langchain-litellm's client is the litellm module): its
            # tenacity wrapper would add nothing, retries are the graph's (max_retries=0).
            wrapper = await litellm.acompletion(messages=message_dicts, **params)
        raw = litellm_stream.lean_source(wrapper)
        try:
            async for message in _wrapped_chunks(wrapper) if raw is None else _ollama_chunks(raw):
                yield message
        except httpx.TimeoutException:
            raise  # the wrapper passes timeouts on unchanged too
        except Exception as err:
            if raw is None:
                raise
            litellm_stream.raise_mapped(wrapper, err)
        finally:
            # An answer cut short must not leave its HTTP response open.
            if raw is not None:
                await _close_stream(litellm_stream.response_of(raw))
            await _close_stream(wrapper)

    async def answer_chunks(
        self, messages: list[BaseMessage], **kwargs: Any
    ) -> AsyncIterator[AIMessageChunk]:
        """The chunks of one answer, without langchain's per-chunk callback machinery.

        BaseChatModel.astream wraps every chunk for callbacks and tracing (a run manager,
        an event per chunk, a merge of the whole answer for on_llm_end); nothing in this
        integration listens to them, and the graph merges the answer itself once.
        """
        if self._provider in LEAN_STREAM_PROVIDERS:
            async for message in self._lean_messages(messages, None, **kwargs):
                yield message
            return
        opened: list[Any] = []
        _OPEN_STREAMS.set(opened)
        try:
            async for generation in self._astream(messages, **kwargs):
                message = generation.message
                if generation.generation_info:
                    message.response_metadata = {
                        **generation.generation_info,
                        **message.response_metadata,
                    }
                yield message
        finally:
            _OPEN_STREAMS.set(None)
            for stream in opened:
                await _close_stream(stream)

    async def acompletion_with_retry(
        self, run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any
    ) -> Any:
        """LiteLLM's answer, remembered so `answer_chunks` can close its stream."""
        stream = await super().acompletion_with_retry(run_manager=run_manager, **kwargs)
        if (opened := _OPEN_STREAMS.get()) is not None:
            opened.append(stream)
        return stream


# The streams LiteLLM opened for the answer being read in this task. langchain-litellm's
# `_astream` never closes LiteLLM's stream wrapper, so an answer cut short (too long, past
# its deadline) would keep its HTTP response open, and the server generating, until the
# wrapper was garbage collected.
_OPEN_STREAMS: ContextVar[list[Any] | None] = ContextVar("langgraph_open_streams", default=None)


async def _close_stream(stream: Any) -> None:
    """Close a LiteLLM stream wrapper's HTTP response (a finished one: nothing to do)."""
    close = getattr(stream, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except Exception as err:  # noqa: BLE001  closing is best effort, never fatal
        _LOGGER.debug("Closing a model's stream failed: %s", err)


def answer_stream(model: Runnable, messages: list[BaseMessage]) -> AsyncIterator[AIMessageChunk]:
    """Stream `model`'s answer: a ChatModel (bound to tools or not) directly, else astream."""
    bound, kwargs = (
        (model.bound, model.kwargs) if isinstance(model, RunnableBinding) else (model, {})
    )
    if isinstance(bound, ChatModel):
        return bound.answer_chunks(messages, **kwargs)
    return model.astream(messages)


async def _wrapped_chunks(wrapper: Any) -> AsyncIterator[AIMessageChunk]:
    async for chunk in wrapper:
        if (message := _message_chunk(chunk)) is not None:
            yield message


async def _ollama_chunks(raw: Any) -> AsyncIterator[AIMessageChunk]:
    """Chunks of an Ollama /api/chat stream, as LiteLLM's parser would produce them."""
    async for item in litellm_stream.ollama_stream(raw):
        if isinstance(item, str):
            yield AIMessageChunk(content=item)
        elif (message := _message_chunk(item)) is not None:
            yield message


def _message_chunk(chunk: Any) -> AIMessageChunk | None:
    """One LiteLLM stream chunk as a LangChain chunk (None for keep-alive lines).

    Plain dicts and strings only, as langchain-litellm's own conversion leaves them, so
    checkpoints stay revivable under strict msgpack.
    """
    if not isinstance(chunk, ModelResponseStream) or not chunk.choices:
        return None
    choice = chunk.choices[0]
    delta = choice.delta
    additional: dict[str, Any] = {}
    if reasoning := getattr(delta, "reasoning_content", None):
        additional["reasoning_content"] = reasoning
    calls = []
    if delta.tool_calls:
        additional["tool_calls"] = [
            {
                "id": call.id,
                "function": {"arguments": call.function.arguments, "name": call.function.name},
                "type": call.type or "function",
                "index": call.index,
            }
            for call in delta.tool_calls
        ]
        calls = [
            tool_call_chunk(
                name=call["function"]["name"],
                args=call["function"]["arguments"],
                id=call["id"],
                index=call["index"],
            )
            for call in additional["tool_calls"]
        ]
    message = AIMessageChunk(
        content=delta.content or "", additional_kwargs=additional, tool_call_chunks=calls
    )
    usage = getattr(chunk, "usage", None)
    if choice.finish_reason and usage is not None and usage.total_tokens:
        message.usage_metadata = lc_messages.UsageMetadata(
            input_tokens=usage.prompt_tokens or 0,
            output_tokens=usage.completion_tokens or 0,
            total_tokens=(usage.prompt_tokens or 0) + (usage.completion_tokens or 0),
        )
    return message


def build_chat_model(access: ModelAccess, settings: ModelSettings) -> ChatLiteLLM:
    """Create the LangChain chat model for one agent (done once per configuration)."""
    extra: dict[str, Any] = {}
    if settings.temperature is not None:
        extra["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        extra["max_tokens"] = settings.max_tokens
    return ChatModel(
        model=access.model,
        api_key=access.request_key,
        api_base=access.api_base,
        request_timeout=settings.request_timeout,
        streaming=True,
        # Retries are the runtime's decision, not a hidden loop inside a client: 0 for
        # langchain-litellm's tenacity loop, and (via model_kwargs) 0 for the provider
        # SDK's own retries, which would otherwise repeat a failed call twice.
        max_retries=0,
        model_kwargs={"max_retries": 0, **ollama_options(access, settings)},
        **extra,
    )


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


class _TokenCountingPause:
    """LiteLLM's token counting, off while lean-stream calls are being set up.

    For every streamed call LiteLLM estimates a cost by counting the prompt's tokens
    with tiktoken, on the event loop: work nobody reads for a local model, and the only
    reason the default encoding would be built. `litellm.disable_token_counter` is
    LiteLLM's documented switch for it, but a process-wide one; so it is on only while
    a lean call is inside `litellm.acompletion` (where the estimate happens), and
    restored when the last such call is through. Re-entrant and thread-safe: turns
    overlap on the loop, and the warm-up runs in the executor.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._previous = False

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._previous = litellm.disable_token_counter
                litellm.disable_token_counter = True
            self._depth += 1

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                litellm.disable_token_counter = self._previous


NO_TOKEN_COUNTING = _TokenCountingPause()


def warm_up(access: ModelAccess) -> None:
    """Run LiteLLM's first-call lazy imports once, off the event loop.

    The first real request would otherwise import the provider's transformation modules
    and set up the tokenizer on the event loop, which Home Assistant reports as blocking.
    A mock response exercises the same code paths without any network traffic.
    """
    register_local_model(access)
    lean = provider_of(access.model) in LEAN_STREAM_PROVIDERS
    if lean:
        # LiteLLM's default encoding, built only if something uses it (upstream/litellm_lazy.py).
        litellm_lazy.spare_default_encoding()
    with NO_TOKEN_COUNTING if lean else contextlib.nullcontext():
        stream = litellm.completion(
            model=access.model,
            messages=[{"role": "user", "content": "hi"}],
            mock_response="ok",
            stream=True,
        )
        for _chunk in stream:
            pass
    if not lean:
        # LiteLLM's stream wrapper counts the answer's tokens when a stream ends without
        # usage, with the model's own encoding (o200k for OpenAI's): built here, off the
        # loop (0.7 s, ~70 MB).
        litellm.token_counter(model="gpt-4o", text="warm up")
    # LiteLLM's lazy module attributes, resolved here once instead of on the loop at the
    # first failure (upstream/litellm_lazy.py).
    litellm_lazy.resolve_lazy_attributes(litellm_lazy.TOKENIZER_ATTRIBUTES if lean else ())
    # langchain-core does the same for its packages' attributes (binding tools imports
    # langchain_core.tools.simple on first use); resolve those too.
    for package in (lc_tools, lc_messages, lc_function_calling):
        for name in getattr(package, "__all__", ()):
            getattr(package, name)
    build_chat_model(access, ModelSettings()).bind_tools([_WARM_UP_TOOL])
    # openai 3.26 (Home Assistant 2026.11's pin) imports its API resources lazily: the
    # client's first request resolves `from .resources.chat import AsyncChat` through the
    # package's __getattr__ and a relative import_module, on the event loop. Resolving
    # the packages' exports here caches them; earlier versions import them eagerly.
    for package in ("openai.resources.chat", "openai.resources.chat.completions"):
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            getattr(module, name)
    # What the (first) warm-up imported lives as long as the process too.
    heap.freeze_after_first_warm_up()
    _WARMED_PROVIDERS.add(provider_of(access.model))


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
    lean = provider_of(access.model) in LEAN_STREAM_PROVIDERS
    try:
        # As in a turn, no token estimate for a lean provider: it would build the default
        # encoding on the event loop (warm_up spares it for those providers).
        async with SHARED_CLIENT_USERS.use():
            with NO_TOKEN_COUNTING if lean else contextlib.nullcontext():
                await litellm.acompletion(
                    **access.litellm_kwargs(),
                    messages=[{"role": "user", "content": "Reply with OK."}],
                    max_tokens=5,
                    timeout=timeout,
                    num_retries=0,
                )
    except Exception as err:  # noqa: BLE001  every failure becomes a typed ModelError
        error = to_model_error(err, access)
        if access.request_key is None and await asyncio.to_thread(_lacks_key, access):
            # LiteLLM refuses a call without the provider's key before sending it, and
            # reports that in the provider's own words: an AuthenticationError with status
            # 500 from the OpenAI SDK, a 401 for Anthropic. Neither server was contacted.
            raise ModelError(ModelErrorKind.MISSING_KEY, error.detail) from None
        raise error from None


def _lacks_key(access: ModelAccess) -> bool:
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
    still running on them finishes first (agent/client_users.py).
    """
    async with SHARED_CLIENT_USERS.closing():
        await litellm_release.close_shared_clients()
