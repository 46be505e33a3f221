"""Contract of agent/upstream/litellm_images.py: LiteLLM 1.83.0 makes the OpenAI SDK client
of an image request retry twice, also one passed in; ours makes one attempt."""

from __future__ import annotations

import httpx
import litellm
import openai
import pytest

from custom_components.langgraph_conversation.agent.upstream import litellm_images, versions
from fakes import FakeOpenAIServer, png_image

from ...conftest import TEST_KEY


def test_the_installed_litellm_is_the_checked_one() -> None:
    """An upgrade lands here first: review agent/upstream/litellm_images.py for it."""
    assert versions.installed("litellm") in litellm_images.CHECKED_VERSIONS
    assert litellm_images.ACTIVE


async def _generate(server: FakeOpenAIServer, client: openai.AsyncOpenAI) -> object:
    return await litellm.aimage_generation(
        model="openai/gpt-image-1", prompt="A cat.", n=1, client=client, timeout=30
    )


async def test_litellm_makes_a_plain_client_retry(openai_server: FakeOpenAIServer) -> None:
    """The behaviour worked around: max_retries=0 on the client is overwritten with 2."""
    openai_server.images.add_error(500, "down", headers={"Retry-After": "0"})
    openai_server.images.add_error(500, "down", headers={"Retry-After": "0"})
    openai_server.images.add_image(png_image(2, 2))
    async with httpx.AsyncClient() as http:
        client = openai.AsyncOpenAI(
            api_key=TEST_KEY, base_url=openai_server.api_base, max_retries=0, http_client=http
        )
        response = await _generate(openai_server, client)
    assert response.data
    assert len(openai_server.images.requests) == 3


async def test_the_no_retry_client_makes_one_attempt(openai_server: FakeOpenAIServer) -> None:
    openai_server.images.add_error(500, "down", headers={"Retry-After": "0"})
    openai_server.images.add_image(png_image(2, 2))
    async with httpx.AsyncClient() as http:
        client = litellm_images.no_retry_client(
            api_key=TEST_KEY, base_url=openai_server.api_base, http_client=http
        )
        client.max_retries = 2  # as LiteLLM writes it
        assert client.max_retries == 0
        with pytest.raises(litellm.InternalServerError):
            await _generate(openai_server, client)
    assert len(openai_server.images.requests) == 1
