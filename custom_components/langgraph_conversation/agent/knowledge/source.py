"""Where one agent's documents are (a light module: the profile names it without loading
the index and its libraries)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# The store namespace every agent's documents live under.
KNOWLEDGE_ROOT = "knowledge"


@dataclass(frozen=True, slots=True)
class KnowledgeSource:
    """Where one agent's files are, and the store namespace their chunks go to."""

    directory: Path
    agent: str

    @property
    def chunks_namespace(self) -> tuple[str, ...]:
        """Where the chunks are searched."""
        return (KNOWLEDGE_ROOT, self.agent, "chunks")

    @property
    def files_namespace(self) -> tuple[str, ...]:
        """What was indexed of each file."""
        return (KNOWLEDGE_ROOT, self.agent, "files")
