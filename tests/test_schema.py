"""Tool schemas: what providers accept (OpenAI, Anthropic, Gemini's subset, Ollama)."""

from __future__ import annotations

from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool
import pytest

from custom_components.langgraph_conversation.tools.ha_llm_api import tools_from_llm_api
from custom_components.langgraph_conversation.tools.schema import sanitize_schema
from homeassistant.core import HomeAssistant
from homeassistant.setup import async_setup_component

from .helpers import add_light, assist_api

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
    """Our own tools (all categories) and the memory tools pass the same checks."""
    from langgraph.store.memory import InMemoryStore

    from custom_components.langgraph_conversation.agent.memory import MemoryScope, memory_tools
    from custom_components.langgraph_conversation.tools import TOOLS

    specs = TOOLS.specs(TOOLS.categories)
    assert {spec.category for spec in specs} == {"entities", "lights", "media", "weather"}
    names = [spec.name for spec in specs]
    assert len(names) == len(set(names))
    for spec in specs:
        assert spec.name.startswith("home_")
        assert sanitize_schema(spec.parameters) == spec.parameters, spec.name
        assert_tool_schema(spec.parameters)
    for tool in memory_tools(InMemoryStore(), MemoryScope.for_user(None)):
        assert_tool_schema(convert_to_openai_tool(tool)["function"]["parameters"])
