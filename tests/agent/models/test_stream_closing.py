"""Every async generator an answer's stream reads through is closed by the answer itself.

A generator left suspended is handed by Python to the event loop, which closes it later in
a task of its own: after the turn has returned, one link of a chain per pass of the loop.
That was a task per chunk (LiteLLM re-entering the OpenAI SDK's stream) and a chain of
nine at every answer's end (upstream/openai_stream.py). Here the loop's finalizer hook is
watched while answers are read to their end, cut short, or fail, through the real
LiteLLM client against the fake servers, and through whole turns in Home Assistant.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import StructuredTool
import pytest
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.langgraph_conversation.agent.models import ModelAccess, ModelSettings
from custom_components.langgraph_conversation.agent.models.chat import (
    answer_stream,
    build_chat_model,
)
from fakes import FakeOllamaServer, FakeOpenAIServer, Reply, ToolCall
from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant

from ...conftest import TEST_KEY, agent_entity_id
from ...helpers import add_light, assist_tool_name
from ...loop_closings import nothing_left_for_the_loop

PROMPT = [SystemMessage("You control a home."), HumanMessage("Turn on the kitchen light.")]


async def _never_called(**_arguments: Any) -> None:
    """Binding a tool never runs it."""


TOOLS = [
    StructuredTool(
        name="HassTurnOn",
        description="HassTurnOn for tests",
        args_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        coroutine=_never_called,
    )
]


def _model(server: FakeOpenAIServer | FakeOllamaServer) -> Any:
    if isinstance(server, FakeOllamaServer):
        access = ModelAccess(model="ollama_chat/llama3.2", api_base=server.base_url)
    else:
        access = ModelAccess(model="openai/gpt-test", api_base=server.api_base, api_key=TEST_KEY)
    return build_chat_model(access, ModelSettings(request_timeout=30)).bind_tools(TOOLS)


ANSWERS: dict[str, Callable[[Any], None]] = {
    "text": lambda s: s.add_text("It is 21 degrees in the kitchen, and the light is on."),
    "tool_call": lambda s: s.add_tool_calls([ToolCall("HassTurnOn", {"name": "Kitchen"})]),
    "endless": lambda s: s.add(Reply(text="la ", endless=True, chunk_size=5)),
}


@pytest.fixture(params=["openai", "ollama"])
def server(
    request: pytest.FixtureRequest,
    openai_server: FakeOpenAIServer,
    ollama_server: FakeOllamaServer,
) -> FakeOpenAIServer | FakeOllamaServer:
    return openai_server if request.param == "openai" else ollama_server


@pytest.mark.parametrize("answer", ["text", "tool_call"])
async def test_an_answer_read_to_its_end_closes_everything(
    server: FakeOpenAIServer | FakeOllamaServer, answer: str
) -> None:
    ANSWERS[answer](server)
    with nothing_left_for_the_loop():
        async with aclosing(answer_stream(_model(server), PROMPT)) as chunks:
            received = [chunk async for chunk in chunks]
    assert received  # the answer did stream


@pytest.mark.parametrize("after_chunks", [1, 5])
@pytest.mark.parametrize("answer", ["text", "endless"])
async def test_an_answer_cut_short_closes_everything(
    server: FakeOpenAIServer | FakeOllamaServer, answer: str, after_chunks: int
) -> None:
    """As the answer's bounds cut it (models/model_call.py): the reader stops and closes."""
    ANSWERS[answer](server)
    received = 0
    with nothing_left_for_the_loop():
        async with aclosing(answer_stream(_model(server), PROMPT)) as chunks:
            async for _chunk in chunks:
                received += 1
                if received == after_chunks:
                    break
    assert received == after_chunks


async def test_a_failed_answer_closes_everything(
    server: FakeOpenAIServer | FakeOllamaServer,
) -> None:
    server.add_broken_stream("Partial ans")
    with (
        nothing_left_for_the_loop(),
        pytest.raises(Exception),  # noqa: B017, PT011  the failure is tested elsewhere
    ):
        await _read_all(answer_stream(_model(server), PROMPT))


async def _read_all(chunks: AsyncIterator[Any]) -> None:
    async with aclosing(chunks):
        async for _chunk in chunks:
            pass


async def test_whole_turns_leave_nothing_for_the_loop(
    hass: HomeAssistant,
    setup_integration: MockConfigEntry,
    openai_server: FakeOpenAIServer,
) -> None:
    """A text turn, a tool turn and a turn cut at the answer's size bound, in Home Assistant."""
    add_light(hass, "kitchen", "Kitchen Light", exposed=True)
    with nothing_left_for_the_loop():
        await _three_turns(hass, setup_integration, openai_server)
    assert openai_server.request_count == 4


async def _three_turns(
    hass: HomeAssistant, entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    async def ask(text: str, conversation_id: str | None = None) -> tuple[str, str | None]:
        result = await conversation.async_converse(
            hass, text, conversation_id, Context(), agent_id=agent_entity_id(hass, entry)
        )
        return result.response.speech["plain"]["speech"], result.conversation_id

    openai_server.add_text("Hello, nice to hear from you again today.")
    answer, conversation_id = await ask("Hello")
    assert answer == "Hello, nice to hear from you again today."
    turn_on = await assist_tool_name(hass, "HassTurnOn")
    openai_server.add_tool_calls([ToolCall(turn_on, {"name": "Kitchen Light"})])
    openai_server.add_text("Done.")
    answer, _ = await ask("Kitchen light on", conversation_id)
    assert answer == "Done."
    openai_server.add(Reply(text="la ", endless=True, chunk_size=500))
    answer, _ = await ask("Sing", conversation_id)
    assert "too long" in answer
    await hass.async_block_till_done()
