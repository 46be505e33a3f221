"""Weather tools against the demo integration's weather entities, on a real Home Assistant."""

from __future__ import annotations

from collections.abc import AsyncIterator
import json
import re
from typing import Any
from unittest.mock import patch

from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
import pytest

from custom_components.langgraph_conversation.agent.errors import ToolFailure
from custom_components.langgraph_conversation.agent.events import TextDelta
from custom_components.langgraph_conversation.agent.models import ModelAccess, ModelSettings
from custom_components.langgraph_conversation.agent.runtime import AgentRuntime, AgentSettings, Turn
from custom_components.langgraph_conversation.tools.registry import ToolContext, as_langchain_tools
from custom_components.langgraph_conversation.tools.schema import sanitize_schema
from custom_components.langgraph_conversation.tools.weather import SPECS
from fakes import FakeOpenAIServer, ToolCall
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.const import Platform
from homeassistant.core import Context, HomeAssistant
from homeassistant.setup import async_setup_component

# Demo's two weather entities: South (°C, hPa, m/s natively; daily forecast only) and North
# (°F, inHg, mph natively; daily, hourly and twice-daily forecasts). The test instance uses
# the metric system, so HA shows both in °C, hPa and km/h.
SOUTH = "weather.demo_weather_south"
NORTH = "weather.demo_weather_north"
DAY = r"[A-Z][a-z]{2} \d{4}-\d{2}-\d{2}"


@pytest.fixture
async def weather(hass: HomeAssistant) -> AsyncIterator[None]:
    """Demo's weather platform alone, both entities exposed to Assist."""
    with patch(
        "homeassistant.components.demo.COMPONENTS_WITH_CONFIG_ENTRY_DEMO_PLATFORM",
        [Platform.WEATHER],
    ):
        assert await async_setup_component(hass, "homeassistant", {})
        assert await async_setup_component(hass, "demo", {})
        await hass.async_block_till_done()
        for entity_id in (SOUTH, NORTH):
            async_expose_entity(hass, conversation.DOMAIN, entity_id, True)
        yield


def _tools(hass: HomeAssistant) -> dict[str, BaseTool]:
    tool_context = ToolContext(hass=hass, context=Context(), language="en")
    return {tool.name: tool for tool in as_langchain_tools(SPECS, tool_context)}


async def _call(hass: HomeAssistant, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return await _tools(hass)[name].ainvoke(args)


async def _failure(hass: HomeAssistant, name: str, args: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(ToolFailure) as caught:
        await _call(hass, name, args)
    return caught.value.data


def test_specs_are_provider_safe() -> None:
    """Schemas pass the sanitizer unchanged; names and category as agreed."""
    for spec in SPECS:
        assert sanitize_schema(spec.parameters) == spec.parameters
        assert spec.name.startswith("home_")
        assert spec.category == "weather"


@pytest.mark.usefixtures("weather")
async def test_current_conditions_of_the_default_weather(hass: HomeAssistant) -> None:
    """Without a name the first exposed weather entity answers, with units and the others."""
    result = await _call(hass, "home_weather", {})
    assert result == {
        "weather": "Demo Weather South",
        "condition": "sunny",
        "temperature": 21.6,
        "humidity": 92,
        "wind_speed": 1.8,
        "pressure": 1099.0,
        "units": {
            "temperature": "°C",
            "humidity": "%",
            "wind_speed": "km/h",
            "pressure": "hPa",
        },
        "other_weather_entities": ["Demo Weather North"],
    }


@pytest.mark.usefixtures("weather")
async def test_default_prefers_the_weather_named_after_the_home(hass: HomeAssistant) -> None:
    """With several weather entities, the one whose name holds the location name wins."""
    hass.config.location_name = "North"
    result = await _call(hass, "home_weather", {})
    assert result["weather"] == "Demo Weather North"
    assert result["condition"] == "rainy"
    assert result["temperature"] == -24.4  # -12 °F shown in the home's °C
    assert result["other_weather_entities"] == ["Demo Weather South"]


@pytest.mark.usefixtures("weather")
async def test_daily_forecast_limited_to_the_days_asked(hass: HomeAssistant) -> None:
    """Two days give two daily entries, each with a readable date and the units once."""
    result = await _call(hass, "home_weather", {"name": "Demo Weather North", "days": 2})
    assert result["weather"] == "Demo Weather North"
    assert result["type"] == "daily"
    assert len(result["forecast"]) == 2
    first = result["forecast"][0]
    assert re.fullmatch(DAY, first["when"])
    assert first["condition"] == "snowy"
    assert first["temperature"] == -23.3
    assert first["templow"] == -26.1
    assert first["precipitation_probability"] == 60
    assert "datetime" not in first
    assert result["units"] == {
        "temperature": "°C",
        "templow": "°C",
        "precipitation": "mm",
        "precipitation_probability": "%",
    }


@pytest.mark.usefixtures("weather")
async def test_hourly_forecast_when_hours_are_asked(hass: HomeAssistant) -> None:
    """Asking for hours picks the hourly forecast, cut to that many entries (3.0 means 3)."""
    result = await _call(hass, "home_weather", {"name": "Demo Weather North", "hours": 3.0})
    assert result["type"] == "hourly"
    assert [entry["condition"] for entry in result["forecast"]] == ["sunny"] * 3
    assert all(re.fullmatch(rf"{DAY} \d{{2}}:00", e["when"]) for e in result["forecast"])


@pytest.mark.usefixtures("weather")
async def test_twice_daily_forecast_names_day_and_night(hass: HomeAssistant) -> None:
    """A twice-daily forecast for one day has a day and a night entry."""
    result = await _call(
        hass, "home_weather", {"name": "Demo Weather North", "type": "twice_daily"}
    )
    assert result["type"] == "twice_daily"
    assert len(result["forecast"]) == 6  # the default three days, two entries each
    assert [e["when"].rsplit(" ", 1)[1] for e in result["forecast"][:2]] == ["day", "night"]
    assert "is_daytime" not in result["forecast"][0]


@pytest.mark.usefixtures("weather")
async def test_unsupported_forecast_kind_is_refused_with_what_exists(
    hass: HomeAssistant,
) -> None:
    """South has only a daily forecast: an hourly request says so instead of failing in HA."""
    error = await _failure(hass, "home_weather", {"type": "hourly"})
    assert error["error"] == "unsupported_forecast"
    assert error["error_text"] == ("Demo Weather South has no hourly forecast. It offers: daily.")
    # Hours without a kind fall back to the forecast the entity has.
    result = await _call(hass, "home_weather", {"hours": 5})
    assert result["type"] == "daily"


@pytest.mark.usefixtures("weather")
async def test_unexposed_weather_is_not_reachable(hass: HomeAssistant) -> None:
    """An unexposed weather entity is refused by name and skipped as the default."""
    async_expose_entity(hass, conversation.DOMAIN, NORTH, False)
    error = await _failure(hass, "home_weather", {"name": "Demo Weather North"})
    assert error["error"] == "not_exposed"
    assert "North" in error["error_text"]

    result = await _call(hass, "home_weather", {})
    assert result["weather"] == "Demo Weather South"
    assert "other_weather_entities" not in result

    async_expose_entity(hass, conversation.DOMAIN, SOUTH, False)
    error = await _failure(hass, "home_weather", {})
    assert error["error"] == "not_exposed"


@pytest.mark.usefixtures("weather")
async def test_unavailable_weather_says_so(hass: HomeAssistant) -> None:
    """A weather entity without data is reported as unavailable, not as a condition."""
    hass.states.async_set(SOUTH, "unavailable", {"friendly_name": "Demo Weather South"})
    error = await _failure(hass, "home_weather", {"name": "Demo Weather South"})
    assert error == {
        "error": "unavailable",
        "error_text": "The weather source Demo Weather South is unavailable right now.",
    }


@pytest.mark.usefixtures("weather")
async def test_forecast_through_the_agent(hass: HomeAssistant, socket_enabled: None) -> None:
    """The model calls the forecast tool and reads the compact result back."""
    async with FakeOpenAIServer() as server:
        server.add_tool_calls([ToolCall("home_weather", {"name": "Demo Weather North", "days": 2})])
        server.add_text("Snow today, partly cloudy tomorrow.")
        runtime = AgentRuntime(
            ModelAccess("openai/gpt-test", "key", server.api_base), InMemorySaver()
        )
        tool_context = ToolContext(hass=hass, context=Context(), language="en")
        turn = Turn(
            thread_id="weather",
            text="What's the weather tomorrow?",
            system_prompt="You are a test.",
            tools=as_langchain_tools(SPECS, tool_context),
        )
        agent = AgentSettings(settings=ModelSettings(), max_tool_rounds=2)
        events = [event async for event in runtime.run_turn(agent, turn)]

    answer = "".join(event.text for event in events if isinstance(event, TextDelta))
    assert answer == "Snow today, partly cloudy tomorrow."
    offered = {tool["function"]["name"] for tool in server.requests[0]["tools"]}
    assert offered == {"home_weather"}
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    result = json.loads(tool_message["content"])
    assert [entry["condition"] for entry in result["forecast"]] == ["snowy", "partlycloudy"]
    assert result["units"]["temperature"] == "°C"
