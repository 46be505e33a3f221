"""Keeping secrets out of everything a person may read or paste: logs, diagnostics, errors.

Two kinds of secret are removed, wherever text leaves the integration:

- Secrets this process was given: API keys, and the credentials inside configured base
  URLs (the password of `http://user:password@host`, a token-like user, the values of
  query parameters such as `?api_key=`). Each is registered in the forms a library may
  print it in (as typed, percent-decoded, percent-encoded, and the Basic authorization
  header httpx builds from a URL's user and password), so it is caught however it shows.
- Credentials in any URL, known or not: the user info of `scheme://user:pass@host` and the
  values of secret-looking query parameters, matched by pattern. A provider or proxy may
  echo a URL nobody registered (a redirect, another entry's server).

One filter does both. It sits on the loggers of LiteLLM, httpx, httpcore, the OpenAI
SDK, aiohttp, LangChain/LangGraph and this integration: at DEBUG, LiteLLM logs every call
with its arguments (`api_key=`, `api_base=`) and a curl line, the OpenAI SDK and httpx log
each request's full URL, and Home Assistant users turn DEBUG on to report problems and
paste the log into public issues. A logger's filter only sees records logged to that very
logger, not those of its children, so `install_redaction` attaches it to every existing logger of
those libraries and to the child loggers they create later by fixed names. Loggers run
filters after the level check, so the filter only costs anything when a line is emitted.

Images are kept out the same way: a base64 image data URL (a camera snapshot on its way to
the model that looks, an AI Task's attachment) is cut to its type wherever the filter
runs, since LiteLLM's curl line and the OpenAI SDK's request options at DEBUG carry the
whole request body, and a camera's picture of the home has no place in a pasted log.

The same redaction (`redact`, `redact_data`) serves diagnostics, activity events and
traces, and the error texts that reach logs, threads and people.

Limits, on purpose: a registered secret shorter than 8 characters is only caught inside a
URL (replacing a short word everywhere would mangle ordinary text), and a URL's user name
alone stays when it reads like a person's name (`admin@`, `alice@`), not a token.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
import logging
import re
import threading
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit

PLACEHOLDER = "**REDACTED**"
# LiteLLM's loggers (its SDK, router and proxy parts log under these exact names).
LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
# Loggers created by fixed name, some only on first use (httpcore's on the first
# connection): created here so they exist with the filter from the start.
_NAMED_LOGGERS = (
    *LITELLM_LOGGERS,
    "httpx",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "openai",
    "openai._base_client",
    "aiohttp.access",
    "aiohttp.client",
    "aiohttp.internal",
    "aiohttp.server",
    "aiohttp.web",
    "aiohttp.websocket",
)
# This integration's own package ("custom_components.langgraph_conversation").
_OWN_PACKAGE = __name__.rsplit(".", 3)[0]
# Every logger under these names gets the filter (module loggers, `getLogger(__name__)`).
_LOGGER_PREFIXES = (
    "litellm",
    "httpx",
    "httpcore",
    "openai",
    "aiohttp",
    "langchain",
    "langchain_core",
    "langchain_litellm",
    "langgraph",
    # psycopg and its pool (PostgreSQL storage): their lines may quote a connection.
    "psycopg",
    _OWN_PACKAGE,
)
# Shorter strings are no keys, and replacing them would mangle ordinary words.
_MIN_SECRET_LENGTH = 8

# Query parameters that carry credentials (compared case-insensitively).
SECRET_QUERY_KEYS = frozenset(
    {
        "key",
        "api_key",
        "apikey",
        "api-key",
        "x-api-key",
        "token",
        "access_token",
        "auth_token",
        "refresh_token",
        "id_token",
        "auth",
        "password",
        "passwd",
        "pwd",
        "secret",
        "client_secret",
        "sig",
        "signature",
    }
)

# `://userinfo@` (`:\/\/` too, as JSON may escape the slashes); matching from the "://"
# rather than the scheme keeps a long log line cheap (few places to start a match). The
# user info runs to the last "@" before the host's end, so a password with an unencoded
# "@" is whole.
_URL_USER_INFO = re.compile(r"(?P<scheme>:(?:\\?/){2})(?P<userinfo>[^\s/?#'\"<>\\]+)@")
_URL_SECRET_QUERY = re.compile(
    r"(?P<name>[?&;](?:"
    + "|".join(re.escape(key) for key in sorted(SECRET_QUERY_KEYS, key=len, reverse=True))
    + r")=)(?P<value>[^&#\s'\"<>\\]+)",
    re.IGNORECASE,
)


# An image as a data URL: its type stays, its bytes go (JSON or a repr may escape the
# slashes of base64 with a backslash). One character class: a snapshot is a megabyte.
_IMAGE_DATA_URL = re.compile(r"(?P<head>data:image\\?/[\w.+-]+;base64,)[A-Za-z0-9+/=\\]+")
IMAGE_PLACEHOLDER = "**IMAGE**"


def redact_images(text: str) -> str:
    """`text` with the bytes of every base64 image data URL replaced."""
    if "base64," not in text:
        return text
    return _IMAGE_DATA_URL.sub(lambda match: f"{match['head']}{IMAGE_PLACEHOLDER}", text)


def looks_like_token(text: str) -> bool:
    """Whether a URL's user name is more likely a credential than a person's name.

    Long, or mixing letters and digits (`sk-abc123…`, `ghp_…`): people's user names
    (`alice`, `admin`) stay readable in logs and diagnostics.
    """
    text = unquote(text)
    if len(text) >= 20:
        return True
    return (
        len(text) >= _MIN_SECRET_LENGTH
        and any(char.isdigit() for char in text)
        and any(char.isalpha() for char in text)
    )


def _redacted_user_info(match: re.Match[str]) -> str:
    user, colon, _password = match["userinfo"].partition(":")
    if colon and not looks_like_token(user):
        # The person's name helps a bug report; only what follows it is secret.
        return f"{match['scheme']}{user}:{PLACEHOLDER}@"
    if not colon and not looks_like_token(user):
        return match[0]
    return f"{match['scheme']}{PLACEHOLDER}@"


def redact_url_credentials(text: str) -> str:
    """`text` with the credentials of every URL in it replaced (known or not)."""
    if "@" in text and ("://" in text or ":\\/\\/" in text):
        text = _URL_USER_INFO.sub(_redacted_user_info, text)
    if "=" in text:
        text = _URL_SECRET_QUERY.sub(lambda match: f"{match['name']}{PLACEHOLDER}", text)
    return text


def url_secrets(url: str | None) -> Iterator[str]:
    """The credentials a URL carries: password, token-like user, secret query values."""
    if not url:
        return
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        # Not parseable as a URL (an odd IPv6 literal): the pattern still applies.
        parts = None
    netloc = parts.netloc if parts else ""
    user_info, at, _host = netloc.rpartition("@")
    if at:
        user, colon, password = user_info.partition(":")
        if colon:
            yield password
        if looks_like_token(user):
            yield user
        if password or looks_like_token(user):
            # httpx sends a URL's user and password as a Basic authorization header.
            pair = f"{unquote(user)}:{unquote(password)}"
            yield base64.b64encode(pair.encode()).decode()
    for pair in re.split("[&;]", parts.query if parts else ""):
        name, equals, value = pair.partition("=")
        if equals and unquote_plus(name).lower() in SECRET_QUERY_KEYS:
            yield value


def _forms(secret: str) -> set[str]:
    """A secret as typed and in the encodings a library may print it in."""
    decoded = unquote(secret)
    return {
        secret,
        decoded,
        unquote_plus(secret),
        quote(decoded, safe=""),
        quote_plus(decoded, safe=""),
    }


class SecretRedactingFilter(logging.Filter):
    """Replaces known secrets and URL credentials in a record (message and traceback)."""

    def __init__(self) -> None:
        super().__init__()
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets: tuple[str, ...] = ()
        self._known: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def add(self, secret: str | None) -> None:
        """Redact `secret` (and its encoded forms) from now on."""
        if not secret:
            return
        forms = {form for form in _forms(secret) if len(form) >= _MIN_SECRET_LENGTH}
        if forms <= self._known:
            return
        with self._lock:
            self._known = self._known | forms
            self._secrets = tuple(sorted(self._known, key=lambda text: (-len(text), text)))

    def add_url(self, url: str | None) -> None:
        """Redact the credentials inside a configured base URL from now on."""
        for secret in url_secrets(url):
            self.add(secret)

    def redact(self, text: str) -> str:
        """`text` with every known secret, every URL's credentials and every image's
        bytes replaced."""
        text = redact_images(text)
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, PLACEHOLDER)
        return redact_url_credentials(text)

    def redact_data(self, data: Any) -> Any:
        """A copy of JSON-like data (dicts, lists, strings) with every string redacted."""
        if isinstance(data, str):
            return self.redact(data)
        if isinstance(data, dict):
            return {key: self.redact_data(value) for key, value in data.items()}
        if isinstance(data, list | tuple):
            return [self.redact_data(value) for value in data]
        return data

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record in place if it holds a secret; never drop it."""
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001  a broken record is the handler's to report
            return True
        redacted = self.redact(message)
        if redacted != message:
            record.msg = redacted
            record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            text = record.exc_text or _TRACEBACKS.formatException(record.exc_info)
            if (redacted := self.redact(text)) != text:
                # Handlers format `exc_text` when present; the exception itself (which
                # a handler could print again) is dropped as it holds the secret.
                record.exc_text = redacted
                record.exc_info = None
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


SECRET_FILTER = SecretRedactingFilter()
# Formats a record's traceback as handlers' formatters do.
_TRACEBACKS = logging.Formatter()


def _redacted_logger_names() -> set[str]:
    existing = [
        name
        for name in list(logging.root.manager.loggerDict)
        if any(name == prefix or name.startswith(f"{prefix}.") for prefix in _LOGGER_PREFIXES)
    ]
    return {*_NAMED_LOGGERS, *_LOGGER_PREFIXES, *existing}


def install_redaction() -> None:
    """Attach the filter to every logger it covers that exists now (idempotent).

    Called when the agent package is imported and again when an entry is set up, when
    the libraries' and the integration's modules (and their loggers) are all loaded.
    """
    for name in _redacted_logger_names():
        logger = logging.getLogger(name)
        if SECRET_FILTER not in logger.filters:
            logger.addFilter(SECRET_FILTER)


def redact(text: str) -> str:
    """`text` without known secrets or URL credentials."""
    return SECRET_FILTER.redact(text)


def redact_data(data: Any) -> Any:
    """JSON-like data without known secrets or URL credentials in any string."""
    return SECRET_FILTER.redact_data(data)
