"""Every request fits the model's context window (agent/graph/window.py), against the fake Ollama.

The fake counts the prompt with a tokenizer of its own (fakes/ollama_server.py) and
applies the window each request names; "fits" below is its judgement, not the agent's.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_capture_events

from custom_components.langgraph_conversation.agent.graph import (
    PromptLayers,
    WindowTooSmall,
    plan_turn,
)
from custom_components.langgraph_conversation.agent.graph.history import SUMMARY_INSTRUCTIONS
from custom_components.langgraph_conversation.agent.graph.window import (
    WindowPlan,
    message_tokens,
    truncated,
)
from custom_components.langgraph_conversation.const import (
    CONF_AGENT_KIND,
    CONF_CONTEXT_WINDOW,
    CONF_HISTORY_BUDGET,
    CONF_LLM_HASS_API,
    CONF_MAX_TOKENS,
    CONF_MEMORY,
    CONF_TOOL_CATEGORIES,
    DOMAIN,
    EVENT_ACTIVITY,
)
from custom_components.langgraph_conversation.window_issue import issue_id
from fakes import FakeOllamaServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import issue_registry as ir

from ...conftest import agent_entity_id
from ...helpers import assist_tool_name, setup_ollama_entry

# -- the plan, without a server ------------------------------------------------------


def _turn(n: int, words: int = 40) -> list[Any]:
    return [HumanMessage(f"question {n} " + "word " * words), AIMessage(f"answer {n} " * 10)]


def test_older_turns_go_first_and_whole() -> None:
    system = SystemMessage("You are a home assistant.")
    tool_round = [
        HumanMessage("lights on"),
        AIMessage("", tool_calls=[{"name": "HassTurnOn", "args": {}, "id": "c1"}]),
        ToolMessage("done", tool_call_id="c1"),
    ]
    history = [m for n in range(10) for m in _turn(n)]
    prompt = [system, *history, *tool_round]
    # Room for the system prompt, the tool round and two earlier turns.
    room = sum(message_tokens(m) for m in [system, *tool_round, *history[-4:]])
    plan = WindowPlan(window=room + 300, reply=200, tools=100)
    fitted, report = plan.fit(prompt)
    assert fitted == [system, *history[-4:], *tool_round]
    assert report is not None
    assert (report.history_dropped, report.fits) == (16, True)
    assert report.tokens <= plan.window
    # Enough room: nothing is touched, nothing reported.
    assert WindowPlan(window=100_000, reply=200, tools=100).fit(prompt) == (prompt, None)


def test_the_current_turn_is_never_cut() -> None:
    system = SystemMessage("You are a home assistant.")
    prompt = [system, *_turn(1), HumanMessage("word " * 2000)]
    fitted, report = WindowPlan(window=1000, reply=200, tools=0).fit(prompt)
    assert fitted == [system, prompt[-1]]
    assert report is not None
    assert not report.fits


class _Tool:
    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size


def _schema(tool: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool.name, "description": "x" * tool.size}}


def test_the_plan_compacts_then_drops_optional_tools() -> None:
    layers = PromptLayers(base="Be brief.", instructions="Devices: " + "lamp, " * 2000)
    tools: list[Any] = [
        _Tool("HassTurnOn", 700),
        _Tool("home_find_entities", 700),
        _Tool("home_media_search", 12000),
    ]
    request = [HumanMessage("lights on")]
    compact = "Devices by area: 3 lamps. Use home_find_entities."
    fit = plan_turn(
        4096,
        1024,
        layers,
        tools,
        _schema,
        request,
        optional_tools=frozenset({"home_find_entities", "home_media_search"}),
        compact_instructions=lambda: compact,
    )
    assert fit.prompt.instructions == compact
    # The compact instructions name home_find_entities: it stays.
    assert [t.name for t in fit.tools] == ["HassTurnOn", "home_find_entities"]
    assert (fit.plan.compacted, fit.plan.tools_dropped) == (True, ("home_media_search",))
    # Fits as it is: nothing changes.
    small = plan_turn(100_000, 1024, layers, tools, _schema, request)
    assert (small.prompt, small.tools, small.plan.compacted) == (layers, tools, False)


def test_entity_search_comes_with_the_compact_listing_only() -> None:
    """A tool offered only without the listing joins the request when the listing is
    compacted to fit, and is never the one dropped; while the listing fits it stays out."""
    layers = PromptLayers(base="Be brief.", instructions="Devices: " + "lamp, " * 2000)
    tools: list[Any] = [_Tool("HassTurnOn", 700), _Tool("home_media_search", 12000)]
    search: list[Any] = [_Tool("home_find_entities", 700)]
    request = [HumanMessage("lights on")]
    fit = plan_turn(
        4096,
        1024,
        layers,
        tools,
        _schema,
        request,
        optional_tools=frozenset({"home_media_search"}),
        compact_instructions=lambda: "Devices by area: 3 lamps.",
        compact_tools=search,
    )
    assert [t.name for t in fit.tools] == ["HassTurnOn", "home_find_entities"]
    assert (fit.plan.compacted, fit.plan.tools_dropped) == (True, ("home_media_search",))
    roomy = plan_turn(100_000, 1024, layers, tools, _schema, request, compact_tools=search)
    assert (roomy.tools, roomy.plan.compacted) == (tools, False)


def test_a_request_that_cannot_fit_says_so() -> None:
    layers = PromptLayers(base="Be brief.", instructions="x" * 20_000)
    with pytest.raises(WindowTooSmall) as raised:
        plan_turn(2048, 1024, layers, [], _schema, [HumanMessage("hi")])
    assert raised.value.window == 2048


def test_truncation_is_a_count_clearly_below_what_was_sent() -> None:
    assert truncated(4000, 1024)
    assert not truncated(4000, 3300)
    assert not truncated(4000, None)
    assert not truncated(4000, 0)


def test_truncation_catches_the_cuts_a_planned_request_can_suffer() -> None:
    """A request planned for a 4,096 window (reply budget 1,024: about 3,072 sent) that
    Ollama cut to half its window reads 2,048: two thirds of the estimate, which a 0.6
    bound missed."""
    assert truncated(3072, 2048)
    assert truncated(7168, 4096)
    # Read in full, with a tokenizer coarser than the estimate: no cut.
    assert not truncated(3072, 2600)
    assert not truncated(7000, 5800)


# -- against the fake Ollama through Home Assistant -----------------------------------

_DOMAINS = ("light", "switch", "sensor", "cover", "binary_sensor")


def add_home(hass: HomeAssistant, count: int) -> None:
    """`count` exposed entities over ten areas' worth of names."""
    for n in range(count):
        domain = _DOMAINS[n % len(_DOMAINS)]
        entity_id = f"{domain}.device_{n}"
        attributes: dict[str, Any] = {"friendly_name": f"Room {n // 10} {domain} {n}"}
        if domain == "light":
            attributes["supported_color_modes"] = ["brightness"]
        hass.states.async_set(entity_id, "off", attributes)
        async_expose_entity(hass, conversation.DOMAIN, entity_id, True)


async def _ask(
    hass: HomeAssistant, entry: MockConfigEntry, text: str, conversation_id: str | None = None
) -> str:
    result = await conversation.async_converse(
        hass, text, conversation_id, Context(), agent_id=agent_entity_id(hass, entry)
    )
    return result.response.speech["plain"]["speech"]


def _within_windows(server: FakeOllamaServer) -> list[tuple[int, int]]:
    """(tokens, window) of every request that was over its window."""
    return [(m.tokens, m.window) for m in server.prompts if m.tokens > m.window]


async def _tool_round(hass: HomeAssistant, entry: MockConfigEntry, server: FakeOllamaServer) -> str:
    tool = await assist_tool_name(hass, "HassTurnOn")
    server.add_tool_calls([ToolCall(tool, {"name": "Room 0 light 0"})])
    server.add_text("Done.")
    return await _ask(hass, entry, "Turn on Room 0 light 0", "home")


async def test_a_large_home_fits_the_default_window(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    entry = await setup_ollama_entry(hass, ollama_server)
    add_home(hass, 100)
    assert await _tool_round(hass, entry, ollama_server) == "Done."
    for n in range(3):
        ollama_server.add_text(f"Answer {n}.")
        assert await _ask(hass, entry, f"What about room {n}?", "home") == f"Answer {n}."
    assert len(ollama_server.prompts) == 5
    assert {m.window for m in ollama_server.prompts} == {8192}
    assert _within_windows(ollama_server) == []
    # The listing is in the prompt: no entity search next to it.
    tools = {tool["function"]["name"] for tool in ollama_server.requests[0]["tools"]}
    assert "home_find_entities" not in tools


async def test_a_100_entity_home_fits_a_small_window_untrimmed(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """4,096 tokens: with its listing grouped by area, a 100-entity home needs no trimming."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    entry = await setup_ollama_entry(hass, ollama_server, **{CONF_CONTEXT_WINDOW: 4096})
    add_home(hass, 100)
    assert await _tool_round(hass, entry, ollama_server) == "Done."
    assert {m.window for m in ollama_server.prompts} == {4096}
    assert _within_windows(ollama_server) == []
    assert not [e for e in events if e.data["type"] == "request_trimmed"]


async def test_a_large_home_still_works_in_a_small_window(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """4,096 tokens: a 600-entity home's listing goes compact (entity search joins) and
    optional tools go, as reported."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    entry = await setup_ollama_entry(hass, ollama_server, **{CONF_CONTEXT_WINDOW: 4096})
    add_home(hass, 600)
    assert await _tool_round(hass, entry, ollama_server) == "Done."
    assert {m.window for m in ollama_server.prompts} == {4096}
    assert _within_windows(ollama_server) == []
    trimmed = [e.data for e in events if e.data["type"] == "request_trimmed"]
    assert trimmed
    assert trimmed[0]["compacted"]
    assert trimmed[0]["window"] == 4096
    assert trimmed[0]["tokens"] <= 4096
    # Home Assistant's own tools stay: the call above went through.
    first = ollama_server.requests[0]
    names = [tool["function"]["name"] for tool in first["tools"]]
    assert await assist_tool_name(hass, "HassTurnOn") in names
    assert not set(trimmed[0]["tools_dropped"]) & set(names)
    # Without the listing the model finds names with entity search, which comes with it.
    assert "home_find_entities" in names


async def test_a_long_conversation_leaves_older_turns_out(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """The thread keeps growing; each request carries the newest turns that fit."""
    entry = await setup_ollama_entry(
        hass,
        ollama_server,
        **{
            CONF_CONTEXT_WINDOW: 2048,
            CONF_MAX_TOKENS: 256,
            CONF_HISTORY_BUDGET: 0,  # keep everything in the thread: only requests trim
            CONF_LLM_HASS_API: [],
            CONF_TOOL_CATEGORIES: [],
            CONF_MEMORY: False,
        },
    )
    events = async_capture_events(hass, EVENT_ACTIVITY)
    for n in range(25):
        ollama_server.add_text(f"Noted {n}. " + "fine " * 30)
        await _ask(hass, entry, f"Fact number {n}: " + "the garden needs water " * 5, "garden")
    assert _within_windows(ollama_server) == []
    last = ollama_server.requests[-1]["messages"]
    assert last[-1]["content"].startswith("Fact number 24")
    assert not any("Fact number 0:" in (m.get("content") or "") for m in last)
    trimmed = [e.data for e in events if e.data["type"] == "request_trimmed"]
    assert trimmed
    assert trimmed[-1]["history_dropped"] > 0
    assert not trimmed[-1]["compacted"]


async def test_a_window_too_small_gets_one_sentence(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    entry = await setup_ollama_entry(
        hass, ollama_server, **{CONF_CONTEXT_WINDOW: 2048, CONF_MAX_TOKENS: 1900}
    )
    add_home(hass, 100)
    speech = await _ask(hass, entry, "Lights on")
    assert speech.startswith("This request does not fit the model's context window")
    assert "raise the agent's context window" in speech
    assert ollama_server.request_count == 0


async def test_a_cut_prompt_raises_a_repair_issue(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """A model whose tokenizer needs more tokens than the agent counted: Ollama cuts."""
    # Two characters per token (text in a script a small vocabulary splits finely).
    ollama_server.chars_per_token = 2.0
    entry = await setup_ollama_entry(
        hass,
        ollama_server,
        **{
            CONF_AGENT_KIND: "chatbot",
            CONF_CONTEXT_WINDOW: 2048,
            CONF_MAX_TOKENS: 64,
            CONF_HISTORY_BUDGET: 0,
            CONF_MEMORY: False,
        },
    )
    events = async_capture_events(hass, EVENT_ACTIVITY)
    registry = ir.async_get(hass)
    subentry_id = next(iter(entry.subentries))
    for n in range(30):
        ollama_server.add_text(f"Noted {n}.")
        await _ask(hass, entry, f"Fact number {n}: " + "the garden needs water " * 6, "garden")
        if registry.async_get_issue(DOMAIN, issue_id(subentry_id)):
            break
    issue = registry.async_get_issue(DOMAIN, issue_id(subentry_id))
    assert issue is not None
    assert issue.translation_key == "context_window_too_small"
    assert issue.translation_placeholders["window"] == "2048"
    cut = [e.data for e in events if e.data["type"] == "prompt_truncated"]
    assert cut
    assert cut[-1]["evaluated_tokens"] == 1024
    assert any(m.truncated for m in ollama_server.prompts)

    # Set up again (as after a change of options): the issue is gone.
    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    assert registry.async_get_issue(DOMAIN, issue_id(subentry_id)) is None


async def test_no_issue_when_the_count_matches(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    entry = await setup_ollama_entry(
        hass,
        ollama_server,
        **{CONF_AGENT_KIND: "chatbot", CONF_CONTEXT_WINDOW: 2048, CONF_MAX_TOKENS: 64},
    )
    events = async_capture_events(hass, EVENT_ACTIVITY)
    for n in range(15):
        ollama_server.add_text(f"Noted {n}.")
        await _ask(hass, entry, f"Fact number {n}: " + "the garden needs water " * 6, "garden")
    assert not any(m.truncated for m in ollama_server.prompts)
    assert not [e for e in events if e.data["type"] == "prompt_truncated"]
    assert not ir.async_get(hass).async_get_issue(DOMAIN, issue_id(next(iter(entry.subentries))))


async def test_old_turns_are_summarised_within_the_window(
    hass: HomeAssistant, ollama_server: FakeOllamaServer
) -> None:
    """The history budget (4,000 by default) is held to what a small window leaves."""
    entry = await setup_ollama_entry(
        hass,
        ollama_server,
        **{CONF_AGENT_KIND: "chatbot", CONF_CONTEXT_WINDOW: 2048, CONF_MAX_TOKENS: 64},
    )
    for n in range(14):
        ollama_server.add_text(f"Noted {n}. " + "fine " * 60)
        await _ask(hass, entry, f"Fact number {n}: " + "the garden needs water " * 15, "garden")
    # About 2,400 tokens of history, below 4,000, yet summarised: the window leaves less.
    await ollama_server.wait_for_requests(15)
    summaries = [
        r
        for r in ollama_server.requests
        if r["messages"][0]["content"].startswith(SUMMARY_INSTRUCTIONS[:40])
    ]
    assert summaries
