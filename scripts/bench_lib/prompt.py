"""Figure 6: prompt tokens for the generated 100-entity home, as the model receives them.

Each agent answers one turn in a new conversation; the system prompt and tool schemas are
taken from the request the fake server received and counted with LiteLLM's tokenizer for
gpt-4o (what matters is the comparison, and every agent is counted the same way).
"""

from __future__ import annotations

import json
from typing import Any

from .context import Bench
from .home import HOME_SIZE
from .report import Row, Stat, judged
from .turns import converse

COMPACT_TARGET = 0.40
# What LiteLLM's token_counter uses for gpt-4o.
TOKEN_ENCODING = "o200k_base"


def tokens(text: str) -> int:
    """Tokens of `text` for gpt-4o, counted as LiteLLM's token_counter counts them.

    tiktoken directly, not `litellm.token_counter`: the integration switches LiteLLM's
    counting off (`litellm.disable_token_counter`) while only Ollama models are
    configured, and the bench's ruler must not depend on the integration's settings.
    """
    # Imported late: the integration sets LiteLLM's environment switches (no network
    # fetch of the price map) before LiteLLM is first imported. LiteLLM's default_encoding
    # points tiktoken at the encodings LiteLLM bundles (no download).
    from litellm.litellm_core_utils import default_encoding  # noqa: F401
    import tiktoken

    return len(tiktoken.get_encoding(TOKEN_ENCODING).encode(text, disallowed_special=()))


async def prompt_of(bench: Bench, label: str) -> dict[str, Any]:
    """System prompt and tools of one fresh turn of the agent, with their token counts."""
    result = await converse(
        bench.hass, bench.server, bench.agents[label], "What is on in the living room?"
    )
    if result.error or not result.records:
        raise RuntimeError(f"{label}: the prompt turn failed: {result.error}")
    body = result.records[0].body
    system = "\n".join(
        m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "system"
    )
    tools = body.get("tools") or []
    return {
        "system_prompt_tokens": tokens(system),
        "system_prompt_chars": len(system),
        "tool_count": len(tools),
        "tool_schema_tokens": tokens(json.dumps(tools)) if tools else 0,
        "system_prompt": system,
    }


async def measure(bench: Bench) -> list[Row]:
    """Our full and compact context against Home Assistant's prompt for the same home."""
    prompts = {label: await prompt_of(bench, label) for label in ("ours", "ours_compact", "core")}
    bench.raw["prompt"] = {"home_entities": HOME_SIZE, "token_encoding": TOKEN_ENCODING, **prompts}
    core = prompts["core"]["system_prompt_tokens"]
    full = prompts["ours"]["system_prompt_tokens"]
    compact = prompts["ours_compact"]["system_prompt_tokens"]
    compact_ratio = compact / core if core else None
    with_tools = {
        label: p["system_prompt_tokens"] + p["tool_schema_tokens"] for label, p in prompts.items()
    }
    return [
        Row(
            figure=6,
            name=f"system prompt tokens, compact context ({HOME_SIZE}-entity home)",
            unit="tokens",
            ours=Stat.single(compact),
            core=Stat.single(core),
            ratio=compact_ratio,
            target=f"compact ≤ {COMPACT_TARGET:.0%} of core's",
            outcome=judged(None if compact_ratio is None else compact_ratio <= COMPACT_TARGET),
            single=True,
        ),
        Row(
            figure=6,
            name=f"system prompt tokens, full context ({HOME_SIZE}-entity home)",
            unit="tokens",
            ours=Stat.single(full),
            core=Stat.single(core),
            ratio=full / core if core else None,
            target="(information)",
            outcome="info",
            single=True,
        ),
        Row(
            figure=6,
            name="system prompt + tool schema tokens, compact (ours) vs core",
            unit="tokens",
            ours=Stat.single(with_tools["ours_compact"]),
            core=Stat.single(with_tools["core"]),
            ratio=with_tools["ours_compact"] / with_tools["core"] if with_tools["core"] else None,
            target="(information)",
            outcome="info",
            single=True,
            detail=(
                f"full context with tools: {with_tools['ours']}; tools ours "
                f"{prompts['ours']['tool_count']}, core {prompts['core']['tool_count']}"
            ),
        ),
    ]
