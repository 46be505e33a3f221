"""Credentials in base URLs never show: not in diagnostics, logs, activity, threads or errors.

A base URL may carry a password (`http://user:password@host`), a token as its user name,
or a key in its query (`?api_key=`). The URLs are generated (schemes, hosts with and
without a port, IPv6, user and password, percent-encoded passwords, token-like users,
secret query keys in several casings, fragments) and sent through every sink: the
redaction itself, diagnostics of the entry and of the agents' fast and fallback models
and the embedding model, and real turns through LiteLLM's client against the fake server
with DEBUG logging on (LiteLLM, httpx, httpcore, openai), with the activity events,
traces, threads.db and what the person is told. Every check also asserts that the host
is still there, so the redaction is not just deleting everything.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
import itertools
import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_capture_events

from custom_components.langgraph_conversation.activity import TRACE_KEY
from custom_components.langgraph_conversation.agent.guard import PLACEHOLDER
from custom_components.langgraph_conversation.agent.guard.redaction import SecretRedactingFilter
from custom_components.langgraph_conversation.config_flow import DEFAULT_AGENT_OPTIONS
from custom_components.langgraph_conversation.const import (
    CONF_ACTIVITY_CONTENTS,
    CONF_API_BASE,
    CONF_API_KEY,
    CONF_CHECKPOINTS_KEPT,
    CONF_EMBEDDING_API_BASE,
    CONF_EMBEDDING_API_KEY,
    CONF_EMBEDDING_MODEL,
    CONF_FALLBACK_MODEL,
    CONF_FAST_MODEL,
    CONF_MODEL,
    CONF_MODEL_RETRIES,
    CONF_THREAD_IDLE_DAYS,
    CONF_VISION_MODEL,
    DOMAIN,
    EVENT_ACTIVITY,
    SUBENTRY_CONVERSATION,
)
from custom_components.langgraph_conversation.diagnostics import (
    async_get_config_entry_diagnostics,
)

# PostgreSQL storage's module, for its libraries' loggers (psycopg, psycopg.pool).
import custom_components.langgraph_conversation.storage.postgres  # noqa: F401
from fakes import FakeOpenAIServer
from homeassistant import config_entries
from homeassistant.components import conversation
from homeassistant.components.conversation.trace import async_get_traces
from homeassistant.config_entries import ConfigSubentryData
from homeassistant.core import Context, HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.setup import async_setup_component

from .conftest import TEST_MODEL, add_test_entry, agent_entity_id

# The libraries on a model call's path, and ours.
WATCHED_LOGGERS = (
    "LiteLLM",
    "httpx",
    "httpcore",
    "openai",
    "aiohttp",
    "custom_components.langgraph_conversation",
)

# Query keys that carry credentials, as the issue lists them.
QUERY_KEYS = ("key", "api_key", "apikey", "token", "access_token", "password", "secret", "sig")
CASINGS = (str.lower, str.upper, str.title)
USER_INFOS = (None, "user_password", "encoded_password", "token_user", "token_user_password")
HOSTS = ("127.0.0.1", "[::1]", "models.example.lan")
SCHEMES = ("http", "https")


def _basic(user: str, password: str) -> str:
    """The Authorization header value httpx builds from a URL's user and password."""
    return base64.b64encode(f"{user}:{password}".encode()).decode()


@dataclass(frozen=True, slots=True)
class UrlShape:
    """One generated base URL, built for a port only known at run time."""

    number: int
    scheme: str
    host: str
    with_port: bool
    user_info: str | None
    query_key: str | None
    fragment: bool

    @property
    def label(self) -> str:
        """A readable test id."""
        parts = [
            self.scheme,
            "ipv6" if self.host.startswith("[") else self.host.split(".")[0],
            "port" if self.with_port else "noport",
            self.user_info or "nouser",
            f"q-{self.query_key}" if self.query_key else "noquery",
        ]
        if self.fragment:
            parts.append("frag")
        return "-".join(parts)

    def build(self, port: int = 8080, path: str = "/v1") -> CredentialUrl:
        """The URL, the secrets it carries and the part that must still show."""
        n = self.number
        password = f"Pw{n:04d}xQz9"
        token = f"tok{n:04d}Kq7userTk"
        # Whole values as a library may print them, and what must never show (the same,
        # except that for an encoded password its distinctive core must not show either).
        values: list[str] = []
        user_info = ""
        match self.user_info:
            case "user_password":
                user_info = f"alice:{password}@"
                values += [password, _basic("alice", password)]
            case "encoded_password":
                # "@", "/" and ":" inside a password, percent-encoded as RFC 3986 wants.
                raw = f"p@ss/{password}:"
                user_info = f"alice:{quote(raw, safe='')}@"
                values += [raw, _basic("alice", raw)]
            case "token_user":
                user_info = f"{token}@"
                values += [token, _basic(token, "")]
            case "token_user_password":
                user_info = f"{token}:{password}@"
                values += [token, password, _basic(token, password)]
        query = ""
        if self.query_key:
            value = f"Qv{n:04d}%2BxQz9"
            query = f"?{self.query_key}={value}&lang=en"
            values += [value, value.replace("%2B", "+")]
        secrets = [*values, password] if self.user_info == "encoded_password" else values
        host = f"{self.host}:{port}" if self.with_port else self.host
        fragment = "#section-2" if self.fragment else ""
        return CredentialUrl(
            f"{self.scheme}://{user_info}{host}{path}{query}{fragment}",
            tuple(values),
            tuple(secrets),
            host,
        )


@dataclass(frozen=True, slots=True)
class CredentialUrl:
    """A URL with credentials: what must never show, and what must still show."""

    url: str
    values: tuple[str, ...]
    secrets: tuple[str, ...]
    shown: str

    def assert_hidden_in(self, text: str, where: str) -> None:
        """No secret of the URL in `text`."""
        for secret in self.secrets:
            assert secret not in text, f"{secret!r} of {self.url} shows in {where}"

    def assert_redacted_in(self, text: str, where: str) -> None:
        """No secret in `text`, and the host (and the placeholder) still there."""
        self.assert_hidden_in(text, where)
        assert self.shown in text, f"{self.shown!r} of {self.url} is gone from {where}"
        assert PLACEHOLDER in text, f"nothing of {self.url} was redacted in {where}"


def _all_shapes() -> list[UrlShape]:
    """Every combination that carries at least one secret."""
    queries: list[str | None] = [None]
    queries += [casing(key) for key in QUERY_KEYS for casing in CASINGS]
    shapes = []
    combinations = itertools.product(
        SCHEMES, HOSTS, (True, False), USER_INFOS, queries, (False, True)
    )
    for scheme, host, with_port, user_info, query_key, fragment in combinations:
        if user_info is None and query_key is None:
            continue
        shapes.append(
            UrlShape(len(shapes), scheme, host, with_port, user_info, query_key, fragment)
        )
    return shapes


ALL_SHAPES = _all_shapes()


def _sample(shapes: list[UrlShape], count: int) -> list[UrlShape]:
    """`count` shapes spread evenly over the list (every dimension varies)."""
    stride = max(1, len(shapes) // count)
    return shapes[::stride][:count]


# -- the redaction itself, over every generated URL ---------------------------------

# How libraries print a base URL: as is, in a repr of call arguments, in LiteLLM's curl
# line, with the OpenAI SDK's path appended (after the query!), in httpx's request line,
# JSON-escaped.
CONTEXTS = {
    "plain": "{url}",
    "repr": "litellm.acompletion(model='openai/x', api_base='{url}', timeout=3)",
    "curl": "curl -X POST \\\n{url}/chat/completions \\\n-H 'Authorization: Be****jk'",
    "sdk_path": "Sending HTTP Request: POST {url}/chat/completions",
    "httpx": 'HTTP Request: POST {url}/chat/completions "HTTP/1.1 401 Unauthorized"',
    "json": '{{"api_base": "{escaped}"}}',
}


ORDINARY_TEXTS = (
    "Write to alice@example.com about http://127.0.0.1:8080/v1",
    "http://alice@models.example.lan/v1?lang=en&monkey=1#section-2",
    "https://[::1]:11434/api/chat?stream=true",
    "key=value outside a URL, keyboard, token bucket",
)


@pytest.mark.parametrize("context", CONTEXTS)
def test_credentials_of_any_url_are_redacted(context: str) -> None:
    """Pattern alone (nothing registered): every generated URL loses its secrets only."""
    redactor = SecretRedactingFilter()
    for shape in ALL_SHAPES:
        credential = shape.build()
        text = CONTEXTS[context].format(
            url=credential.url, escaped=credential.url.replace("/", "\\/")
        )
        redacted = redactor.redact(text)
        credential.assert_redacted_in(redacted, f"{context} ({shape.label})")
        if shape.query_key:
            assert "lang=en" in redacted, shape.label
        if shape.user_info in ("user_password", "encoded_password"):
            # A person's user name is no secret and helps a bug report.
            assert f"alice:{PLACEHOLDER}@" in redacted, shape.label
    # Only credentials go: mail addresses, plain URLs, a person's user name alone and
    # harmless parameters stay as they are.
    for text in ORDINARY_TEXTS:
        assert redactor.redact(text) == text


@pytest.mark.parametrize("user_info", [kind for kind in USER_INFOS if kind] + ["query"])
def test_registered_url_secrets_are_caught_in_any_form(user_info: str) -> None:
    """A configured URL's secrets are caught alone too: decoded, encoded, in a Basic header."""
    shapes = [
        shape
        for shape in ALL_SHAPES
        if (shape.user_info == user_info and not shape.query_key)
        or (user_info == "query" and shape.query_key and not shape.user_info)
    ]
    assert shapes
    for shape in shapes:
        redactor = SecretRedactingFilter()
        credential = shape.build()
        redactor.add_url(credential.url)
        for value in credential.values:
            for form in {value, quote(value, safe=""), value.replace("%2B", "+")}:
                text = f"Authorization: Basic {form}; password={form!r}; token {form} used"
                credential.assert_hidden_in(redactor.redact(text), f"{form!r} ({shape.label})")


# -- diagnostics ------------------------------------------------------------------------

DIAGNOSTICS_CASES = _sample(ALL_SHAPES, 48)


@pytest.mark.parametrize(
    "index", range(len(DIAGNOSTICS_CASES)), ids=lambda i: DIAGNOSTICS_CASES[i].label
)
async def test_diagnostics_hide_url_credentials_of_every_model(
    hass: HomeAssistant, index: int
) -> None:
    """Entry, fast model, fallback model, vision model and embedding model: five URLs,
    none readable."""
    # Five different shapes, one per place, so each place sees every kind across cases.
    entry_url, fast_url, fallback_url, embedding_url, vision_url = (
        ALL_SHAPES[(ALL_SHAPES.index(DIAGNOSTICS_CASES[index]) + step * 7) % len(ALL_SHAPES)].build(
            port=8000 + step
        )
        for step in range(5)
    )
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=f"openai/{TEST_MODEL}",
        data={CONF_MODEL: f"openai/{TEST_MODEL}", CONF_API_BASE: entry_url.url},
        options={
            CONF_CHECKPOINTS_KEPT: 3,
            CONF_THREAD_IDLE_DAYS: 30,
            CONF_EMBEDDING_MODEL: "openai/embed-test",
            CONF_EMBEDDING_API_BASE: embedding_url.url,
        },
        subentries_data=[
            ConfigSubentryData(
                data={
                    **DEFAULT_AGENT_OPTIONS,
                    CONF_FAST_MODEL: {CONF_MODEL: "openai/fast", CONF_API_BASE: fast_url.url},
                    CONF_FALLBACK_MODEL: {
                        CONF_MODEL: "ollama_chat/backup",
                        CONF_API_BASE: fallback_url.url,
                    },
                    CONF_VISION_MODEL: {
                        CONF_MODEL: "ollama_chat/llava",
                        CONF_API_BASE: vision_url.url,
                    },
                },
                subentry_type=SUBENTRY_CONVERSATION,
                title="Agent",
                unique_id=None,
            )
        ],
    )
    entry.add_to_hass(hass)
    diagnostics = await async_get_config_entry_diagnostics(hass, entry)
    places = {
        "entry": diagnostics["entry"]["data"],
        "embedding": diagnostics["entry"]["options"],
        "fast": diagnostics["agents"][0]["options"][CONF_FAST_MODEL],
        "fallback": diagnostics["agents"][0]["options"][CONF_FALLBACK_MODEL],
        "vision": diagnostics["agents"][0]["options"][CONF_VISION_MODEL],
    }
    dumped = json.dumps(diagnostics)
    for place, credential in zip(
        places, (entry_url, embedding_url, fast_url, fallback_url, vision_url), strict=True
    ):
        credential.assert_hidden_in(dumped, "diagnostics")
        credential.assert_redacted_in(json.dumps(places[place]), f"diagnostics' {place}")


# -- every logger the filter covers -----------------------------------------------------

# Logger name prefixes of the libraries on a model call's path and of this integration.
COVERED_PACKAGES = (
    "LiteLLM",
    "LiteLLM Router",
    "LiteLLM Proxy",
    "litellm",
    "httpx",
    "httpcore",
    "openai",
    "aiohttp",
    "langchain",
    "langchain_core",
    "langchain_litellm",
    "langgraph",
    "psycopg",
    "custom_components.langgraph_conversation",
)


class ProxyRefused(Exception):
    """An exception whose text carries a URL, as a library's exception may."""


async def test_every_logger_of_ours_and_the_libraries_redacts(
    hass: HomeAssistant, openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """After setup, a line with a credential URL logged to any existing logger of LiteLLM,
    httpx, httpcore, openai, aiohttp, LangChain, LangGraph or ours, with a traceback that
    quotes it, is printed redacted."""
    entry = add_test_entry(hass, openai_server.api_base, DEFAULT_AGENT_OPTIONS)
    await _setup(hass, entry)
    names = sorted(
        name
        for name in list(logging.root.manager.loggerDict)
        if any(name == package or name.startswith(f"{package}.") for package in COVERED_PACKAGES)
    )
    assert "httpcore.connection" in names
    # PostgreSQL storage's libraries (imported by this module) are covered too.
    assert "psycopg.pool" in names
    assert "custom_components.langgraph_conversation.conversation" in names
    shapes = _sample(ALL_SHAPES, len(names))
    formatter = logging.Formatter("%(name)s %(message)s")
    for name, shape in zip(names, itertools.cycle(shapes), strict=False):
        credential = shape.build()
        logger = logging.getLogger(name)
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger=name):
            try:
                raise ProxyRefused(f"refused {credential.url}")
            except ProxyRefused:
                logger.warning("Calling %s failed", credential.url, exc_info=True)
        records = [record for record in caplog.records if record.name == name]
        assert records, f"{name}'s line never reached a handler"
        text = "\n".join(formatter.format(record) for record in records)
        credential.assert_redacted_in(text, f"logger {name}")
        assert "ProxyRefused" in text, f"the traceback of {name}'s line is gone"


# -- real calls through LiteLLM: logs, activity, traces, threads, the spoken error ----


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """DEBUG for LiteLLM, httpx, httpcore, the OpenAI SDK, aiohttp and ours."""
    for name in WATCHED_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def _watched(name: str) -> bool:
    return any(name == prefix or name.startswith(f"{prefix}.") for prefix in WATCHED_LOGGERS)


def _log_text(caplog: pytest.LogCaptureFixture) -> str:
    """The watched loggers' lines as handlers print them, tracebacks included.

    (Not Home Assistant's own lines: its chat log logs the conversation's content, which
    in the "answers" case repeats the URL on purpose.)
    """
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    lines = [formatter.format(record) for record in caplog.records if _watched(record.name)]
    assert lines, "nothing was logged: the check would see nothing"
    return "\n".join(lines)


def _stored_bytes(hass: HomeAssistant) -> str:
    """threads.db and memory.db (with their journals), as text."""
    folder = Path(hass.config.path(DOMAIN))
    return "\n".join(path.read_bytes().decode("latin-1") for path in sorted(folder.glob("*.db*")))


async def _setup(hass: HomeAssistant, entry: MockConfigEntry) -> None:
    assert await async_setup_component(hass, "homeassistant", {})
    assert await async_setup_component(hass, "conversation", {})
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()


def _turn_shapes(**fixed: Any) -> list[UrlShape]:
    """Shapes with the given fixed dimensions, one per remaining user-info/query kind."""
    return [
        shape
        for shape in ALL_SHAPES
        if all(getattr(shape, name) == value for name, value in fixed.items())
    ]


# The server answers (user info only: a query in a base URL breaks the SDK's path).
ANSWERS = _turn_shapes(scheme="http", host="127.0.0.1", with_port=True, query_key=None)
# Queries: the server's router answers 404 to the broken path, after httpx logged it.
QUERY_PATHS = _sample(
    [s for s in _turn_shapes(scheme="http", host="127.0.0.1", with_port=True) if s.query_key],
    8,
)
# Nothing listens on ::1 (the fakes are on 127.0.0.1); TLS to a plain HTTP server fails.
DOWN = _sample(
    _turn_shapes(scheme="http", host="[::1]", with_port=True, fragment=False)
    + _turn_shapes(scheme="https", host="127.0.0.1", with_port=True, fragment=False),
    6,
)


@dataclass(frozen=True, slots=True)
class TurnCase:
    """A turn against a credential URL and how the server treats it."""

    shape: UrlShape
    outcome: str  # answers, refuses (an error echoing the URL), not_found, down

    @property
    def label(self) -> str:
        return f"{self.outcome}-{self.shape.label}"


TURN_CASES = [
    *(TurnCase(shape, "answers") for shape in ANSWERS),
    *(TurnCase(shape, "refuses") for shape in ANSWERS if not shape.fragment),
    *(TurnCase(shape, "not_found") for shape in QUERY_PATHS),
    *(TurnCase(shape, "down") for shape in DOWN),
]


def _check_generation_covers_every_dimension() -> None:
    """Every outcome, scheme, IPv6, user-info kind, query and fragment is exercised by the
    real turns, every query key by the URLs (checked at import: a change to the
    generators that drops a dimension fails the whole module)."""
    covered: set[str | None] = set()
    for case in TURN_CASES:
        shape = case.shape
        covered |= {case.outcome, shape.scheme, shape.host, shape.user_info}
        covered |= {"query" if shape.query_key else "noquery"}
        covered |= {"fragment" if shape.fragment else "nofragment"}
    expected = {"answers", "refuses", "not_found", "down", "http", "https", "[::1]", None}
    expected |= {"query", "noquery", "fragment", "nofragment", *USER_INFOS}
    assert expected <= covered, expected - covered
    query_keys = {shape.query_key.lower() for shape in ALL_SHAPES if shape.query_key}
    assert query_keys == set(QUERY_KEYS)


_check_generation_covers_every_dimension()


@pytest.mark.parametrize("case", TURN_CASES, ids=lambda case: case.label)
async def test_turn_with_credential_url_leaks_nowhere(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    debug_logs: pytest.LogCaptureFixture,
    case: TurnCase,
) -> None:
    """The entry's base URL carries credentials; logs, events, traces and the spoken error
    never show them, nor does threads.db after a failure, and the host still shows.

    (An answer in which the model itself repeats the URL is the conversation's content:
    it is in the thread and the speech by design, and redacted in events and traces.)
    """
    credential = case.shape.build(port=openai_server.port)
    # The URL's user and password go as a Basic authorization header (httpx), which
    # replaces the key's Bearer header: this server takes any.
    openai_server.api_key = None
    match case.outcome:
        case "answers":
            # A model that reads its own configuration back (the answer is logged and
            # reported in the activity event with contents on).
            openai_server.add_text(f"I am served from {credential.url} today.")
        case "refuses":
            # A proxy that echoes the URL, and the credentials alone (decoded, as the
            # Basic header): only their registration from the configuration catches those.
            echoed = " ".join(credential.values)
            openai_server.add_error(400, f"The proxy cannot route {credential.url} ({echoed})")
    entry = add_test_entry(
        hass,
        credential.url,
        {**DEFAULT_AGENT_OPTIONS, CONF_ACTIVITY_CONTENTS: True, CONF_MODEL_RETRIES: 0},
    )
    await _setup(hass, entry)
    events = async_capture_events(hass, EVENT_ACTIVITY)

    result = await conversation.async_converse(
        hass, "Where are you served from?", None, Context(), agent_id=agent_entity_id(hass, entry)
    )
    await hass.async_block_till_done()

    speech = result.response.speech["plain"]["speech"]
    activity = json.dumps([event.data for event in events], default=str)
    trace = async_get_traces()[-1].as_dict()
    ours = json.dumps(
        [
            event["data"][TRACE_KEY]
            for event in trace["events"]
            if TRACE_KEY in (event["data"] or {})
        ]
    )
    stored = await hass.async_add_executor_job(_stored_bytes, hass)
    logs = _log_text(debug_logs)
    if case.outcome == "answers":
        assert result.response.error_code is None
        assert openai_server.requests, "the server was never asked"
        credential.assert_redacted_in(activity, "activity events")
        credential.assert_redacted_in(ours, "our entries in the conversation trace")
    else:
        assert result.response.error_code is not None
        credential.assert_hidden_in(speech, "the spoken error")
        credential.assert_hidden_in(activity, "activity events")
        credential.assert_hidden_in(json.dumps(trace, default=str), "the conversation trace")
        credential.assert_hidden_in(stored, "threads.db / memory.db")
    credential.assert_redacted_in(logs, "the DEBUG log")
    assert await hass.config_entries.async_unload(entry.entry_id)


@pytest.mark.parametrize(
    "shape",
    [shape for shape in ANSWERS if not shape.fragment],
    ids=lambda shape: shape.label,
)
async def test_fallback_model_with_credential_url_leaks_nowhere(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    debug_logs: pytest.LogCaptureFixture,
    shape: UrlShape,
) -> None:
    """The main model fails; the fallback model, at a credential URL, answers."""
    credential = shape.build(port=openai_server.port)
    openai_server.api_key = None
    openai_server.add_error(503, "overloaded")
    openai_server.add_text("The backup answers.")
    entry = add_test_entry(
        hass,
        openai_server.api_base,
        {
            **DEFAULT_AGENT_OPTIONS,
            CONF_MODEL_RETRIES: 0,
            CONF_FALLBACK_MODEL: {
                CONF_MODEL: "openai/backup",
                CONF_API_KEY: "sk-fallback-0123456789",
                CONF_API_BASE: credential.url,
            },
        },
    )
    await _setup(hass, entry)
    result = await conversation.async_converse(
        hass, "Hello", None, Context(), agent_id=agent_entity_id(hass, entry)
    )
    assert result.response.speech["plain"]["speech"] == "The backup answers."
    assert openai_server.requests[-1]["model"] == "backup"
    credential.assert_redacted_in(_log_text(debug_logs), "the DEBUG log")
    diagnostics = json.dumps(await async_get_config_entry_diagnostics(hass, entry))
    credential.assert_redacted_in(diagnostics, "diagnostics of a loaded entry")
    assert await hass.config_entries.async_unload(entry.entry_id)


EMBEDDING_SHAPES = [shape for shape in ANSWERS if not shape.fragment] + _sample(QUERY_PATHS, 2)


@pytest.mark.parametrize("shape", EMBEDDING_SHAPES, ids=lambda shape: shape.label)
async def test_embedding_model_with_credential_url_leaks_nowhere(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    debug_logs: pytest.LogCaptureFixture,
    shape: UrlShape,
) -> None:
    """The options form checks an embedding model at a credential URL with a real request."""
    credential = shape.build(port=openai_server.port)
    openai_server.api_key = None
    entry = add_test_entry(hass, openai_server.api_base, DEFAULT_AGENT_OPTIONS)
    await _setup(hass, entry)
    flow = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        flow["flow_id"],
        {
            CONF_CHECKPOINTS_KEPT: 3,
            CONF_THREAD_IDLE_DAYS: 30,
            CONF_EMBEDDING_MODEL: "openai/embed-test",
            CONF_EMBEDDING_API_KEY: "sk-embedding-0123456789",
            CONF_EMBEDDING_API_BASE: credential.url,
        },
    )
    await hass.async_block_till_done()
    if shape.query_key:
        # The query breaks the SDK's path: the form says so, without the URL.
        assert result["type"] is FlowResultType.FORM
        credential.assert_hidden_in(
            json.dumps([result["errors"], result.get("description_placeholders")]),
            "the form's error",
        )
    else:
        assert result["type"] is FlowResultType.CREATE_ENTRY
        assert openai_server.embedding_requests
        diagnostics = json.dumps(await async_get_config_entry_diagnostics(hass, entry))
        credential.assert_redacted_in(diagnostics, "diagnostics")
    credential.assert_redacted_in(_log_text(debug_logs), "the DEBUG log")


@pytest.mark.parametrize("shape", DOWN, ids=lambda shape: shape.label)
async def test_config_flow_error_with_credential_url_leaks_nowhere(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    debug_logs: pytest.LogCaptureFixture,
    shape: UrlShape,
) -> None:
    """A server that cannot be reached: the form's error and the log hold no secret."""
    credential = shape.build(port=openai_server.port)
    assert await async_setup_component(hass, "homeassistant", {})
    flow = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    result = await hass.config_entries.flow.async_configure(
        flow["flow_id"],
        {
            CONF_MODEL: f"openai/{TEST_MODEL}",
            CONF_API_KEY: "sk-flow-0123456789",
            CONF_API_BASE: credential.url,
        },
    )
    assert result["type"] is FlowResultType.FORM
    if shape.host.startswith("["):
        # pytest-socket refuses the connect to [::1] with a RuntimeError of its own, not a
        # connection error: openai 2.x and 3.10 wrap it as "no answer" (cannot_connect),
        # openai 3.26 passes it on in an ExceptionGroup, which LiteLLM files under a 500
        # (server_error). A real refused connection is cannot_connect everywhere
        # (tests/test_access_flow.py); what matters here is that no secret shows.
        assert result["errors"]["base"] in {"cannot_connect", "server_error"}
    else:
        assert result["errors"] == {"base": "cannot_connect"}
    credential.assert_hidden_in(
        json.dumps([result["errors"], result.get("description_placeholders")]), "the form's error"
    )
    credential.assert_redacted_in(_log_text(debug_logs), "the DEBUG log")
