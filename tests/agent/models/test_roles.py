"""Model roles: the fast model summarises, the fallback answers when the main model fails."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_capture_events
from pytest_homeassistant_custom_component.components.diagnostics import (
    get_diagnostics_for_config_entry,
)
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

from custom_components.langgraph_conversation.agent.graph.graph import REWRITE_INSTRUCTIONS
from custom_components.langgraph_conversation.agent.graph.history import SUMMARY_INSTRUCTIONS
from custom_components.langgraph_conversation.agent.models import (
    ModelAccess,
    ModelCache,
    ModelSettings,
    role_access,
)
from custom_components.langgraph_conversation.const import (
    CONF_ACTIVITY_CONTENTS,
    CONF_AGENT_KIND,
    CONF_API_BASE,
    CONF_API_KEY,
    CONF_CAMERAS,
    CONF_FALLBACK_MODEL,
    CONF_FAST_MODEL,
    CONF_HISTORY_BUDGET,
    CONF_MODEL,
    CONF_MODEL_RETRIES,
    CONF_REQUEST_TIMEOUT,
    CONF_VISION_MODEL,
    DOMAIN,
    EVENT_ACTIVITY,
    SUBENTRY_CONVERSATION,
)
from fakes import FakeOpenAIServer, Reply
from homeassistant import config_entries
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.data_entry_flow import FlowResultType, section
from homeassistant.helpers import intent
from homeassistant.setup import async_setup_component

from ...conftest import TEST_KEY, TEST_MODEL, agent_entity_id
from ...helpers import messages_of, text_of

OTHER_KEY = "sk-other-fedcba9876543210"


@pytest.fixture
async def other_server(socket_enabled: None) -> AsyncIterator[FakeOpenAIServer]:
    """A second provider (its own key) for the fast or fallback model."""
    async with FakeOpenAIServer() as server:
        server.api_key = OTHER_KEY
        yield server


@pytest.fixture
def agent_overrides(request: pytest.FixtureRequest, other_server: FakeOpenAIServer) -> Any:
    """The test's options; a role given as a model name points at the other server."""
    overrides = dict(getattr(request, "param", {}))
    for key in (CONF_FAST_MODEL, CONF_FALLBACK_MODEL):
        if isinstance(overrides.get(key), str):
            overrides[key] = {
                CONF_MODEL: f"openai/{overrides[key]}",
                CONF_API_KEY: OTHER_KEY,
                CONF_API_BASE: other_server.api_base,
            }
    return overrides


async def _ask(hass: HomeAssistant, entry: MockConfigEntry, text: str, conversation_id=None):
    return await conversation.async_converse(
        hass, text, conversation_id, Context(), agent_id=agent_entity_id(hass, entry)
    )


def _is_summary(request: dict[str, Any]) -> bool:
    return SUMMARY_INSTRUCTIONS in text_of(messages_of(request, "system")[0])


# -- which key and base a role gets -----------------------------------------------------

MAIN = ModelAccess("openai/gpt-4o", "sk-main", "https://llm.example/v1")


def test_same_provider_borrows_key_and_base() -> None:
    """Same provider, no base of its own: the entry's key and base URL."""
    assert role_access(MAIN, " openai/gpt-4o-mini ", "", None) == ModelAccess(
        "openai/gpt-4o-mini", "sk-main", "https://llm.example/v1"
    )
    assert role_access(MAIN, "openai/x", None, "https://llm.example/v1") == ModelAccess(
        "openai/x", "sk-main", "https://llm.example/v1"
    )
    # A key of its own wins.
    assert role_access(MAIN, "openai/x", "sk-own", None).api_key == "sk-own"
    # The same server written with a trailing slash, and Ollama's chat and generate APIs,
    # are one place (the rule is agent/models/access.py's same_place, shared with embeddings).
    assert role_access(MAIN, "openai/x", None, "https://llm.example/v1/").api_key == "sk-main"
    ollama = ModelAccess("ollama_chat/llama3.2", None, "http://192.0.2.1:11434")
    assert role_access(ollama, "ollama/qwen3:0.6b", None, None) == ModelAccess(
        "ollama/qwen3:0.6b", None, "http://192.0.2.1:11434"
    )


def test_key_never_goes_to_another_provider_or_server() -> None:
    """Another provider prefix, or another base URL: nothing borrowed."""
    assert role_access(MAIN, "anthropic/claude-haiku-4-5", None, None) == ModelAccess(
        "anthropic/claude-haiku-4-5"
    )
    assert role_access(MAIN, "openai/x", None, "http://127.0.0.1:8000/v1") == ModelAccess(
        "openai/x", None, "http://127.0.0.1:8000/v1"
    )
    # A model string without a provider prefix is not the entry's provider either.
    assert role_access(MAIN, "gpt-4o-mini", None, None) == ModelAccess("gpt-4o-mini")
    assert role_access(MAIN, "  ", "sk-own", None) is None


def test_models_are_built_once_per_configuration() -> None:
    """The cache returns the same client for the same access and settings."""
    cache = ModelCache()
    fast = ModelAccess("openai/small", "k", "http://127.0.0.1:1/v1")
    first = cache.get(MAIN, ModelSettings())
    assert cache.get(MAIN, ModelSettings()) is first
    assert cache.get(MAIN, ModelSettings(temperature=0.1)) is not first
    assert cache.get(fast, ModelSettings()) is not first
    assert len(cache) == 3


# -- the fast model -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "agent_overrides", [{CONF_HISTORY_BUDGET: 120, CONF_FAST_MODEL: "fast-test"}], indirect=True
)
async def test_fast_model_writes_the_summaries(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    other_server: FakeOpenAIServer,
) -> None:
    """Summaries go to the fast model's server, answers to the main model's."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    openai_server.default_reply = Reply(text="An answer with quite a few words in it. " * 4)
    other_server.default_reply = Reply(
        text="They asked numbered questions.", prompt_tokens=90, completion_tokens=6
    )
    conversation_id = None
    for n in range(4):
        result = await _ask(
            hass, setup_integration, f"Question {n} " + "padded with words " * 5, conversation_id
        )
        conversation_id = result.conversation_id
        # Summaries are made between turns, in the background.
        await setup_integration.runtime_data.runtime.wait_background()

    assert other_server.requests, "no summary was made"
    assert all(_is_summary(r) for r in other_server.requests)
    assert {r["model"] for r in other_server.requests} == {"fast-test"}
    assert not any(_is_summary(r) for r in openai_server.requests)
    assert {r["model"] for r in openai_server.requests} == {TEST_MODEL}
    # The fast model's summary rides along in the main model's prompt, right after the
    # system message.
    summary = text_of(openai_server.requests[-1]["messages"][1])
    assert "They asked numbered questions." in summary
    # Summaries are not part of any turn: every turn made one call, the main model's.
    ends = [e.data for e in events if e.data["type"] == "turn_end"]
    assert [end["model_calls"] for end in ends] == [1] * 4
    assert {end["model"] for end in ends} == {f"openai/{TEST_MODEL}"}


@pytest.mark.parametrize(
    "agent_overrides", [{CONF_AGENT_KIND: "rag", CONF_FAST_MODEL: "fast-test"}], indirect=True
)
async def test_fast_model_rewrites_rag_follow_ups(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    other_server: FakeOpenAIServer,
) -> None:
    """A rag follow-up is rewritten by the fast model; the answer stays the main model's."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    folder = Path(hass.config.path(DOMAIN, "knowledge", "test_agent"))

    def write() -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "kettle.md").write_text("Descale the kettle every four weeks.")
        (folder / "boiler.md").write_text("Keep the boiler between 1 and 1.5 bar.")

    await hass.async_add_executor_job(write)
    openai_server.add_text("Between 1 and 1.5 bar [boiler.md].")
    first = await _ask(hass, setup_integration, "What pressure should the boiler have?")
    other_server.add_text("kettle descaling interval", prompt_tokens=70, completion_tokens=3)
    openai_server.add_text("Every four weeks [kettle.md].")
    await _ask(
        hass, setup_integration, "And for the thing that boils water?", first.conversation_id
    )

    assert [r["model"] for r in other_server.requests] == ["fast-test"]
    assert text_of(messages_of(other_server.requests[0], "system")[0]) == REWRITE_INSTRUCTIONS
    assert openai_server.request_count == 2
    # The passages come right before the question, after the history.
    assert "Descale the kettle" in text_of(messages_of(openai_server.requests[1], "user")[-2])
    end = [e.data for e in events if e.data["type"] == "turn_end"][-1]
    assert (end["model_role"], end["model_calls"]) == ("main", 2)
    assert end["input_tokens"] >= 70


# -- the fallback model -------------------------------------------------------------------


@pytest.mark.parametrize("agent_overrides", [{CONF_FALLBACK_MODEL: "backup-test"}], indirect=True)
async def test_fallback_answers_after_rate_limits(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    other_server: FakeOpenAIServer,
) -> None:
    """429 on the main model, also on its retry: the fallback answers and is named."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    openai_server.add_error(429, "rate limited", headers={"Retry-After": "0"})
    openai_server.add_error(429, "still rate limited", headers={"Retry-After": "0"})
    other_server.add_text("The fallback speaks.", prompt_tokens=40, completion_tokens=4)

    result = await _ask(hass, setup_integration, "Hello")
    await hass.async_block_till_done()

    assert result.response.speech["plain"]["speech"] == "The fallback speaks."
    # The main model's retry came first, then the fallback, with its own key.
    assert openai_server.request_count == 2
    assert [r["model"] for r in other_server.requests] == ["backup-test"]
    end = events[-1].data
    assert end["type"] == "turn_end"
    assert (end["model"], end["model_role"]) == ("openai/backup-test", "fallback")
    assert (end["input_tokens"], end["output_tokens"], end["error"]) == (40, 4, None)

    # The next turn starts with the main model again, and the thread holds both turns.
    openai_server.add_text("Main again.")
    result = await _ask(hass, setup_integration, "And now?", result.conversation_id)
    assert result.response.speech["plain"]["speech"] == "Main again."
    users = [text_of(m) for m in messages_of(openai_server.requests[-1], "user")]
    assert users == ["Hello", "And now?"]
    assert events[-1].data["model_role"] == "main"


@pytest.mark.parametrize(
    "agent_overrides",
    [{CONF_FALLBACK_MODEL: "backup-test", CONF_MODEL_RETRIES: 0, CONF_REQUEST_TIMEOUT: 1}],
    indirect=True,
)
async def test_fallback_after_a_timeout(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    other_server: FakeOpenAIServer,
) -> None:
    """A main model that does not start in time hands over to the fallback."""
    openai_server.add_text("too late", first_byte_delay=3)
    other_server.add_text("Quick backup.")
    result = await _ask(hass, setup_integration, "Hello")
    assert result.response.speech["plain"]["speech"] == "Quick backup."
    assert other_server.request_count == 1


@pytest.mark.parametrize("agent_overrides", [{CONF_FALLBACK_MODEL: "backup-test"}], indirect=True)
async def test_no_fallback_after_words_or_for_other_errors(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    other_server: FakeOpenAIServer,
) -> None:
    """Words already streamed, or an error another model would not fix: no switch."""
    openai_server.add_broken_stream("The answer is")
    result = await _ask(hass, setup_integration, "Hello")
    assert result.response.response_type == intent.IntentResponseType.ERROR
    assert openai_server.request_count == 1

    openai_server.add_error(400, "your request is malformed")
    result = await _ask(hass, setup_integration, "Hello")
    assert result.response.response_type == intent.IntentResponseType.ERROR
    assert openai_server.request_count == 2
    assert other_server.request_count == 0


@pytest.mark.parametrize(
    "agent_overrides", [{CONF_FALLBACK_MODEL: "backup-test", CONF_MODEL_RETRIES: 0}], indirect=True
)
async def test_failing_fallback_gives_its_sentence(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    other_server: FakeOpenAIServer,
) -> None:
    """Both models fail: the user hears the fallback's failure, the thread stays whole."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    openai_server.add_text("Hi!")
    first = await _ask(hass, setup_integration, "Hello")
    openai_server.add_error(503, "down")
    other_server.add_error(429, "busy too")
    result = await _ask(hass, setup_integration, "What now?", first.conversation_id)
    await hass.async_block_till_done()
    assert result.response.response_type == intent.IntentResponseType.ERROR
    assert "rate limiting" in result.response.speech["plain"]["speech"]
    assert events[-1].data["error"] == "rate_limit"

    openai_server.add_text("Back.")
    result = await _ask(hass, setup_integration, "Again", first.conversation_id)
    assert result.response.speech["plain"]["speech"] == "Back."
    history = [(m["role"], text_of(m)) for m in openai_server.requests[-1]["messages"][1:]]
    assert history == [("user", "Hello"), ("assistant", "Hi!"), ("user", "Again")]
    assert TEST_KEY not in str([e.data for e in events])


# -- the agent form -----------------------------------------------------------------------


async def test_agent_form_stores_roles_as_sections(
    hass: HomeAssistant, setup_integration: MockConfigEntry
) -> None:
    """Fast, fallback and vision models are collapsed sections (the vision model right
    after the abilities section, with the camera option it serves); empty ones are not
    stored."""
    entry = setup_integration
    result = await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION), context={"source": config_entries.SOURCE_USER}
    )
    schema = result["data_schema"].schema
    keys = [str(key) for key in schema]
    abilities = keys.index("abilities")
    assert keys[abilities + 1] == CONF_VISION_MODEL
    assert keys[-3:] == [CONF_FAST_MODEL, CONF_FALLBACK_MODEL, "advanced"]
    abilities_fields = next(value for key, value in schema.items() if str(key) == "abilities")
    assert CONF_CAMERAS in {str(key) for key in abilities_fields.schema.schema}
    fast_section = next(value for key, value in schema.items() if str(key) == CONF_FAST_MODEL)
    assert isinstance(fast_section, section)
    assert fast_section.options["collapsed"] is True

    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"],
        {
            "name": "Roles",
            CONF_FAST_MODEL: {CONF_MODEL: " openai/small ", CONF_API_KEY: "  "},
            CONF_FALLBACK_MODEL: {CONF_API_KEY: "sk-without-model"},
            CONF_VISION_MODEL: {CONF_MODEL: " openai/gpt-4o-mini ", CONF_API_BASE: " "},
            "advanced": {CONF_ACTIVITY_CONTENTS: True},
        },
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.CREATE_ENTRY
    agent = next(s for s in entry.subentries.values() if s.title == "Roles")
    assert agent.data[CONF_FAST_MODEL] == {CONF_MODEL: "openai/small"}
    assert CONF_FALLBACK_MODEL not in agent.data
    assert agent.data[CONF_VISION_MODEL] == {CONF_MODEL: "openai/gpt-4o-mini"}
    assert agent.data[CONF_CAMERAS] is False
    assert agent.data[CONF_ACTIVITY_CONTENTS] is True

    # Reconfiguring shows the stored section values.
    result = await hass.config_entries.subentries.async_init(
        (entry.entry_id, SUBENTRY_CONVERSATION),
        context={"source": config_entries.SOURCE_RECONFIGURE, "subentry_id": agent.subentry_id},
    )
    fast_section = next(
        value for key, value in result["data_schema"].schema.items() if str(key) == CONF_FAST_MODEL
    )
    suggested = {
        str(key): key.description["suggested_value"]
        for key in fast_section.schema.schema
        if key.description
    }
    assert suggested == {CONF_MODEL: "openai/small"}


@pytest.mark.parametrize("agent_overrides", [{CONF_FALLBACK_MODEL: "backup-test"}], indirect=True)
async def test_diagnostics_hide_role_keys(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    hass_client: ClientSessionGenerator,
) -> None:
    """A role's own key is redacted like the entry's; its model string stays."""
    assert await async_setup_component(hass, "diagnostics", {})
    diagnostics = await get_diagnostics_for_config_entry(hass, hass_client, setup_integration)
    assert OTHER_KEY not in str(diagnostics)
    fallback = diagnostics["agents"][0]["options"][CONF_FALLBACK_MODEL]
    assert fallback[CONF_API_KEY] == "**REDACTED**"
    assert fallback[CONF_MODEL] == "openai/backup-test"
