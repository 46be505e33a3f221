"""The conversation graph: its state, the model and tool nodes, tool calls and their
results, the context window's plan, history summaries and the prompt's layers.

The names here are what code outside this folder may use.
"""

from __future__ import annotations

from .graph import MODEL_NODE, AgentKind, build_graphs, recursion_limit
from .history import compact_history, split_for_summary
from .prompts import (
    NOTE_ID_PREFIX,
    PromptLayers,
    base_prompt,
    is_note,
    last_question_index,
    speaker_layer,
)
from .state import TurnContext, openai_tool
from .window import TurnFit, WindowTooSmall, plan_turn

__all__ = [
    "MODEL_NODE",
    "NOTE_ID_PREFIX",
    "AgentKind",
    "PromptLayers",
    "TurnContext",
    "TurnFit",
    "WindowTooSmall",
    "base_prompt",
    "build_graphs",
    "compact_history",
    "is_note",
    "last_question_index",
    "openai_tool",
    "plan_turn",
    "recursion_limit",
    "speaker_layer",
    "split_for_summary",
]
