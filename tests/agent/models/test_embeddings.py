"""Semantic memory search: embeddings through LiteLLM against the fake /v1/embeddings."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
import subprocess
import sys
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry
from pytest_homeassistant_custom_component.components.diagnostics import (
    get_diagnostics_for_config_entry,
)
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

from custom_components.langgraph_conversation.agent.errors import ModelErrorKind
from custom_components.langgraph_conversation.agent.memory.memories import recall_query
from custom_components.langgraph_conversation.agent.models import (
    EmbeddingError,
    LiteLLMEmbedder,
    ModelAccess,
    async_embed,
    embedding_access,
)
from custom_components.langgraph_conversation.const import (
    CONF_CHECKPOINTS_KEPT,
    CONF_EMBEDDING_API_BASE,
    CONF_EMBEDDING_API_KEY,
    CONF_EMBEDDING_MODEL,
    CONF_THREAD_IDLE_DAYS,
)
from custom_components.langgraph_conversation.persistence import DATA_STORAGE
from fakes import ErrorReply, FakeOpenAIServer, ToolCall
from fakes.openai_server import EMBEDDING_DIMS, word_vector
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.setup import async_setup_component

from ...conftest import TEST_KEY, agent_entity_id
from ...helpers import messages_of, prompt_text, text_of

EMBEDDING_MODEL = "openai/embed-test"
# The fake embedding model's "meaning": these words are about getting to work.
COMMUTING = {"bicycle": "commute", "cycles": "commute", "commute": "commute", "rides": "commute"}
MEMORY = "Ada cycles to the office on a bicycle"
QUESTION = "How should I plan my commute?"


def _meaningful(text: str) -> list[float]:
    return word_vector(text, COMMUTING)


def _unrelated(text: str) -> list[float]:
    """A model for which the memory is orthogonal to everything else."""
    vector = [0.0] * EMBEDDING_DIMS
    vector[0 if text == MEMORY else 1] = 1.0
    return vector


# -- whose key goes where ------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "key", "base", "expected"),
    [
        # Same provider, same (default) address: the chat model's key and base are reused.
        ("openai/text-embedding-3-small", None, None, ("sk-chat", "http://chat/v1")),
        ("openai/text-embedding-3-small", None, "http://chat/v1/", ("sk-chat", "http://chat/v1/")),
        # Same provider at another address: no key of ours travels there.
        ("openai/text-embedding-3-small", None, "http://other/v1", (None, "http://other/v1")),
        # Another provider: never the chat model's key.
        ("gemini/text-embedding-004", None, None, (None, None)),
        ("cohere/embed-english-v3.0", None, None, (None, None)),
        # Without a provider prefix LiteLLM would guess; a guess never gets our key.
        ("text-embedding-3-small", None, None, (None, None)),
        # Its own key always wins.
        ("gemini/text-embedding-004", "g-key", None, ("g-key", None)),
    ],
)
def test_chat_key_only_goes_to_its_own_provider_and_address(
    model: str, key: str | None, base: str | None, expected: tuple[str | None, str | None]
) -> None:
    """The entry's key is borrowed only where it was meant to go."""
    chat = ModelAccess("openai/gpt-4o-mini", "sk-chat", "http://chat/v1")
    access = embedding_access(model, key, base, chat=chat)
    assert access.model == model
    assert (access.api_key, access.api_base) == expected


def test_ollama_chat_and_ollama_embeddings_share_the_server() -> None:
    """ollama_chat/ and ollama/ are one server: the embedding model uses its address."""
    chat = ModelAccess("ollama_chat/llama3.2", None, "http://192.0.2.1:11434")
    access = embedding_access("ollama/nomic-embed-text", None, None, chat=chat)
    assert access.api_base == "http://192.0.2.1:11434"


# -- the embedding client, over the wire -----------------------------------------------


async def test_embedder_speaks_openai_embeddings(openai_server: FakeOpenAIServer) -> None:
    """One request for many texts, vectors in order, the key in the header."""
    access = ModelAccess(EMBEDDING_MODEL, TEST_KEY, openai_server.api_base)
    vectors = await LiteLLMEmbedder(access, timeout=10)(["first text", "second text", "first"])
    assert [len(vector) for vector in vectors] == [EMBEDDING_DIMS] * 3
    assert vectors[0] == pytest.approx(word_vector("first text"))
    assert vectors[2] == pytest.approx(word_vector("first"))
    assert len(openai_server.embedding_requests) == 1
    assert openai_server.embedding_requests[0]["input"] == ["first text", "second text", "first"]
    assert openai_server.embedding_authorizations == [f"Bearer {TEST_KEY}"]


async def test_embedder_failure_is_typed_and_keyless(openai_server: FakeOpenAIServer) -> None:
    """A refused key is an auth error whose text holds no key; then it pauses."""
    access = ModelAccess(EMBEDDING_MODEL, "sk-wrong-key-123456", openai_server.api_base)
    embedder = LiteLLMEmbedder(access, timeout=10, pause=3600)
    with pytest.raises(EmbeddingError) as caught:
        await embedder(["hello"])
    assert caught.value.kind is ModelErrorKind.AUTH
    assert "sk-wrong-key-123456" not in str(caught.value)
    # Paused: the next call fails at once, without another request.
    with pytest.raises(EmbeddingError, match="not asked again"):
        await embedder(["hello"])
    assert len(openai_server.embedding_requests) == 1


async def test_unknown_embedding_model_is_model_not_found(
    openai_server: FakeOpenAIServer,
) -> None:
    """The server does not have the model: the flow can say so."""
    openai_server.models = {"gpt-test"}
    access = ModelAccess(EMBEDDING_MODEL, TEST_KEY, openai_server.api_base)
    with pytest.raises(EmbeddingError) as caught:
        await async_embed(access, ["hello"], 10)
    assert caught.value.kind is ModelErrorKind.MODEL_NOT_FOUND


# -- semantic recall through the agent -------------------------------------------------


async def _ask(hass: HomeAssistant, entry: MockConfigEntry, text: str) -> Any:
    return await conversation.async_converse(
        hass, text, None, Context(), agent_id=agent_entity_id(hass, entry)
    )


def _system(server: FakeOpenAIServer) -> str:
    return prompt_text(server.requests[-1])


async def _set_options(hass: HomeAssistant, entry: MockConfigEntry, **options: Any) -> None:
    """Change the entry's options as the options flow does (the entry reloads)."""
    hass.config_entries.async_update_entry(entry, options=options)
    await hass.async_block_till_done(wait_background_tasks=True)


@pytest.mark.parametrize("embeddings_on", [True, False])
async def test_meaning_without_shared_words_is_recalled_only_with_embeddings(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    embeddings_on: bool,
) -> None:
    """A memory about cycling to the office answers a question about commuting."""
    openai_server.embed_text = _meaningful
    if embeddings_on:
        await _set_options(hass, setup_integration, **{CONF_EMBEDDING_MODEL: EMBEDDING_MODEL})
    openai_server.add_tool_calls([ToolCall("memory", {"action": "remember", "text": MEMORY})])
    openai_server.add_text("Noted.")
    await _ask(hass, setup_integration, "Remember: Ada cycles to the office on a bicycle")

    openai_server.add_text("By bike.")
    await _ask(hass, setup_integration, QUESTION)
    assert (MEMORY in _system(openai_server)) is embeddings_on
    if embeddings_on:
        # The memory and the question were embedded with the entry's own key (same server).
        embedded = [text for body in openai_server.embedding_requests for text in body["input"]]
        assert MEMORY in embedded
        # The question is searched by its words that say something (no stop words).
        assert recall_query(QUESTION) == "should plan commute"
        assert recall_query(QUESTION) in embedded
        assert set(openai_server.embedding_authorizations) == {f"Bearer {TEST_KEY}"}
    else:
        assert openai_server.embedding_requests == []


async def test_embedding_failure_keeps_memories_and_words_still_find_them(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Embeddings down: memories are saved, found by their words, and one line is logged."""
    openai_server.embed_text = _meaningful
    await _set_options(hass, setup_integration, **{CONF_EMBEDDING_MODEL: EMBEDDING_MODEL})
    openai_server.embedding_error = ErrorReply(status=500, message="embedding backend down")
    with caplog.at_level(logging.WARNING):
        openai_server.add_tool_calls([ToolCall("memory", {"action": "remember", "text": MEMORY})])
        openai_server.add_text("Noted.")
        await _ask(hass, setup_integration, "Remember: Ada cycles to the office on a bicycle")
        tool_result = text_of(messages_of(openai_server.requests[-1], "tool")[0])
        assert '"saved"' in tool_result

        openai_server.add_text("On a bicycle.")
        await _ask(hass, setup_integration, "Does Ada have a bicycle?")
        assert MEMORY in _system(openai_server)
    failures = [r for r in caplog.records if "searching memories by their words" in r.message]
    assert len(failures) == 1

    # The model is back: the backfill gives the memory its vector, and meaning works again.
    openai_server.embedding_error = None
    store = hass.data[DATA_STORAGE].backend.store
    assert store is not None
    assert (await store.stats())["vectors_of_current_model"] == 0
    store.configure_embeddings(
        LiteLLMEmbedder(
            ModelAccess(EMBEDDING_MODEL, TEST_KEY, openai_server.api_base), timeout=10, pause=0
        ),
        EMBEDDING_MODEL,
    )
    assert await store.abackfill_vectors(100) == 1
    openai_server.add_text("By bike.")
    await _ask(hass, setup_integration, QUESTION)
    assert MEMORY in _system(openai_server)


async def test_embedding_model_change_never_mixes_vectors(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Vectors of the old model are not compared with the new one's; the backfill fills in."""
    openai_server.embed_text = _meaningful
    await _set_options(hass, setup_integration, **{CONF_EMBEDDING_MODEL: EMBEDDING_MODEL})
    openai_server.add_tool_calls([ToolCall("memory", {"action": "remember", "text": MEMORY})])
    openai_server.add_text("Noted.")
    await _ask(hass, setup_integration, "Remember: Ada cycles to the office on a bicycle")
    stats = await hass.data[DATA_STORAGE].backend.store.stats()
    assert (stats["vectors"], stats["vectors_of_current_model"]) == (1, 1)

    # Another model, which sees no relation between the memory and the question, with its
    # own key and address.
    openai_server.embed_text = _unrelated
    await _set_options(
        hass,
        setup_integration,
        **{
            CONF_EMBEDDING_MODEL: "openai/other-embed",
            CONF_EMBEDDING_API_KEY: TEST_KEY,
            CONF_EMBEDDING_API_BASE: openai_server.api_base,
        },
    )
    shared = hass.data[DATA_STORAGE]
    assert shared.settings.embedding is not None
    assert shared.settings.embedding.model == "openai/other-embed"
    # The backfill runs in the background and may still be writing what it embedded.
    for _ in range(100):
        await hass.async_block_till_done(wait_background_tasks=True)
        stats = await shared.backend.store.stats()
        if stats["vectors_of_current_model"]:
            break
        await asyncio.sleep(0.05)
    # The backfill that the change started re-embedded the memory with the new model.
    assert (stats["vectors"], stats["vectors_of_current_model"]) == (1, 1)
    backfilled = [body for body in openai_server.embedding_requests if MEMORY in body["input"]]
    assert backfilled[-1]["model"] == "other-embed"
    openai_server.add_text("No idea.")
    await _ask(hass, setup_integration, QUESTION)
    assert MEMORY not in _system(openai_server)


async def test_forgetting_a_memory_deletes_its_vector(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A deleted memory leaves no vector behind."""
    await _set_options(hass, setup_integration, **{CONF_EMBEDDING_MODEL: EMBEDDING_MODEL})
    openai_server.add_tool_calls(
        [ToolCall("memory", {"action": "remember", "text": "The cat is called Mia"})]
    )
    openai_server.add_text("Noted.")
    await _ask(hass, setup_integration, "Our cat is called Mia")
    saved = text_of(messages_of(openai_server.requests[-1], "tool")[0])
    memory_id = saved.split('"saved": "')[1].split('"')[0]
    store = hass.data[DATA_STORAGE].backend.store
    assert (await store.stats())["vectors"] == 1
    openai_server.add_tool_calls([ToolCall("memory", {"action": "forget", "id": memory_id})])
    openai_server.add_text("Forgotten.")
    await _ask(hass, setup_integration, "Forget the cat's name")
    stats = await store.stats()
    assert (stats["items"], stats["vectors"]) == (0, 0)


async def test_diagnostics_show_embeddings_on_but_never_the_key(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    hass_client: ClientSessionGenerator,
) -> None:
    """Effective settings and the model name are shown; the embedding key is redacted."""
    await _set_options(
        hass,
        setup_integration,
        **{
            CONF_CHECKPOINTS_KEPT: 4,
            CONF_THREAD_IDLE_DAYS: 0,
            CONF_EMBEDDING_MODEL: EMBEDDING_MODEL,
            CONF_EMBEDDING_API_KEY: "sk-embedding-secret-42",
            CONF_EMBEDDING_API_BASE: openai_server.api_base,
        },
    )
    assert await async_setup_component(hass, "diagnostics", {})
    diagnostics = await get_diagnostics_for_config_entry(hass, hass_client, setup_integration)
    dumped = json.dumps(diagnostics)
    assert "sk-embedding-secret-42" not in dumped
    assert TEST_KEY not in dumped
    assert diagnostics["entry"]["options"][CONF_EMBEDDING_API_KEY] == "**REDACTED**"
    assert diagnostics["storage"]["settings"] == {
        "checkpoints_kept_per_conversation": 4,
        "delete_conversations_idle_days": "never",
        "embeddings": True,
        "embedding_model": EMBEDDING_MODEL,
        "storage": "sqlite",
    }


# A fresh interpreter: whatever the first embedding call imports shows in sys.modules.
_FIRST_CALL = """
import asyncio, sys
from custom_components.langgraph_conversation.agent.models import (
    ModelAccess, async_embed, warm_up, warm_up_embeddings,
)
from fakes import FakeOpenAIServer

async def main():
    async with FakeOpenAIServer() as server:
        access = ModelAccess("openai/embed-test", "key", server.api_base)
        # Cold: nothing warmed up (the chat model's warm-up alone now imports what an
        # embedding needs too, upstream/sdk_imports.py), so the check sees imports.
        if sys.argv[1] == "warm":
            warm_up(ModelAccess("openai/gpt-test"))
            warm_up_embeddings(access)
        before = set(sys.modules)
        await async_embed(access, ["hello"], 10)
        print(len(set(sys.modules) - before))

asyncio.run(main())
"""


@pytest.mark.parametrize(("warm", "imports_on_the_loop"), [("warm", False), ("cold", True)])
def test_warm_up_leaves_the_first_embedding_nothing_to_import(
    warm: str, imports_on_the_loop: bool
) -> None:
    """Home Assistant warms embeddings up in the executor; the event loop imports nothing."""
    repository = Path(__file__).parents[3]
    finished = subprocess.run(
        [sys.executable, "-c", _FIRST_CALL, warm],
        cwd=repository,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    imported = int(finished.stdout.strip().splitlines()[-1])
    assert (imported > 0) is imports_on_the_loop
