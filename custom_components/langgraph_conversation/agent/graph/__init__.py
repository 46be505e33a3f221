"""The conversation graph: its state, the model and tool nodes, tool calls and their
results, the context window's plan, history summaries and the prompt's layers.

The names here are what code outside this folder may use.
"""

from __future__ import annotations

from ..lazy_face import lazy_face

__getattr__, __dir__, __all__ = lazy_face(
    __name__,
    {
        "graph": ("MODEL_NODE", "build_graphs", "recursion_limit"),
        "kinds": ("AgentKind",),
        "history": ("compact_history", "split_for_summary"),
        "prompts": (
            "NOTE_ID_PREFIX",
            "PromptLayers",
            "base_prompt",
            "is_note",
            "last_question_index",
            "speaker_layer",
        ),
        "state": ("TurnContext", "openai_tool"),
        "window": ("TurnFit", "WindowTooSmall", "plan_turn"),
    },
)
