"""What the agent relies on in langchain-core beyond its plain public path.

Merging a streamed answer's metadata. Behaviour relied on (checked on langchain-core
1.8.3): adding two AIMessageChunks merges their `response_metadata` with
`langchain_core.utils._merge.merge_dicts` (strings concatenated, nested dicts merged,
equal values kept). The answer collector merges only the metadata, once per chunk that
has any, so it calls that function directly instead of building two message objects per
chunk.

Running a tool whose parameters are a JSON schema (Home Assistant's, and ours). Behaviour
relied on (1.8.3): `StructuredTool.ainvoke(arguments)` with a dict `args_schema` does not
validate the arguments (Home Assistant and our handlers do) and awaits
`coroutine(**a shallow copy of them)` when the coroutine takes keyword arguments only (no
callbacks or config parameter to fill in); around it, only callback events nobody listens
to and a task of its own, about 0.6 ms per call (scripts/bench figure 1, one-tool turn).
`run_tool` awaits the coroutine itself then. The one difference is on purpose: `ainvoke`
unwraps arguments that look like a whole tool call (`{"type": "tool_call", "args": ...}`),
which a model's arguments may, and which are passed on as they are here.

On another version (one log line says so) metadata is merged through the public path
(adding two chunks that carry only the metadata), and tools run through `ainvoke`.
"""

from __future__ import annotations

from inspect import CO_VARKEYWORDS
from types import FunctionType
from typing import Any

from langchain_core.messages import AIMessageChunk
from langchain_core.tools import BaseTool, StructuredTool

from .versions import matches

CHECKED_VERSIONS = frozenset({"1.8.3"})
ACTIVE = matches(
    "langchain-core",
    CHECKED_VERSIONS,
    "merging answer metadata with langchain-core's merge_dicts, and awaiting JSON-schema "
    "tools' coroutines directly",
    "metadata is merged by adding message chunks, and tools run through ainvoke",
)


def _merged_by_chunks(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    total = AIMessageChunk(content="", response_metadata=left) + AIMessageChunk(
        content="", response_metadata=right
    )
    return dict(total.response_metadata)


if ACTIVE:
    from langchain_core.utils._merge import merge_dicts as merge_metadata
else:
    merge_metadata = _merged_by_chunks


def _keyword_coroutine(tool: BaseTool) -> Any:
    """The tool's coroutine when `ainvoke` would only await it with the arguments as
    keywords (see the module's docstring), else None."""
    if not (
        type(tool) is StructuredTool
        and isinstance(tool.args_schema, dict)
        and tool.response_format == "content"
    ):
        return None
    coroutine = tool.coroutine
    if type(coroutine) is not FunctionType:
        return None
    code = coroutine.__code__
    takes_keywords_only = (
        code.co_argcount == 0 and code.co_kwonlyargcount == 0 and code.co_flags & CO_VARKEYWORDS
    )
    return coroutine if takes_keywords_only else None


async def run_tool(tool: BaseTool, arguments: dict[str, Any]) -> Any:
    """`tool.ainvoke(arguments)`: for a JSON-schema tool, its coroutine awaited directly."""
    coroutine = _keyword_coroutine(tool) if ACTIVE else None
    if coroutine is None:
        return await tool.ainvoke(arguments)
    return await coroutine(**arguments)
