"""What every in-process figure shares: settings, the server, Home Assistant, the agents."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
import logging
from pathlib import Path
from typing import Any

from fakes import Reply
from homeassistant.core import HomeAssistant
from homeassistant.helpers import llm

from .home import (
    AgentHandle,
    ServiceCounter,
    agent_handles,
    core_entry,
    create_home,
    home_assistant,
    our_entry,
    setup_base,
    setup_entry,
)
from .server import TimedOllamaServer

_LOGGER = logging.getLogger(__name__)

ANSWER = "It is 21 degrees in the kitchen and every light there is off."
TOOL_TURN_TEXT = "Turn on the kitchen light"
TOOL_ANSWER = "The kitchen light is on."
SUMMARY = "The person asked several times how warm the kitchen was and had its light turned on."


# Our tool categories the bench's agents have: those they have had since the bench began.
# History (issue 26) is left out: the bench's Home Assistant loads no recorder, so the tool
# would never be offered anyway, and pinning keeps figures 1-4 and 11 about the same agent.
BENCH_TOOL_CATEGORIES = ("entities", "lights", "media", "weather")


def bench_agent_options() -> dict[str, Any]:
    """A new agent's options (the config flow's defaults) with the bench's categories."""
    # Imported here: the fresh-process workers must not import the integration early.
    from custom_components.langgraph_conversation.config_flow import DEFAULT_AGENT_OPTIONS

    return {**DEFAULT_AGENT_OPTIONS, "tool_categories": list(BENCH_TOOL_CATEGORIES)}


def is_summary_request(body: Mapping[str, Any]) -> bool:
    """Our agent summarising old turns (agent/graph/history.py): no tools, a summary instruction."""
    if body.get("tools"):
        return False
    system = " ".join(
        str(m.get("content") or "") for m in body.get("messages", []) if m.get("role") == "system"
    )
    return "summar" in system.lower()


@dataclass(frozen=True, slots=True)
class Settings:
    """Command-line choices."""

    runs: int
    warmup: int
    quick: bool
    out: Path
    profile: bool = False


@dataclass
class Bench:
    """A running Home Assistant with our agents (full and compact context) and core's."""

    settings: Settings
    hass: HomeAssistant
    server: TimedOllamaServer
    agents: dict[str, AgentHandle]
    lights: ServiceCounter
    agent_options: dict[str, Any]
    turn_on_tool: str
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def ours(self) -> AgentHandle:
        """Our agent with the default options."""
        return self.agents["ours"]

    @property
    def core(self) -> AgentHandle:
        """Home Assistant's Ollama agent."""
        return self.agents["core"]


async def assist_tool_name(hass: HomeAssistant, suffix: str) -> str:
    """The Assist API's name for a tool (2026.8+ prefixes intent tools)."""
    api = await llm.async_get_api(
        hass,
        llm.LLM_API_ASSIST,
        llm.LLMContext(
            platform="bench",
            context=None,
            language="en",
            assistant="conversation",
            device_id=None,
        ),
    )
    names = [tool.name for tool in api.tools if tool.name.endswith(suffix)]
    if not names:
        raise RuntimeError(f"no Assist tool ends with {suffix}")
    return names[0]


@asynccontextmanager
async def running_bench(settings: Settings) -> AsyncIterator[Bench]:
    """Server, Home Assistant, the generated home and all three agents, then teardown."""
    agent_options = bench_agent_options()
    async with TimedOllamaServer() as server:
        server.default_reply = Reply(text=ANSWER)
        server.side_routes.append(("summary", is_summary_request, Reply(text=SUMMARY)))
        async with home_assistant() as hass:
            await setup_base(hass)
            create_home(hass)
            lights = ServiceCounter()
            lights.register(hass)
            ours = our_entry(
                hass,
                server.base_url,
                {
                    "ours": agent_options,
                    "ours_compact": {**agent_options, "compact_context": True},
                },
            )
            core = core_entry(hass, server.base_url)
            await setup_entry(hass, ours)
            await setup_entry(hass, core)
            yield Bench(
                settings=settings,
                hass=hass,
                server=server,
                agents={**agent_handles(hass, ours), **agent_handles(hass, core)},
                lights=lights,
                agent_options=agent_options,
                turn_on_tool=await assist_tool_name(hass, "HassTurnOn"),
            )
