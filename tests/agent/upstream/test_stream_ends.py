"""Contract of agent/upstream/stream_ends.py: httpx reads a response through nested async
generators and leaves the inner ones suspended when the outer one is closed early; closing
the response and reading on ends them all."""

from __future__ import annotations

import httpx

from custom_components.langgraph_conversation.agent.upstream import stream_ends
from fakes import FakeOpenAIServer, png_image

from ...loop_closings import nothing_left_for_the_loop, watch_loop_closings


async def test_closing_httpx_bytes_early_leaves_its_inner_generators(
    openai_server: FakeOpenAIServer,
) -> None:
    """The behaviour worked around: still there (else close_early can become aclose)."""
    url = openai_server.serve_image(png_image(64, 64, seed=1), chunked=True)
    async with httpx.AsyncClient() as client, client.stream("GET", url) as response:
        with watch_loop_closings() as closings:
            body = response.aiter_bytes(chunk_size=16)
            await anext(body)
            await body.aclose()
            del body
    # Which links are left depends on the httpx and httpcore releases (aiter_raw and
    # below on 2026.2 and 2026.10, httpcore's pool stream on 2026.11): some always are.
    assert closings.generators, "httpx closed its whole chain itself"


async def test_close_early_ends_every_generator_of_the_chain(
    openai_server: FakeOpenAIServer,
) -> None:
    image = png_image(64, 64, seed=2)
    url = openai_server.serve_image(image, chunked=True)
    async with httpx.AsyncClient() as client:
        async with client.stream("GET", url) as response:
            with nothing_left_for_the_loop():
                body = response.aiter_bytes(chunk_size=16)
                assert len(await anext(body)) == 16
                await stream_ends.close_early(response, body)
                del body
            assert response.is_closed
        # Read to its end, there is nothing left to do; the client still works.
        async with client.stream("GET", url) as response:
            with nothing_left_for_the_loop():
                body = response.aiter_bytes()
                assert b"".join([chunk async for chunk in body]) == image
                await stream_ends.close_early(response, body)
