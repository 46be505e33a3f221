"""Which of an agent's models looks at camera pictures, by LiteLLM's real model map."""

from __future__ import annotations

import pytest

from custom_components.langgraph_conversation.agent.models import (
    Looker,
    ModelAccess,
    RoleAccesses,
    looking_model,
)

SEES = ModelAccess("openai/gpt-4o", "sk-main-0123456789", None)
ALSO_SEES = ModelAccess("openai/gpt-4o-mini", None, None)
BLIND = ModelAccess("openai/gpt-3.5-turbo", "sk-main-0123456789", None)
UNKNOWN = ModelAccess("openai/gpt-test", "sk-main-0123456789", "http://127.0.0.1:9/v1")
CHOSEN = ModelAccess("ollama_chat/llava", None, "http://127.0.0.1:11434")


@pytest.mark.parametrize(
    ("main", "roles", "expected"),
    [
        # A chosen vision model looks, alone, even when the agent's own model could.
        (SEES, RoleAccesses(vision=CHOSEN, fallback=ALSO_SEES), Looker(CHOSEN)),
        (UNKNOWN, RoleAccesses(vision=CHOSEN), Looker(CHOSEN)),
        # Else the agent's own model when the map says it sees, with a fallback that sees.
        (SEES, RoleAccesses(), Looker(SEES)),
        (SEES, RoleAccesses(fallback=ALSO_SEES), Looker(SEES, ALSO_SEES)),
        (SEES, RoleAccesses(fallback=BLIND), Looker(SEES)),
        (SEES, RoleAccesses(fallback=UNKNOWN), Looker(SEES)),
        # Else nobody looks: the camera tool is not offered.
        (BLIND, RoleAccesses(fallback=ALSO_SEES), None),
        (UNKNOWN, RoleAccesses(), None),
    ],
)
async def test_which_model_looks(
    main: ModelAccess, roles: RoleAccesses, expected: Looker | None
) -> None:
    assert await looking_model(main, roles) == expected
