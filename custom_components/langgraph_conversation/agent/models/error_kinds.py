"""A failed model call in terms a user can act on: the error's kind from LiteLLM's,
the SDK's and the provider's exceptions, whether and when to retry, secrets removed."""

from __future__ import annotations

import functools
import sys
from types import ModuleType

import aiohttp
import httpx

from ..errors import ModelError, ModelErrorKind
from ..guard import SECRET_FILTER
from .access import ModelAccess
from .ollama_wire import OllamaAnswerError

# LiteLLM's and the OpenAI SDK's exceptions are looked up where they are loaded: an
# Ollama setup imports neither (chat.py), and an exception of a library that was never
# imported cannot have been raised.
_NOTHING: tuple[type[BaseException], ...] = ()


def _loaded(name: str) -> ModuleType | None:
    return sys.modules.get(name)


@functools.cache
def _litellm_kinds(litellm: ModuleType) -> tuple[tuple[type[BaseException], ModelErrorKind], ...]:
    # Most specific first: LiteLLM's exception classes inherit from each other
    # (e.g. Timeout and ServiceUnavailableError both derive from APIConnectionError or
    # APIError depending on the provider path).
    return (
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


def _error_kinds() -> tuple[tuple[type[BaseException], ModelErrorKind], ...]:
    litellm = _loaded("litellm")
    return _litellm_kinds(litellm) if litellm is not None else ()


def _litellm_classes(*names: str) -> tuple[type[BaseException], ...]:
    litellm = _loaded("litellm")
    return tuple(getattr(litellm, name) for name in names) if litellm is not None else _NOTHING


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


# aiohttp's timeouts (the native Ollama model's) are TimeoutErrors.
_TIMEOUTS = (httpx.TimeoutException, TimeoutError)
# A transport that really failed (refused, reset, cut mid-stream, no usable address)...
_TRANSPORT_FAILURES = (
    httpx.TransportError,
    ConnectionError,
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
    aiohttp.InvalidURL,
)


def _timeouts() -> tuple[type[BaseException], ...]:
    openai = _loaded("openai")
    return (*_TIMEOUTS, openai.APITimeoutError) if openai is not None else _TIMEOUTS


def _connection_wrappers() -> tuple[type[BaseException], ...]:
    """LiteLLM's generic wrapper (the SDK's class), which it also used for Ollama's HTTP
    errors, as opposed to a transport that really failed."""
    openai = _loaded("openai")
    return (openai.APIConnectionError,) if openai is not None else _NOTHING


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
    openai = _loaded("openai")
    return openai is not None and type(exc) is openai.APIConnectionError


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
    window_errors = _litellm_classes("ContextWindowExceededError")
    bad_requests = _litellm_classes("BadRequestError")
    for exc in chain:
        if isinstance(exc, window_errors):
            return True
        if getattr(exc, "status_code", None) == 400 or isinstance(exc, bad_requests):
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
    timeouts = _timeouts()
    if any(isinstance(exc, timeouts) for exc in chain):
        return ModelErrorKind.TIMEOUT
    if any(isinstance(exc, _TRANSPORT_FAILURES) or _sdk_got_no_answer(exc) for exc in chain):
        return ModelErrorKind.CONNECTION
    if _is_window_error(chain):
        return ModelErrorKind.CONTEXT_WINDOW
    if (status := _provider_status(chain)) is not None:
        return _kind_from_status(status) or ModelErrorKind.UNKNOWN
    wrappers = _connection_wrappers()
    if any(isinstance(exc, wrappers) for exc in chain):
        return ModelErrorKind.CONNECTION
    status = getattr(err, "status_code", None)
    if isinstance(status, int) and status >= 400:
        return _kind_from_status(status) or ModelErrorKind.UNKNOWN
    for exc_type, kind in _error_kinds():
        if isinstance(err, exc_type):
            return kind
    if isinstance(err, OllamaAnswerError):
        # An error line mid-answer (the model's runner failed): the server's own failure.
        return ModelErrorKind.SERVER
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
        or getattr(err, "headers", None)
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
