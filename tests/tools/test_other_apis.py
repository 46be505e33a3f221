"""Every LLM API the home offers, together: Assist and another API in the same turn.

The other API is registered through Home Assistant's own `llm` helper (as an integration
registers one), or is Home Assistant's MCP client integration against a small MCP server
on 127.0.0.1 (fakes/mcp_server.py). The model is the fake OpenAI server; what counts is
what Home Assistant and the MCP server actually received, and what the model was sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
import json
import re
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service
import voluptuous as vol

from custom_components.langgraph_conversation.const import CONF_LLM_HASS_API
from custom_components.langgraph_conversation.tools.ha_llm_api import (
    distinct_names,
    intent_of,
    tools_from_llm_api,
)
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import llm
from homeassistant.util.json import JsonObjectType

from ..conftest import agent_entity_id
from ..helpers import messages_of, text_of

GARDEN_API = "garden_api"
# The names another API gives its tools: two like Assist's intents and ours, one with a
# character providers refuse; none of them may confuse the agent or reach the model twice.
UNLOCK_TOOL = "unlock_door"
READ_TOOL = "door_report"
LIKE_AN_INTENT = "HassTurnOn"
LIKE_OURS = "home_get_state"
DOTTED = "garden.status"
# Parameters Assist's rules would trim (no floors in the home, no exposed entity of
# either class): another API's parameters mean what that API says, and stay.
OWN_PARAMETERS = vol.Schema(
    {vol.Optional("floor"): str, vol.Optional("device_class"): vol.In(["moisture", "door"])}
)
# What every provider accepts as a function name.
VALID_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


def _result(data: dict[str, Any]) -> Any:
    """A tool's answer as the running Home Assistant wants it (2026.10+: a ToolResult)."""
    return llm.ToolResult(data=data) if hasattr(llm, "ToolResult") else data


class GardenTool(llm.Tool):
    """A tool of the other API: `act(hass, args, llm_context)` is what it does."""

    def __init__(self, name: str, description: str, parameters: vol.Schema, act: Any) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters
        self._act = act

    async def async_call(
        self, hass: HomeAssistant, tool_input: llm.ToolInput, llm_context: llm.LLMContext
    ) -> JsonObjectType:
        return _result(await self._act(hass, tool_input.tool_args, llm_context))


class GardenAPI(llm.API):
    """Another integration's LLM API: unlock a door (a service call), read a door's state,
    and tools named like an Assist intent, like one of ours, and with a dot."""

    passes_context: bool = True

    async def async_get_api_instance(self, llm_context: llm.LLMContext) -> llm.APIInstance:
        passes_context = type(self).passes_context

        async def unlock(
            hass: HomeAssistant, args: dict[str, Any], ctx: llm.LLMContext
        ) -> dict[str, Any]:
            # A careless integration leaves the Context out; the gate holds the call anyway.
            await hass.services.async_call(
                "lock",
                "unlock",
                {"entity_id": args["entity_id"]},
                blocking=True,
                context=ctx.context if passes_context else None,
            )
            return {"unlocked": args["entity_id"]}

        async def report(
            hass: HomeAssistant, args: dict[str, Any], ctx: llm.LLMContext
        ) -> dict[str, Any]:
            state = hass.states.get(args["entity_id"])
            return {"door": args["entity_id"], "state": state.state if state else "unknown"}

        async def nothing(
            hass: HomeAssistant, args: dict[str, Any], ctx: llm.LLMContext
        ) -> dict[str, Any]:
            return {"garden": "fine"}

        entity = vol.Schema({vol.Required("entity_id"): str})
        tools = [
            GardenTool(UNLOCK_TOOL, "Unlock a door of the garden.", entity, unlock),
            GardenTool(READ_TOOL, "Whether a garden door is locked.", entity, report),
            GardenTool(LIKE_AN_INTENT, "Turn on the garden fountain.", vol.Schema({}), nothing),
            GardenTool(LIKE_OURS, "The garden's state.", vol.Schema({}), nothing),
            GardenTool(DOTTED, "The garden's status.", OWN_PARAMETERS, nothing),
        ]
        return llm.APIInstance(
            api=self,
            api_prompt="Garden tools act on the garden.",
            llm_context=llm_context,
            tools=tools,
        )


@pytest.fixture
def agent_overrides() -> dict[str, Any]:
    """The test agent uses Assist and the garden API."""
    return {CONF_LLM_HASS_API: [llm.LLM_API_ASSIST, GARDEN_API]}


@pytest.fixture
async def garden_api(hass: HomeAssistant) -> AsyncIterator[type[GardenAPI]]:
    """The garden API, registered through Home Assistant's llm helper."""
    unregister = llm.async_register_api(hass, GardenAPI(hass=hass, id=GARDEN_API, name="Garden"))
    yield GardenAPI
    unregister()
    GardenAPI.passes_context = True


def _home(hass: HomeAssistant) -> dict[str, list[Any]]:
    """An exposed locked front door and an exposed hall light; the services they get."""
    hass.states.async_set("lock.front_door", "locked", {"friendly_name": "Front Door"})
    hass.states.async_set(
        "light.hall_light",
        "off",
        {"friendly_name": "Hall Light", "supported_color_modes": ["onoff"]},
    )
    for entity_id in ("lock.front_door", "light.hall_light"):
        async_expose_entity(hass, conversation.DOMAIN, entity_id, True)
    return {
        "unlock": async_mock_service(hass, "lock", "unlock"),
        "turn_on": async_mock_service(hass, "light", "turn_on"),
    }


async def _converse(
    hass: HomeAssistant, entry: MockConfigEntry, text: str, conversation_id: str | None
) -> conversation.ConversationResult:
    return await conversation.async_converse(
        hass, text, conversation_id, Context(), agent_id=agent_entity_id(hass, entry)
    )


async def _offered_names(
    hass: HomeAssistant, entry: MockConfigEntry, server: FakeOpenAIServer
) -> list[str]:
    """The tool names the model is offered (one turn answered with text)."""
    server.add_text("Hello.")
    await _converse(hass, entry, "Hello", None)
    return [tool["function"]["name"] for tool in server.requests[-1]["tools"]]


def _offered(names: list[str], ending: str) -> str:
    found = [name for name in names if name == ending or name.endswith(f"__{ending}")]
    assert len(found) == 1, (ending, names)
    return found[0]


def _assist_intent(names: list[str], intent: str) -> str:
    """Assist's tool for `intent` among the offered names (the garden has a namesake)."""
    return next(
        name
        for name in names
        if name == intent
        or (name.endswith(f"__{intent}") and {"assist", "intent"} & set(name.split("__")[:-1]))
    )


def _is_garden_tool(tool: llm.Tool) -> bool:
    while isinstance(tool, llm.NamespacedTool):
        tool = tool.tool
    return isinstance(tool, GardenTool)


def _assert_names_fit(server: FakeOpenAIServer) -> None:
    """In every request: no name twice, and each one every provider accepts."""
    assert server.requests
    for request in server.requests:
        names = [tool["function"]["name"] for tool in request.get("tools") or []]
        assert len(names) == len(set(names)), names
        assert all(VALID_NAME.match(name) for name in names), names


@pytest.mark.parametrize("passes_context", [True, False], ids=["with_context", "no_context"])
async def test_assist_and_another_api_in_one_round_unlock_waits_for_yes(
    hass: HomeAssistant,
    garden_api: type[GardenAPI],
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    passes_context: bool,
) -> None:
    """The model calls Assist's HassTurnOn, the garden API's read tool and its unlock in
    one round: the light goes on and the door is read at once; the unlock (with or without
    the tool passing its Context on) waits for the yes and runs once after it."""
    garden_api.passes_context = passes_context
    called = _home(hass)
    names = await _offered_names(hass, setup_integration, openai_server)
    turn_on = _assist_intent(names, "HassTurnOn")
    openai_server.add_tool_calls(
        [
            ToolCall(turn_on, {"name": "Hall Light"}),
            ToolCall(_offered(names, READ_TOOL), {"entity_id": "lock.front_door"}),
            ToolCall(_offered(names, UNLOCK_TOOL), {"entity_id": "lock.front_door"}),
        ]
    )
    first = await _converse(hass, setup_integration, "Hall light on, is the door locked?", None)
    await hass.async_block_till_done()
    speech = first.response.speech["plain"]["speech"]
    assert "unlock Front Door" in speech, speech
    assert called["unlock"] == []
    assert [call.data["entity_id"] for call in called["turn_on"]] in (
        [["light.hall_light"]],
        ["light.hall_light"],
    )

    openai_server.add_text("The light is on and the door is unlocked.")
    await _converse(hass, setup_integration, "yes", first.conversation_id)
    await hass.async_block_till_done()
    assert [call.data["entity_id"] for call in called["unlock"]] in (
        [["lock.front_door"]],
        ["lock.front_door"],
    )
    # The model got each call's answer: the read's state, the unlock done.
    results = " ".join(text_of(m) for m in messages_of(openai_server.requests[-1], "tool"))
    assert "locked" in results
    assert "unlock Front Door" in results
    _assert_names_fit(openai_server)


async def test_a_no_leaves_the_other_apis_unlock_undone(
    hass: HomeAssistant,
    garden_api: type[GardenAPI],
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
) -> None:
    """Not a yes: Home Assistant never receives the unlock."""
    called = _home(hass)
    names = await _offered_names(hass, setup_integration, openai_server)
    openai_server.add_tool_calls(
        [ToolCall(_offered(names, UNLOCK_TOOL), {"entity_id": "lock.front_door"})]
    )
    first = await _converse(hass, setup_integration, "Unlock the garden door", None)
    openai_server.add_text("Left locked.")
    await _converse(hass, setup_integration, "no", first.conversation_id)
    await hass.async_block_till_done()
    assert called["unlock"] == []


async def test_names_of_other_apis_are_told_apart(
    hass: HomeAssistant,
    garden_api: type[GardenAPI],
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
) -> None:
    """The garden's tools named like an intent, like ours and with a dot each reach the
    model once, under a name providers accept, apart from Assist's HassTurnOn and ours;
    the one named like an intent is no intent (it does not stand in for Assist's)."""
    _home(hass)
    names = await _offered_names(hass, setup_integration, openai_server)
    _assert_names_fit(openai_server)
    assert sum(name.endswith(LIKE_AN_INTENT) for name in names) == 2, names
    assert sum(LIKE_OURS in name for name in names) >= 1, names
    assert any("garden" in name and "status" in name for name in names), names
    # Whatever Home Assistant called them, the garden's tools are never intents.
    api = await llm.async_get_api(
        hass,
        [llm.LLM_API_ASSIST, GARDEN_API],
        llm.LLMContext(
            platform="test",
            context=Context(),
            language="en",
            assistant=conversation.DOMAIN,
            device_id=None,
        ),
    )
    garden = [intent_of(tool) for tool in api.tools if _is_garden_tool(tool)]
    assert garden == [None] * 5
    assert "HassTurnOn" in {intent_of(tool) for tool in api.tools if not _is_garden_tool(tool)}
    # The dotted name is renamed for the model; a call still reaches the garden's tool.
    tools = distinct_names(tools_from_llm_api(hass, api), {LIKE_OURS})
    dotted = next(tool for tool in tools if "status" in tool.name)
    assert VALID_NAME.match(dotted.name)
    assert await dotted.coroutine() == {"garden": "fine"}
    properties = dotted.args_schema["properties"]
    assert set(properties) == {"floor", "device_class"}
    assert properties["device_class"]["enum"] == ["moisture", "door"]


def test_distinct_names_keeps_every_tool_apart() -> None:
    """Generated colliding and unfit names: all kept, none twice, none of ours, all fit."""
    from langchain_core.tools import StructuredTool

    async def run() -> str:
        return "ok"

    raw = ["search", "search", "search_2", "files.read", "files/read", "9lives", "x" * 80]
    raw += ["x" * 80, "home_get_state", "", "ümlaut tool"]
    tools = [
        StructuredTool(name=name, description="d", args_schema={"type": "object"}, coroutine=run)
        for name in raw
    ]
    named = distinct_names(tools, {"home_get_state"})
    names = [tool.name for tool in named]
    assert len(named) == len(raw)
    assert len(set(names)) == len(names), names
    assert "home_get_state" not in names
    assert all(VALID_NAME.match(name) for name in names), names
    # Fit names are kept as they are.
    assert names[0] == "search"
    assert json.dumps(names)


# Home Assistant's MCP client registers one LLM API per server, "mcp-<entry id>".
MCP_ENTRY_ID = "garden_mcp"
MCP_API = f"mcp-{MCP_ENTRY_ID}"


@pytest.fixture
async def mcp_server(socket_enabled: None) -> AsyncIterator[Any]:
    """A small MCP server on 127.0.0.1 (the mcp package Home Assistant's client pins)."""
    module = pytest.importorskip(
        "fakes.mcp_server", reason="the mcp package is not installed on this leg"
    )
    async with module.GardenMcpServer() as server:
        yield server


@pytest.mark.parametrize(
    "agent_overrides", [{CONF_LLM_HASS_API: [llm.LLM_API_ASSIST, MCP_API]}], ids=["assist+mcp"]
)
async def test_assist_and_an_mcp_server_in_one_round(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    mcp_server: Any,
) -> None:
    """Home Assistant's MCP client against a real MCP server: the model calls Assist's
    HassTurnOn and the server's tool in one round; the server gets the call, the light
    goes on, and the model reads both answers."""
    called = _home(hass)
    entry = MockConfigEntry(
        domain="mcp", entry_id=MCP_ENTRY_ID, title="Garden", data={"url": mcp_server.url}
    )
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    names = await _offered_names(hass, setup_integration, openai_server)
    soil = _offered(names, "soil_moisture")
    openai_server.add_tool_calls(
        [
            ToolCall(_assist_intent(names, "HassTurnOn"), {"name": "Hall Light"}),
            ToolCall(soil, {"bed": "roses"}),
        ]
    )
    openai_server.add_text("The light is on; the roses' soil is at 31 %.")
    result = await _converse(hass, setup_integration, "Hall light on; how wet are the roses?", None)
    await hass.async_block_till_done()
    assert "31 %" in result.response.speech["plain"]["speech"]
    assert mcp_server.calls == [("soil_moisture", {"bed": "roses"})]
    assert len(called["turn_on"]) == 1
    results = [text_of(m) for m in messages_of(openai_server.requests[-1], "tool")]
    assert len(results) == 2
    assert any("31 % soil moisture" in text for text in results), results
    _assert_names_fit(openai_server)
    assert await hass.config_entries.async_unload(entry.entry_id)


async def test_an_api_that_is_gone_leaves_assist_working(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The garden API is chosen but not registered (an MCP server that is down): the turn
    goes on with Assist's tools, and the log names the missing API."""
    called = _home(hass)
    names = await _offered_names(hass, setup_integration, openai_server)
    assert not any(_is_garden_name(name) for name in names), names
    openai_server.add_tool_calls(
        [ToolCall(_assist_intent(names, "HassTurnOn"), {"name": "Hall Light"})]
    )
    openai_server.add_text("The hall light is on.")
    result = await _converse(hass, setup_integration, "Hall light on", None)
    await hass.async_block_till_done()
    assert result.response.speech["plain"]["speech"] == "The hall light is on."
    assert len(called["turn_on"]) == 1
    assert GARDEN_API in caplog.text


def _is_garden_name(name: str) -> bool:
    return any(part in name for part in (UNLOCK_TOOL, READ_TOOL, "garden"))
