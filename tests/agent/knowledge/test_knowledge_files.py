"""Hostile knowledge folders end to end: what reaches the model, and that questions are
answered whatever the folder holds (links, FIFOs, sockets, devices, costly PDFs)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.agent.knowledge import KnowledgeIndex, pdf_text
from custom_components.langgraph_conversation.const import CONF_AGENT_KIND, DOMAIN
from custom_components.langgraph_conversation.profile import knowledge_source
from fakes import FakeOpenAIServer
from homeassistant import block_async_io
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.setup import async_setup_component

from ...conftest import agent_entity_id
from ...helpers import prompt_text
from ...hostile_files import LINK_SHAPES, SPECIAL_FILES, pdf_workers
from ...pdf_files import SHARING, numbered_pages, shared_content

RAG = {CONF_AGENT_KIND: "rag"}
SECRET = "api_password: hunter2-do-not-leak"
NOTES = "The guest wifi password is printed on the router."
# How long a question may take here, whatever the folder holds: generous for a loaded
# test machine; a question that waited for a costly file would take minutes.
ANSWER_BOUND = 20


def _folder(hass: HomeAssistant) -> Path:
    return Path(hass.config.path(DOMAIN, "knowledge", "test_agent"))


def _index(hass: HomeAssistant, entry: MockConfigEntry) -> KnowledgeIndex:
    index = entry.runtime_data.runtime.knowledge_index(
        knowledge_source(hass, next(iter(entry.subentries.values())))
    )
    assert index is not None
    return index


async def _prepare(hass: HomeAssistant, make: object) -> object:
    """The folder with NOTES in notes.md and the secret in secrets.yaml of the config
    folder, then `make(folder, secret)` run in the executor; what it returns."""
    folder = _folder(hass)
    secret = Path(hass.config.path("secrets.yaml"))

    def prepare() -> object:
        folder.mkdir(parents=True, exist_ok=True)
        secret.write_text(SECRET, encoding="utf-8")
        (folder / "notes.md").write_text(NOTES, encoding="utf-8")
        return make(folder, secret)  # type: ignore[operator]

    return await hass.async_add_executor_job(prepare)


async def _ask(hass: HomeAssistant, entry: MockConfigEntry, text: str) -> str:
    async with asyncio.timeout(ANSWER_BOUND):
        result = await conversation.async_converse(
            hass, text, None, Context(), agent_id=agent_entity_id(hass, entry)
        )
    return result.response.speech["plain"]["speech"]


def _knowledge_layer(server: FakeOpenAIServer) -> str:
    system = prompt_text(server.requests[-1])
    return system[system.index("\n<knowledge>\n") :]


def _skip_lines(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [r.message for r in caplog.records if f"Knowledge file {name} skipped" in r.message]


@pytest.mark.parametrize("agent_overrides", [RAG])
@pytest.mark.parametrize("shape", list(LINK_SHAPES))
async def test_links_never_carry_text_from_outside_to_the_model(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
    shape: str,
) -> None:
    """The secret is in no request to the model; the folder's own file still is; the
    link is named once in the log, not at every question."""
    name = await _prepare(hass, LINK_SHAPES[shape])
    for _ in range(2):
        openai_server.add_text("It is on the router.")
        assert await _ask(hass, setup_integration, "What is the api password?") == (
            "It is on the router."
        )
        assert json.dumps(NOTES) in _knowledge_layer(openai_server)
    assert "hunter2" not in json.dumps(openai_server.requests)
    lines = _skip_lines(caplog, str(name))
    assert len(lines) == 1
    assert "symbolic link" in lines[0]


@pytest.mark.parametrize("agent_overrides", [RAG])
@pytest.mark.parametrize("kind", list(SPECIAL_FILES))
async def test_special_files_do_not_hold_the_question(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
    kind: str,
) -> None:
    """A FIFO (a reader would wait forever), socket or device named pipe.txt: the question
    is answered from the other files, and the log says once what pipe.txt is."""
    make, word = SPECIAL_FILES[kind]
    await _prepare(hass, lambda folder, _secret: make(folder / "pipe.txt"))
    openai_server.add_text("It is on the router.")
    assert await _ask(hass, setup_integration, "Where is the wifi password?") == (
        "It is on the router."
    )
    assert json.dumps(NOTES) in _knowledge_layer(openai_server)
    lines = _skip_lines(caplog, "pipe.txt")
    assert len(lines) == 1
    assert word in lines[0]


@pytest.mark.parametrize("agent_overrides", [RAG])
@pytest.mark.parametrize("shape", list(SHARING))
async def test_pages_sharing_one_large_stream_cost_one_page(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    shape: str,
) -> None:
    """200 pages showing one large stream (a file of a few dozen KB that kept a question
    for minutes): the question is answered at once, the PDF is indexed in the background
    within the bound, and the next question finds it. A shared stream is parsed once; a
    shared form is parsed per page, so the content budget (1 MB here) cuts it."""
    monkeypatch.setattr(pdf_text, "PDF_MAX_CONTENT_BYTES", 2**20)
    pdf = shared_content(shape, 200, 5000, "The boiler manual says: bleed the radiators.")
    assert len(pdf) < 64 * 1024
    await _prepare(hass, lambda folder, _secret: (folder / "boiler.pdf").write_bytes(pdf))
    openai_server.add_text("Noted.")
    await _ask(hass, setup_integration, "How do I bleed the radiators?")
    async with asyncio.timeout(ANSWER_BOUND):
        await _index(hass, setup_integration).wait_indexed()
    openai_server.add_text("Bleed them.")
    await _ask(hass, setup_integration, "How do I bleed the radiators?")
    assert "[boiler.pdf]" in _knowledge_layer(openai_server)
    assert "bleed the radiators" in _knowledge_layer(openai_server)
    partly = [r.message for r in caplog.records if "boiler.pdf is only partly" in r.message]
    if shape == "shared form":
        assert len(partly) == 1
        assert "MB of content" in partly[0]
    else:
        assert partly == []


@pytest.mark.parametrize("agent_overrides", [RAG])
async def test_a_slow_pdf_does_not_hold_the_question_and_unload_stops_it(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
) -> None:
    """A PDF that takes its whole time budget: the question is answered from the text
    files within INDEX_WAIT; unloading the entry kills the PDF's worker."""
    pdf = numbered_pages(200, repeat=5000)
    await _prepare(hass, lambda folder, _secret: (folder / "slow.pdf").write_bytes(pdf))
    openai_server.add_text("It is on the router.")
    await _ask(hass, setup_integration, "Where is the wifi password? Page marker?")
    layer = _knowledge_layer(openai_server)
    assert json.dumps(NOTES) in layer
    assert "slow.pdf" not in layer
    assert len(pdf_workers()) == 1
    assert await hass.config_entries.async_unload(setup_integration.entry_id)
    assert pdf_workers() == []


@pytest.mark.isolated
@pytest.mark.parametrize("agent_overrides", [RAG])
async def test_indexing_does_not_block_the_loop(
    hass: HomeAssistant,
    config_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    disable_block_async_io: None,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With Home Assistant's detector on (file, import and SSL checks too): scanning,
    refusing, reading text files and a PDF's worker process stay off the event loop."""
    monkeypatch.setattr(block_async_io, "_IN_TESTS", False)
    block_async_io.enable()
    for component in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, component, {})
    assert await hass.config_entries.async_setup(config_entry.entry_id)
    await hass.async_block_till_done()

    def make(folder: Path, secret: Path) -> None:
        LINK_SHAPES["absolute link to a file outside"](folder, secret)
        (folder / "manual.pdf").write_bytes(numbered_pages(3))

    await _prepare(hass, make)
    openai_server.add_text("It is on the router.")
    await _ask(hass, config_entry, "Where is the wifi password?")
    async with asyncio.timeout(ANSWER_BOUND):
        await _index(hass, config_entry).wait_indexed()
    openai_server.add_text("Page marker 2 is on page three.")
    await _ask(hass, config_entry, "Which page has page marker 2?")
    assert "[manual.pdf]" in _knowledge_layer(openai_server)
    reports = [r.getMessage() for r in caplog.records if "Detected blocking call" in r.getMessage()]
    assert reports == []
