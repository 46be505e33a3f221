"""The storage choice in the entry's Configure: this machine (SQLite) or PostgreSQL.

Against the real test PostgreSQL (tests/postgres.py): every kind of failure has its own
error, the packages go through Home Assistant's requirements helper only when PostgreSQL
is chosen (never under --skip-pip, which has its own error when they are missing), and
the URL (a secret) reaches neither the log nor the diagnostics.
"""

from __future__ import annotations

import logging
from pathlib import Path
import socket

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry
from pytest_homeassistant_custom_component.components.diagnostics import (
    get_diagnostics_for_config_entry,
)
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

from custom_components.langgraph_conversation.const import (
    CONF_CHECKPOINTS_KEPT,
    CONF_POSTGRES_URL,
    CONF_STORAGE,
    CONF_THREAD_IDLE_DAYS,
    STORAGE_POSTGRES,
    STORAGE_SQLITE,
)
from fakes.postgres_server import (
    APP_PASSWORD,
    GUEST_PASSWORD,
    GUEST_ROLE,
    LOCKED_DATABASE,
    PostgresServer,
)
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType

# Home Assistant's requirements helper logs this for a package it is told to skip; the
# tests skip the PostgreSQL driver to see that the helper was asked for it (the packages
# are installed in the test environment either way).
_SKIPPED = "Skipping requirement langgraph-checkpoint-postgres"


def _unused_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def _configure(hass: HomeAssistant, entry: MockConfigEntry, answer: dict):
    flow = await hass.config_entries.options.async_init(entry.entry_id)
    assert flow["type"] is FlowResultType.FORM
    return flow, await hass.config_entries.options.async_configure(flow["flow_id"], answer)


def _answer(storage: str, url: str | None = None) -> dict:
    answer = {CONF_STORAGE: storage, CONF_CHECKPOINTS_KEPT: 3, CONF_THREAD_IDLE_DAYS: 30}
    if url is not None:
        answer[CONF_POSTGRES_URL] = url
    return answer


@pytest.fixture
def watch_requirements(hass: HomeAssistant) -> None:
    # The test harness starts Home Assistant with skip_pip; a user's runs without it (the
    # packages are installed here, so the helper finds them and installs nothing).
    hass.config.skip_pip = False
    hass.config.skip_pip_packages = ["langgraph-checkpoint-postgres"]


async def test_sqlite_is_the_default_and_installs_nothing(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    watch_requirements: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The form offers SQLite first; choosing it asks Home Assistant to install nothing."""
    flow = await hass.config_entries.options.async_init(setup_integration.entry_id)
    schema = flow["data_schema"].schema
    storage_key = next(key for key in schema if key == CONF_STORAGE)
    assert storage_key.default() == STORAGE_SQLITE
    result = await hass.config_entries.options.async_configure(
        flow["flow_id"], _answer(STORAGE_SQLITE, "postgresql://ignored@127.0.0.1/x")
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    await hass.async_block_till_done()
    # Not stored: a URL is kept only with the PostgreSQL choice.
    assert setup_integration.options == {CONF_CHECKPOINTS_KEPT: 3, CONF_THREAD_IDLE_DAYS: 30}
    assert _SKIPPED not in caplog.text


async def test_postgres_is_checked_installed_and_kept_secret(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    postgres_url: str,
    watch_requirements: None,
    hass_client: ClientSessionGenerator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A working URL is saved after one real connection; the requirements helper was asked
    for the packages; neither the log nor the diagnostics show the URL's password."""
    caplog.set_level(logging.DEBUG)
    _flow, result = await _configure(
        hass, setup_integration, _answer(STORAGE_POSTGRES, postgres_url)
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY, result.get("errors")
    await hass.async_block_till_done()
    assert setup_integration.options[CONF_STORAGE] == STORAGE_POSTGRES
    assert setup_integration.options[CONF_POSTGRES_URL] == postgres_url
    assert _SKIPPED in caplog.text
    diagnostics = await get_diagnostics_for_config_entry(hass, hass_client, setup_integration)
    assert APP_PASSWORD not in str(diagnostics)
    assert diagnostics["entry"]["options"][CONF_POSTGRES_URL] == "**REDACTED**"
    assert APP_PASSWORD not in caplog.text

    # The form never shows the URL back; left empty, the saved one stays.
    flow, result = await _configure(hass, setup_integration, _answer(STORAGE_POSTGRES, ""))
    suggested = {
        str(key): (key.description or {}).get("suggested_value")
        for key in flow["data_schema"].schema
    }
    assert suggested[CONF_POSTGRES_URL] is None
    assert result["type"] is FlowResultType.CREATE_ENTRY, result.get("errors")
    await hass.async_block_till_done()
    assert setup_integration.options[CONF_POSTGRES_URL] == postgres_url


def _failing_urls(server: PostgresServer, database: str) -> dict[str, str]:
    return {
        "postgres_url_missing": "",
        "postgres_invalid_url": "postgresql://lgc@127.0.0.1:notaport/x",
        "postgres_refused": server.url(database, port=_unused_port()),
        "postgres_auth_failed": server.url(database, password="wrong-password-42"),
        "postgres_database_missing": server.url("no_such_database"),
        "postgres_permission_denied": server.url(
            LOCKED_DATABASE, user=GUEST_ROLE, password=GUEST_PASSWORD
        ),
        "postgres_tls": server.url(database, query="sslmode=require"),
    }


async def test_each_failure_has_its_own_error_and_saves_nothing(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    postgres_server: PostgresServer,
    postgres_database: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Refused, password, missing database, rights, TLS: each is named, the form stays,
    the options are unchanged, and no password reaches the log."""
    caplog.set_level(logging.DEBUG)
    before = dict(setup_integration.options)
    translations = await _translated_errors(hass)
    for expected, url in _failing_urls(postgres_server, postgres_database).items():
        _flow, result = await _configure(hass, setup_integration, _answer(STORAGE_POSTGRES, url))
        assert result["type"] is FlowResultType.FORM, expected
        assert result["errors"] == {"base": expected}
        assert translations.get(expected), f"{expected} has no sentence"
    assert dict(setup_integration.options) == before
    for secret in ("wrong-password-42", GUEST_PASSWORD):
        assert secret not in caplog.text


async def _translated_errors(hass: HomeAssistant) -> dict[str, str]:
    from homeassistant.helpers.translation import async_get_translations

    strings = await async_get_translations(hass, "en", "options", ["langgraph_conversation"])
    prefix = "component.langgraph_conversation.options.error."
    return {
        key.removeprefix(prefix): text for key, text in strings.items() if key.startswith(prefix)
    }


def _an_older_driver_first_on_the_path(folder: Path) -> None:
    """An environment whose langgraph-checkpoint-postgres is not the pinned version: an
    older distribution's metadata found first on the import path."""
    info = folder / "langgraph_checkpoint_postgres-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: langgraph-checkpoint-postgres\nVersion: 0.1.0\n"
    )


async def test_skip_pip_with_the_packages_missing_says_so(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    postgres_url: str,
    watch_requirements: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Home Assistant started with --skip-pip and the pinned packages not there: the form
    says Home Assistant was told not to install them (not a failed install), nothing is
    installed, the options stay."""
    await hass.async_add_executor_job(_an_older_driver_first_on_the_path, tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    hass.config.skip_pip = True
    before = dict(setup_integration.options)
    _flow, result = await _configure(
        hass, setup_integration, _answer(STORAGE_POSTGRES, postgres_url)
    )
    assert result["type"] is FlowResultType.FORM
    assert result["errors"] == {"base": "postgres_install_skipped"}
    assert "--skip-pip" in (await _translated_errors(hass))["postgres_install_skipped"]
    assert "langgraph-checkpoint-postgres==3.2.0" in caplog.text
    # Home Assistant's requirements helper was not asked (it would have installed).
    assert _SKIPPED not in caplog.text
    assert dict(setup_integration.options) == before


async def test_skip_pip_with_the_packages_there_uses_them(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    postgres_url: str,
    watch_requirements: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With --skip-pip and the packages installed by hand, PostgreSQL is used as chosen,
    without asking Home Assistant's requirements helper."""
    hass.config.skip_pip = True
    _flow, result = await _configure(
        hass, setup_integration, _answer(STORAGE_POSTGRES, postgres_url)
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY, result.get("errors")
    await hass.async_block_till_done()
    assert setup_integration.options[CONF_POSTGRES_URL] == postgres_url
    assert _SKIPPED not in caplog.text
