"""Tool schemas: what providers accept (OpenAI, Anthropic, Gemini's subset, Ollama)."""

from __future__ import annotations

from enum import StrEnum
import json
from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool
import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_mock_service
import voluptuous as vol

from custom_components.langgraph_conversation.agent.graph import openai_tool
from custom_components.langgraph_conversation.const import CONF_LLM_HASS_API
from custom_components.langgraph_conversation.tools import schema as tool_schema
from custom_components.langgraph_conversation.tools.ha_llm_api import tools_from_llm_api
from custom_components.langgraph_conversation.tools.schema import (
    sanitize_schema,
    schema_to_json,
    tool_parameters,
    without_unmatchable,
)
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import floor_registry as fr, llm
from homeassistant.setup import async_setup_component

from ..conftest import agent_entity_id
from ..helpers import add_light, assist_api, assist_tool_name, messages_of, text_of


class Color(StrEnum):
    """Enum members differ by value only: a fingerprint must tell them apart."""

    RED = "red"
    BLUE = "blue"


# The keywords every provider in the reference notes accepts.
ALLOWED = {
    "type",
    "description",
    "properties",
    "required",
    "items",
    "enum",
    "anyOf",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "nullable",
}
TOP_LEVEL_FORBIDDEN = {"anyOf", "oneOf", "allOf", "enum", "not"}


def assert_provider_safe(schema: dict[str, Any], path: str = "$") -> None:
    """Fail with the path of the first construct some provider would reject."""
    assert set(schema) <= ALLOWED, f"{path}: {set(schema) - ALLOWED}"
    if "type" in schema:
        assert isinstance(schema["type"], str), f"{path}: type lists are not accepted by Gemini"
    for name, sub in schema.get("properties", {}).items():
        assert_provider_safe(sub, f"{path}.{name}")
    if "items" in schema:
        assert_provider_safe(schema["items"], f"{path}[]")
    for index, sub in enumerate(schema.get("anyOf", [])):
        assert_provider_safe(sub, f"{path}|{index}")


def assert_tool_schema(schema: dict[str, Any]) -> None:
    """A tool's parameters: an object at the top, with no combinators there."""
    assert schema["type"] == "object"
    assert isinstance(schema["properties"], dict)
    assert not TOP_LEVEL_FORBIDDEN & set(schema)
    assert set(schema.get("required", [])) <= set(schema["properties"])
    assert_provider_safe(schema)


async def test_every_assist_tool_is_provider_safe(hass: HomeAssistant) -> None:
    """Every tool Home Assistant's Assist API offers converts to a safe schema."""
    for component in ("homeassistant", "conversation", "intent", "script", "todo", "calendar"):
        assert await async_setup_component(hass, component, {})
    assert await async_setup_component(
        hass,
        "script",
        {
            "script": {
                "movie_night": {
                    "alias": "Movie night",
                    "fields": {
                        "brightness": {"selector": {"number": {"min": 0, "max": 100}}},
                        "when": {"selector": {"datetime": {}}},
                        "room": {"selector": {"select": {"options": ["den", "lounge"]}}},
                    },
                    "sequence": [],
                }
            }
        },
    )
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    tools = tools_from_llm_api(hass, await assist_api(hass))
    assert len(tools) >= 5
    for tool in tools:
        # What the model is bound with is exactly langchain's conversion.
        assert openai_tool(tool) == convert_to_openai_tool(tool)
        spec = convert_to_openai_tool(tool)["function"]
        assert spec["name"] == tool.name
        assert 0 < len(spec["name"]) <= 64
        assert_tool_schema(spec["parameters"])


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}},
            {"type": "object", "properties": {"when": {"type": "string"}}},
        ),
        (
            {"type": "object", "properties": {"x": {"type": ["integer", "null"]}}},
            {"type": "object", "properties": {"x": {"type": "integer", "nullable": True}}},
        ),
        (
            {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "number"}}},
                ]
            },
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "number"}},
                "required": ["a"],
            },
        ),
        (
            {
                "anyOf": [
                    {"properties": {"name": {"type": "string"}}},
                    {"properties": {"area": {"type": "string"}}},
                ]
            },
            {
                "type": "object",
                "properties": {"name": {"type": "string"}, "area": {"type": "string"}},
            },
        ),
        (
            {
                "type": "object",
                "properties": {"v": {"oneOf": [{"type": "string"}]}},
                "additionalProperties": False,
            },
            {"type": "object", "properties": {"v": {"type": "string"}}},
        ),
        ({}, {"type": "object", "properties": {}}),
    ],
)
def test_sanitize_schema(raw: dict[str, Any], expected: dict[str, Any]) -> None:
    """Formats, type lists, combinators and unknown keywords are folded away."""
    result = sanitize_schema(raw)
    assert result == expected
    assert_tool_schema(result)


def test_every_tool_of_ours_is_provider_safe() -> None:
    """Our own tools (all categories) and the memory tool pass the same checks."""
    from langgraph.store.memory import InMemoryStore

    from custom_components.langgraph_conversation.agent.memory import MemoryScope, memory_tools
    from custom_components.langgraph_conversation.tools import TOOLS
    from custom_components.langgraph_conversation.tools.registry import (
        ToolContext,
        as_langchain_tools,
    )

    specs = TOOLS.specs(TOOLS.categories)
    assert {spec.category for spec in specs} == {
        "entities",
        "lights",
        "media",
        "weather",
        "history",
    }
    names = [spec.name for spec in specs]
    assert len(names) == len(set(names))
    for spec in specs:
        assert spec.name.startswith("home_")
        assert sanitize_schema(spec.parameters) == spec.parameters, spec.name
        assert_tool_schema(spec.parameters)
    for tool in memory_tools(InMemoryStore(), MemoryScope.for_user(None)):
        assert_tool_schema(convert_to_openai_tool(tool)["function"]["parameters"])
        assert openai_tool(tool) == convert_to_openai_tool(tool)
    context = ToolContext(hass=None, context=None, language="en")  # type: ignore[arg-type]
    for tool in as_langchain_tools(specs, context):
        assert openai_tool(tool) == convert_to_openai_tool(tool)


async def test_assist_tools_are_converted_once_per_distinct_schema(hass: HomeAssistant) -> None:
    """Every turn brings new tool objects; equal schemas reuse the first conversion."""
    for component in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, component, {})
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    tool_schema._converted.clear()
    first = await assist_api(hass)
    converted = [tool_parameters(t.parameters, first.custom_serializer) for t in first.tools]
    kept = len(tool_schema._converted)
    assert 0 < kept <= len(first.tools)
    second = await assist_api(hass)
    assert {id(t) for t in first.tools}.isdisjoint(id(t) for t in second.tools)
    for tool, before in zip(second.tools, converted, strict=True):
        fresh = sanitize_schema(schema_to_json(tool.parameters, second.custom_serializer))
        again = tool_parameters(tool.parameters, second.custom_serializer)
        assert again == fresh == before
    assert len(tool_schema._converted) == kept


async def test_a_turns_assist_tools_are_known_without_walking_them(
    hass: HomeAssistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new turn's Assist tools hold the same validators as the last turn's: they are
    known by them, without the fingerprint's walk, and convert the same; the shared
    conversions the tool path reads stay as converted."""
    for component in ("homeassistant", "conversation", "intent"):
        assert await async_setup_component(hass, component, {})
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    tool_schema._converted.clear()
    tool_schema._known.clear()
    first = await assist_api(hass)
    expected = {tool.name: openai_tool(tool) for tool in tools_from_llm_api(hass, first)}
    assert tool_schema._known

    def no_walk(value: Any, path: Any = None) -> Any:
        raise AssertionError("fingerprinted a schema already known")

    monkeypatch.setattr(tool_schema, "_fingerprint", no_walk)
    second = await assist_api(hass)
    assert {id(t) for t in first.tools}.isdisjoint(id(t) for t in second.tools)
    again = {tool.name: openai_tool(tool) for tool in tools_from_llm_api(hass, second)}
    assert again == expected
    for tool in second.tools:
        assert tool_parameters(tool.parameters, second.custom_serializer) == sanitize_schema(
            schema_to_json(tool.parameters, second.custom_serializer)
        )
    for text, shared in tool_schema._converted.values():
        assert shared == json.loads(text)


def test_a_validator_changed_in_place_shows_within_the_recheck_age(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A schema known by its objects is fingerprinted again once its entry is old, so a
    validator changed in place (its identity unchanged) converts as it now is."""
    now = [1000.0]
    monkeypatch.setattr(tool_schema, "_clock", lambda: now[0])
    rooms = ["den", "hall"]
    slots = {vol.Required("room"): vol.In(rooms)}

    def enum() -> list[str]:
        return tool_parameters(vol.Schema(dict(slots)), None)["properties"]["room"]["enum"]

    assert enum() == ["den", "hall"]
    rooms.append("attic")
    now[0] += tool_schema._RECHECK_AFTER / 2
    assert enum() == ["den", "hall"]  # known by identity, not walked again yet
    now[0] += tool_schema._RECHECK_AFTER
    assert enum() == ["den", "hall", "attic"]
    assert enum() == ["den", "hall", "attic"]


def test_schemas_known_by_identity_are_bounded() -> None:
    """Entries hold their objects alive; only the newest _CONVERTED_KEPT are kept."""
    for n in range(tool_schema._CONVERTED_KEPT + 20):
        tool_parameters(vol.Schema({vol.Required(f"a{n}"): str}), None)
    assert len(tool_schema._known) == tool_schema._CONVERTED_KEPT
    assert len(tool_schema._converted) == tool_schema._CONVERTED_KEPT


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ({vol.Required("a"): str}, {vol.Optional("a"): str}),
        ({vol.Required("a"): vol.Any(str, int)}, {vol.Required("a"): vol.Any(str, float)}),
        ({vol.Required("room"): vol.In(["den", "hall"])}, {vol.Required("room"): vol.In(["den"])}),
        (
            {vol.Required("level"): vol.All(int, vol.Range(min=0, max=100))},
            {vol.Required("level"): vol.All(int, vol.Range(min=0, max=255))},
        ),
        ({vol.Required("a", description="one"): str}, {vol.Required("a", description="two"): str}),
        ({vol.Required("a"): str}, {vol.Required("a"): int}),
        ({vol.Required("a"): vol.In([Color.RED])}, {vol.Required("a"): vol.In([Color.BLUE])}),
        ({vol.Required("a"): vol.Coerce(int)}, {vol.Required("a"): vol.Coerce(float)}),
    ],
)
def test_schemas_that_differ_are_not_confused(one: dict, other: dict) -> None:
    """A cached conversion is only reused for a schema that converts the same."""
    results = []
    for raw in (one, other, one, other):
        schema = vol.Schema(raw)
        result = tool_parameters(schema, None)
        assert result == sanitize_schema(schema_to_json(schema, None))
        results.append(result)
    assert results[0] != results[1]
    assert results[0] == results[2]
    assert results[1] == results[3]


def test_a_changed_result_does_not_change_the_cache() -> None:
    """Callers get their own copy (LangChain may add keys to a tool's schema)."""
    schema = vol.Schema({vol.Required("a"): str})
    tool_parameters(schema, None)["properties"]["b"] = {"type": "string"}
    assert tool_parameters(vol.Schema({vol.Required("a"): str}), None) == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
    }


def test_functions_count_by_identity() -> None:
    """A function made anew (its code and closure cannot be compared) is converted anew."""

    def validator() -> Any:
        def check(value: Any) -> Any:
            return value

        return check

    one, other = validator(), validator()
    tool_schema._converted.clear()
    before = len(tool_schema._converted)
    for check in (one, other, one):
        schema = vol.Schema({vol.Required("a"): check})
        assert tool_parameters(schema, None) == sanitize_schema(schema_to_json(schema, None))
    assert len(tool_schema._converted) == before + 2


def _keywords(schema: Any) -> set[str]:
    """Every keyword used anywhere in a schema (property names are not keywords)."""
    if isinstance(schema, list):
        return set().union(*(_keywords(item) for item in schema)) if schema else set()
    if not isinstance(schema, dict):
        return set()
    found = set(schema) - {"properties"}
    for key, value in schema.items():
        if key == "properties":
            found |= set().union(*(_keywords(sub) for sub in value.values())) if value else set()
        else:
            found |= _keywords(value)
    return found


@pytest.mark.parametrize("agent_overrides", [{CONF_LLM_HASS_API: [llm.LLM_API_ASSIST]}])
async def test_assist_tools_reach_the_model_lean_and_still_validated(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Home Assistant's tools are sent without bounds and with "one or a list" as one value
    (fewer tokens, as Home Assistant's own Ollama agent sends them); an out-of-range value
    is still refused by Home Assistant, and the model reads why."""
    for component in ("homeassistant", "conversation", "intent", "light"):
        assert await async_setup_component(hass, component, {})
    hass.states.async_set(
        "light.kitchen",
        "off",
        {"friendly_name": "Kitchen Light", "supported_color_modes": ["brightness"]},
    )
    async_expose_entity(hass, conversation.DOMAIN, "light.kitchen", True)
    api = await assist_api(hass)
    # 2026.2 offers no HassLightSet to a conversation agent here (its other tools carry
    # no bounds): the schema half is checked there, the refusal half where it is offered.
    light_set = next((t.name for t in api.tools if t.name.endswith("HassLightSet")), None)
    calls = async_mock_service(hass, "light", "turn_on")
    if light_set is not None:
        openai_server.add_tool_calls(
            [ToolCall(light_set, {"name": "Kitchen Light", "brightness": 150})]
        )
    openai_server.add_text("That brightness is out of range.")
    await conversation.async_converse(
        hass,
        "Kitchen to 150 percent",
        None,
        Context(),
        agent_id=agent_entity_id(hass, setup_integration),
    )
    first = openai_server.requests[-2 if light_set is not None else -1]
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
    assist = {name: params for name, params in tools.items() if not name.startswith("home_")}
    assert assist, sorted(tools)
    for name, params in assist.items():
        assert not {"minimum", "maximum"} & _keywords(params), name
        assert_tool_schema(params)
    live = next((n for n in assist if n.endswith("GetLiveContext")), None)
    # A value or a list of them (GetLiveContext's domain on 2026.10 and later): both
    # stay offered, as Home Assistant takes both (issue #30).
    if live is not None and (domain := tools[live]["properties"].get("domain")):
        assert domain["anyOf"] == [
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}},
        ], domain
    if light_set is None:
        return
    assert tools[light_set]["properties"]["brightness"]["type"] == "integer"
    # Home Assistant refused the call: nothing was switched, the model was told.
    assert calls == []
    tool_message = messages_of(openai_server.requests[-1], "tool")[-1]
    assert "invalid" in text_of(tool_message).lower(), text_of(tool_message)


@pytest.mark.parametrize("agent_overrides", [{CONF_LLM_HASS_API: [llm.LLM_API_ASSIST]}])
async def test_device_classes_offered_are_those_of_the_exposed_entities(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The on/off intents' device class lists only classes some exposed entity has (any
    other matches nothing); with none, the parameter is left out."""
    for component in ("light", "cover"):
        assert await async_setup_component(hass, component, {})
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    turn_on = await assist_tool_name(hass, "HassTurnOn")
    api = await assist_api(hass)
    full = next(t for t in api.tools if t.name == turn_on)
    every = tool_parameters(full.parameters, api.custom_serializer)["properties"]
    if "device_class" not in every:
        pytest.skip("this version's HassTurnOn takes no device class")
    assert len(every["device_class"]["items"]["enum"]) > 5
    agent_id = agent_entity_id(hass, setup_integration)

    async def offered() -> dict[str, Any]:
        openai_server.add_text("Fine.")
        await conversation.async_converse(hass, "Hi", None, Context(), agent_id=agent_id)
        tools = openai_server.requests[-1]["tools"]
        return next(t for t in tools if t["function"]["name"] == turn_on)["function"]

    assert "device_class" not in (await offered())["parameters"]["properties"]

    hass.states.async_set(
        "cover.garage_door", "closed", {"friendly_name": "Garage Door", "device_class": "garage"}
    )
    async_expose_entity(hass, conversation.DOMAIN, "cover.garage_door", True)
    hass.states.async_set(
        "cover.shed_door", "closed", {"friendly_name": "Shed Door", "device_class": "door"}
    )
    async_expose_entity(hass, conversation.DOMAIN, "cover.shed_door", False)
    device_class = (await offered())["parameters"]["properties"]["device_class"]
    assert device_class["items"]["enum"] == ["garage"]


def test_parameters_that_cannot_change_a_call_are_left_out() -> None:
    """`floor` without floors and a single-domain `domain` go; required ones always stay."""
    lean = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "floor": {"type": "string"},
            "domain": {"type": "array", "items": {"type": "string", "enum": ["light"]}},
            "brightness": {"type": "integer"},
        },
    }
    assert set(without_unmatchable(lean, floors=False)["properties"]) == {"name", "brightness"}
    assert set(without_unmatchable(lean, floors=True)["properties"]) == {
        "name",
        "floor",
        "brightness",
    }
    several = {"type": "array", "items": {"type": "string", "enum": ["light", "fan"]}}
    assert (
        "domain"
        in without_unmatchable({"type": "object", "properties": {"domain": several}}, floors=False)[
            "properties"
        ]
    )
    required = {**lean, "required": ["floor", "domain"]}
    assert set(without_unmatchable(required, floors=False)["properties"]) == set(lean["properties"])


@pytest.mark.parametrize("agent_overrides", [{CONF_LLM_HASS_API: [llm.LLM_API_ASSIST]}])
async def test_floor_is_offered_only_in_a_home_with_floors(
    hass: HomeAssistant, setup_integration: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """Home Assistant's tools name a floor only once the home has one; the light tool's
    domain (only "light") is not offered."""
    for component in ("homeassistant", "conversation", "intent", "light"):
        assert await async_setup_component(hass, component, {})
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    turn_on = await assist_tool_name(hass, "HassTurnOn")
    agent_id = agent_entity_id(hass, setup_integration)

    async def offered() -> dict[str, dict[str, Any]]:
        openai_server.add_text("Fine.")
        await conversation.async_converse(hass, "Hi", None, Context(), agent_id=agent_id)
        return {
            t["function"]["name"]: t["function"]["parameters"]["properties"]
            for t in openai_server.requests[-1]["tools"]
        }

    before = await offered()
    assert "floor" not in before[turn_on]
    assert "name" in before[turn_on]
    api = await assist_api(hass)
    checked: list[str] = []
    for tool in api.tools:
        lean = tool_schema.lean_schema(tool_parameters(tool.parameters, api.custom_serializer))
        domain = lean["properties"].get("domain")
        # Home Assistant 2026.10+ restricts the light tool's domain to "light".
        if domain and len((domain.get("items") or domain).get("enum") or ()) == 1:
            assert "domain" not in before[tool.name], tool.name
            checked.append(tool.name)
    if await assist_tool_name(hass, "HassTurnOn") != "HassTurnOn":  # 2026.10 and later
        assert checked

    fr.async_get(hass).async_create("Ground Floor")
    assert "floor" in (await offered())[turn_on]
