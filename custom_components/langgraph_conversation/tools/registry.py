"""Our own tools: what each is, which category it belongs to, and how it becomes a LangChain tool.

Every tool is described once, here, by a ToolSpec: a name no Home Assistant API uses (our
names start with `home_`), a description written for models, a provider-safe JSON schema,
and a category agents choose by. Whether a call needs the user's yes is decided on what
it does, by the effect gate (effects.py), the same for our tools as for Home Assistant's.
Handlers receive a ToolContext: Home Assistant, the turn's Context (so the logbook shows
who asked) and where the request came from.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from homeassistant.core import Context, HomeAssistant
from homeassistant.exceptions import HomeAssistantError

from ..agent.errors import ToolFailure
from ..agent.tool_templates import ToolTemplates, unbound
from .schema import sanitize_schema, without_unmatchable

# Seconds a tool may take before the model is told it timed out.
DEFAULT_TOOL_TIMEOUT = 15.0
# Prefix of every tool we define; Home Assistant's APIs never use it.
TOOL_PREFIX = "home_"
# Our tools as built for a home with and without floors (a spec is a constant).
_TEMPLATES = ToolTemplates()


@dataclass(frozen=True, slots=True)
class CameraAccess:
    """How a turn's camera tool looks (cameras.py); a turn has one only when its agent may
    look through cameras and has a model that sees."""

    # (the image's bytes, its content type, the question) → the looking model's words.
    look: Callable[[bytes, str, str], Awaitable[str]]
    # Told the entity id of each camera looked at (the activity event says who looked).
    viewed: Callable[[str], None]


@dataclass(frozen=True, slots=True)
class WebSearchAccess:
    """How a turn's web search tool searches (web_search.py); a turn has one only when its
    agent may search the web and has a model that searches."""

    # The query → the searching model's answer, and its sources as (title, url) pairs.
    search: Callable[[str], Awaitable[tuple[str, tuple[tuple[str, str], ...]]]]
    # A turn spoken at a satellite: the answer is heard, so no addresses in it.
    voice: bool = False
    # The sources of this turn's searches, in order, each once (shown under a text answer).
    found: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AutomationAccess:
    """What a turn's automation tools may do (automations.py), decided per asker; a turn
    has one only when its agent's owner turned automations by voice on."""

    # Who asks, as the automation's tag names them; None: nobody known (a satellite).
    requester: str | None
    # Whether the asker may create and delete automations (an active administrator,
    # as in Home Assistant's automation editor).
    may_change: bool
    # Whether an automation may include critical actions (then only after a yes that
    # names them); the owner's second, explicit option.
    critical_allowed: bool
    # The entities the owner marked "always needs my yes".
    marked: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Where a tool call comes from; handed to every handler."""

    hass: HomeAssistant
    context: Context
    language: str
    device_id: str | None = None
    assistant: str = "conversation"
    timeout: float = DEFAULT_TOOL_TIMEOUT
    # None: this turn may not look through cameras.
    cameras: CameraAccess | None = None
    # None: this turn may not search the web.
    web_search: WebSearchAccess | None = None
    # None: this agent makes no automations.
    automations: AutomationAccess | None = None


type ToolHandler = Callable[[ToolContext, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool of ours."""

    name: str
    description: str
    parameters: dict[str, Any]
    category: str
    handler: ToolHandler
    metadata: dict[str, Any] = field(default_factory=dict)
    # Offered only when one of these domains has an exposed entity (empty: any domain).
    domains: frozenset[str] = frozenset()
    # Home Assistant's intents that together do what this tool does: when the turn's API
    # offers all of them, this tool is left out (selection.py).
    covered_by: frozenset[str] = frozenset()
    # Offered only where these integrations are loaded (the history tool needs the recorder).
    integrations: frozenset[str] = frozenset()
    # Seconds a call may take, when the turn's (ToolContext.timeout) is too short for it.
    timeout: float | None = None

    def __post_init__(self) -> None:
        if not self.name.startswith(TOOL_PREFIX):
            raise ValueError(f"tool {self.name} must start with {TOOL_PREFIX!r}")


class ToolRegistry:
    """All tool specs by name; agents pick categories."""

    def __init__(self, specs: Iterable[ToolSpec] = ()) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: ToolSpec) -> None:
        """Add a spec; names are unique."""
        if spec.name in self._specs:
            raise ValueError(f"tool {spec.name} registered twice")
        self._specs[spec.name] = spec

    @property
    def categories(self) -> list[str]:
        """Every category some tool belongs to, sorted."""
        return sorted({spec.category for spec in self._specs.values()})

    def specs(self, categories: Iterable[str]) -> list[ToolSpec]:
        """The specs of the chosen categories, in registration order."""
        chosen = set(categories)
        return [spec for spec in self._specs.values() if spec.category in chosen]

    def get(self, name: str) -> ToolSpec | None:
        """The spec of one tool, if it is ours."""
        return self._specs.get(name)


async def run_handler(spec: ToolSpec, tool_context: ToolContext, arguments: dict[str, Any]) -> Any:
    """Run a handler with a timeout; Home Assistant errors become errors the model reads."""
    timeout = spec.timeout or tool_context.timeout
    try:
        async with asyncio.timeout(timeout):
            return await spec.handler(tool_context, arguments)
    except TimeoutError:
        raise ToolFailure(
            {
                "error": "timeout",
                "error_text": f"{spec.name} did not finish within {timeout:g} seconds",
            }
        ) from None
    except HomeAssistantError as err:
        raise ToolFailure({"error": type(err).__name__, "error_text": str(err)}) from err


def as_langchain_tools(
    specs: Iterable[ToolSpec], tool_context: ToolContext, *, floors: bool = True
) -> list[BaseTool]:
    """LangChain tools bound to one turn's context; in a home without floors
    (`floors` False) without the `floor` parameter, which could match nothing there."""

    def bind(spec: ToolSpec) -> BaseTool:
        async def call(**arguments: Any) -> Any:
            return await run_handler(spec, tool_context, arguments)

        return _TEMPLATES.bound(
            (id(spec), floors),
            spec,
            lambda: StructuredTool(
                name=spec.name,
                description=spec.description,
                args_schema=without_unmatchable(sanitize_schema(spec.parameters), floors),
                coroutine=unbound,
                metadata={"category": spec.category},
            ),
            call,
        )

    return [bind(spec) for spec in specs]
