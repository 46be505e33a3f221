"""Contract tests of agent/upstream/litellm_ollama.py.

Each fails when an upgrade changes the behaviour a workaround was written for: then the
workaround is reviewed (kept, adapted or removed), never applied blind.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import litellm
from litellm.llms.ollama.chat.transformation import OllamaChatConfig
import pytest

from custom_components.langgraph_conversation.agent.upstream import litellm_ollama
from fakes import FakeOllamaServer

# One tool round in OpenAI's format, as langchain-litellm hands it to LiteLLM: two
# parallel calls, then their results (langchain-litellm sends no tool name).
_ROUND: list[dict[str, Any]] = [
    {"role": "system", "content": "You control a home."},
    {"role": "user", "content": "Kitchen and hall lights on"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_kitchen",
                "type": "function",
                "function": {"name": "HassTurnOn", "arguments": '{"name": "Kitchen Light"}'},
            },
            {
                "id": "call_hall",
                "type": "function",
                "function": {"name": "HassTurnOn", "arguments": '{"name": "Hall Light"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_kitchen", "content": '{"success": true}'},
    {"role": "tool", "tool_call_id": "call_hall", "content": '{"success": true}'},
]


def _round() -> list[dict[str, Any]]:
    return json.loads(json.dumps(_ROUND))


def test_the_installed_litellm_is_the_checked_one() -> None:
    """An upgrade lands here first: review agent/upstream/litellm_ollama.py for it."""
    assert litellm_ollama.installed_version() == litellm_ollama.CHECKED_VERSION
    assert litellm_ollama.ACTIVE
    assert OllamaChatConfig.transform_request is not litellm_ollama.ORIGINAL_TRANSFORM_REQUEST


def test_litellm_alone_still_drops_the_tool_history() -> None:
    """The upstream defect the workaround exists for, and the shape it relies on.

    If this fails because the calls and ids now arrive, LiteLLM fixed #26094: remove the
    workaround. If it fails because the message count differs, the wrapper's pairing of
    input and output messages no longer holds.
    """
    data = litellm_ollama.ORIGINAL_TRANSFORM_REQUEST(
        OllamaChatConfig(), "llama3.2", _round(), {}, {}, {}
    )
    sent = data["messages"]
    assert [m["role"] for m in sent] == [m["role"] for m in _ROUND]
    assert "tool_calls" not in sent[2]
    assert all("tool_call_id" not in m and "tool_name" not in m for m in sent[3:])


def test_the_workaround_restores_calls_ids_and_names() -> None:
    data = OllamaChatConfig().transform_request("llama3.2", _round(), {}, {}, {})
    sent = data["messages"]
    assert sent[2]["tool_calls"] == [
        {
            "id": "call_kitchen",
            "function": {"name": "HassTurnOn", "arguments": {"name": "Kitchen Light"}},
        },
        {
            "id": "call_hall",
            "function": {"name": "HassTurnOn", "arguments": {"name": "Hall Light"}},
        },
    ]
    assert [(m["tool_call_id"], m["tool_name"]) for m in sent[3:]] == [
        ("call_kitchen", "HassTurnOn"),
        ("call_hall", "HassTurnOn"),
    ]
    # Everything LiteLLM itself sends is unchanged.
    assert [m["content"] for m in sent] == [m["content"] for m in _ROUND]


def test_another_version_keeps_litellm_as_it_is(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert not litellm_ollama.applies_to("1.99.0")
    assert "LiteLLM 1.99.0 is installed" in caplog.text
    assert litellm_ollama.CHECKED_VERSION in caplog.text


async def test_the_tool_round_reaches_ollama_whole(
    socket_enabled: None, ollama_server: FakeOllamaServer
) -> None:
    """Through LiteLLM's real client: what the fake Ollama server receives."""
    ollama_server.add_text("Both are on.")
    stream = await litellm.acompletion(
        model="ollama_chat/llama3.2",
        api_base=ollama_server.base_url,
        messages=_round(),
        stream=True,
    )
    async for _chunk in stream:
        pass
    sent = ollama_server.requests[0]["messages"]
    assert [call["id"] for call in sent[2]["tool_calls"]] == ["call_kitchen", "call_hall"]
    assert [m["tool_call_id"] for m in sent[3:]] == ["call_kitchen", "call_hall"]
