"""Merging a streamed answer's metadata the way langchain-core merges message chunks.

Behaviour relied on (checked on langchain-core 1.8.3): adding two AIMessageChunks merges
their `response_metadata` with `langchain_core.utils._merge.merge_dicts` (strings
concatenated, nested dicts merged, equal values kept). The answer collector merges only
the metadata, once per chunk that has any, so it calls that function directly instead of
building two message objects per chunk.

On another version (one log line says so) the metadata is merged through the public
path: adding two chunks that carry only the metadata.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessageChunk

from .versions import matches

CHECKED_VERSIONS = frozenset({"1.8.3"})
ACTIVE = matches(
    "langchain-core",
    CHECKED_VERSIONS,
    "merging answer metadata with langchain-core's merge_dicts",
    "metadata is merged by adding message chunks",
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
