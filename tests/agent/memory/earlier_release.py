"""threads.db as the release before the conversations rework (commit 446498e) wrote it.

`earlier_release_threads.db` beside this file was written by that release's own code: its
thread naming (storage/threads.py's ThreadDirectory, fed as its conversation.py fed it),
its agent runtime and graph, and its SQLite checkpointer (schema 1), talking to its own
fake model server. To write it again, from the repository's root:

    git archive 446498e custom_components tests/__init__.py tests/fakes \\
        | (mkdir -p .earlier && tar -x -C .earlier)
    <a leg's python> tests/agent/memory/earlier_release.py .earlier \\
        tests/agent/memory/earlier_release_threads.db
    rm -rf .earlier

The tests read the names below (standard library only at import time: the release's
package and today's have the same name, so the release is imported only when writing).
"""

from __future__ import annotations

import asyncio
from importlib import import_module
from pathlib import Path
import sys
from typing import Any

# The agent (its subentry id) both conversations were held with.
AGENT_ID = "01JB6X2Q9M4D7ZK8WPN3RTVE5A"
# A conversation id Home Assistant issued to the user's client (a ULID).
ISSUED_ID = "01JB6X4T6W8M3Y4V1Q2R5S7T9K"
# A conversation id a client chose itself (Home Assistant keeps such an id as it is).
CHOSEN_ID = "family-chat"

# What each conversation holds, as the user said it and the model answered.
ISSUED_REQUEST = "Turn on the kitchen lights"
ISSUED_TOOL_ARGUMENT = "kitchen lights"
ISSUED_ANSWER = "The kitchen lights are on."
CHOSEN_REQUEST = "Our PIN-HINT is the dog's birthday"
CHOSEN_ANSWER = "Noted, the PIN-HINT stays between us."

FIXTURE = Path(__file__).with_name("earlier_release_threads.db")


def _turn_on_tool(tools: Any) -> Any:
    """A stand-in for Home Assistant's HassTurnOn, as the release handed tools over."""

    async def turn_on(name: str) -> dict[str, Any]:
        return {"success": True, "targets": [name]}

    return tools.StructuredTool(
        name="HassTurnOn",
        description="Turns on a device or entity",
        args_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
        coroutine=turn_on,
    )


async def _write(output: Path) -> None:
    """Hold both conversations with the release's code; `output` is its threads.db."""
    runtime_module = import_module("custom_components.langgraph_conversation.agent.runtime")
    model = import_module("custom_components.langgraph_conversation.agent.model")
    checkpointer = import_module("custom_components.langgraph_conversation.storage.checkpointer")
    threads = import_module("custom_components.langgraph_conversation.storage.threads")
    const = import_module("custom_components.langgraph_conversation.const")
    fakes = import_module("tests.fakes")
    tools = import_module("langchain_core.tools")

    saver = await checkpointer.SqliteCheckpointSaver.open(
        output, keep_last=const.CHECKPOINTS_KEPT_PER_THREAD
    )
    async with fakes.FakeOpenAIServer() as server:
        runtime = runtime_module.AgentRuntime(
            model.ModelAccess("openai/gpt-test", "key", server.api_base), saver
        )
        directory = threads.ThreadDirectory()
        server.add_tool_calls([fakes.ToolCall("HassTurnOn", {"name": ISSUED_TOOL_ARGUMENT})])
        server.add_text(ISSUED_ANSWER)
        server.add_text(CHOSEN_ANSWER)
        for conversation_id, origin, text in (
            (ISSUED_ID, "user:user-a", ISSUED_REQUEST),
            (CHOSEN_ID, "user:user-b", CHOSEN_REQUEST),
        ):
            # As the release's conversation.py resolved a turn's thread.
            thread_id = directory.resolve(
                AGENT_ID,
                conversation_id,
                origin=origin,
                now=1_700_000_000.0,
                window=60 * const.DEFAULT_CONTINUE_MINUTES,
            )
            turn = runtime_module.Turn(
                thread_id=thread_id,
                text=text,
                system_prompt="You are a voice assistant for Home Assistant.",
                settings=model.ModelSettings(),
                tools=[_turn_on_tool(tools)],
                max_tool_rounds=3,
            )
            async for _event in runtime.run_turn(turn):
                pass
        await runtime.aclose()
    await saver.aclose()


def main() -> None:
    """`earlier_release.py <extracted 446498e tree> <threads.db to write>`."""
    release, output = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    output.unlink(missing_ok=True)
    # The release's package takes the place of today's (both are custom_components).
    sys.path.insert(0, str(release))
    asyncio.run(_write(output))


if __name__ == "__main__":
    main()
