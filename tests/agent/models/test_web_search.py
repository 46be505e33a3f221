"""Which models search the web (LiteLLM's map), which of an agent's models searches, and
what a provider's citations become: links that cannot break out of Markdown."""

from __future__ import annotations

import random
import string
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

from custom_components.langgraph_conversation.agent.models import (
    ModelAccess,
    RoleAccesses,
    searching_model,
)
from custom_components.langgraph_conversation.agent.models.web_search import (
    MAX_SOURCES,
    model_searches,
    safe_url,
    sources_of,
)

SEED = 1227


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # The five providers LiteLLM 1.83.0 maps web_search_options for.
        ("openai/gpt-4o-search-preview", True),
        ("openai/gpt-4o-mini-search-preview", True),
        ("anthropic/claude-sonnet-4-5-20250929", True),
        ("gemini/gemini-2.5-flash", True),
        ("xai/grok-4", True),
        ("perplexity/sonar", True),
        # OpenAI models the map marks for the Responses API's search, not the chat API's.
        ("openai/gpt-4.1", False),
        ("openai/gpt-5", False),
        # Not searching, unknown, or another provider's map entry.
        ("anthropic/claude-3-haiku-20240307", False),
        ("openai/gpt-test", False),
        ("ollama_chat/llama3.2", False),
        ("gpt-4o-search-preview", False),
        ("vertex_ai/gemini-2.5-flash", False),
    ],
)
def test_which_models_search(model: str, expected: bool) -> None:
    assert model_searches(model) is expected


SEARCHING = ModelAccess("anthropic/claude-sonnet-4-5-20250929", "k")
PLAIN = ModelAccess("openai/gpt-test", "k", "http://127.0.0.1:1")


async def test_which_of_an_agents_models_searches() -> None:
    """The chosen web search model only (when it searches); else the agent's own when it
    searches, with its fallback only if that one searches too; else none."""
    chosen = ModelAccess("perplexity/sonar", "p")
    searcher = await searching_model(PLAIN, RoleAccesses(search=chosen, fallback=SEARCHING))
    assert searcher is not None
    assert (searcher.access, searcher.fallback) == (chosen, None)
    assert await searching_model(SEARCHING, RoleAccesses(search=PLAIN)) is None
    own = await searching_model(SEARCHING, RoleAccesses(fallback=PLAIN))
    assert own is not None
    assert (own.access, own.fallback) == (SEARCHING, None)
    both = await searching_model(SEARCHING, RoleAccesses(fallback=chosen))
    assert both is not None
    assert both.fallback == chosen
    assert await searching_model(PLAIN, RoleAccesses(fallback=SEARCHING)) is None


def _hostile(rng: random.Random) -> str:
    alphabet = string.printable + "()[]<>\"' \u202e\u0000\ud800"
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60)))


def test_generated_citations_become_safe_links() -> None:
    """For generated citations (hostile titles, addresses of any scheme with brackets,
    spaces and controls): at most MAX_SOURCES, each address http(s) with a host, each once,
    and neither title nor address can end a Markdown link early or start a new line."""
    rng = random.Random(SEED)
    schemes = ["http", "https", "javascript", "data", "file", "HTTPS", ""]
    for _ in range(300):
        annotations = []
        for _ in range(rng.randrange(0, 9)):
            url = f"{rng.choice(schemes)}://{rng.choice(['a.example', '', 'b.example:8080'])}"
            url += "/" + _hostile(rng)
            annotations.append(
                {"type": "url_citation", "url_citation": {"url": url, "title": _hostile(rng)}}
            )
        message = SimpleNamespace(annotations=annotations, provider_specific_fields=None)
        found = sources_of(SimpleNamespace(), message)
        assert len(found) <= MAX_SOURCES
        assert len({source.url for source in found}) == len(found)
        for source in found:
            parts = urlsplit(source.url)
            assert parts.scheme.lower() in ("http", "https")
            assert parts.hostname
            for bad in ("(", ")", "[", "]", " ", "\n", "<", ">", '"'):
                assert bad not in source.url
            for bad in ("[", "]", "\n", "\r", "<", ">", "`", "\u202e", "\x00"):
                assert bad not in source.title
            assert source.title


def test_each_providers_citation_shape_is_read() -> None:
    """OpenAI's nested url_citation, xAI's flat one, Anthropic's citations and search
    results, Perplexity's search results and bare citations, Gemini's grounding chunks."""
    openai = SimpleNamespace(
        annotations=[
            {"type": "url_citation", "url_citation": {"url": "https://o.example", "title": "O"}}
        ]
    )
    assert [(s.title, s.url) for s in sources_of(SimpleNamespace(), openai)] == [
        ("O", "https://o.example")
    ]
    xai = SimpleNamespace(
        annotations=[{"type": "url_citation", "url": "https://x.example/a", "title": "X"}]
    )
    assert [s.url for s in sources_of(SimpleNamespace(), xai)] == ["https://x.example/a"]
    anthropic = SimpleNamespace(
        provider_specific_fields={
            "citations": [None, [{"url": "https://a.example/3", "title": "A3"}]],
            "web_search_results": [
                {
                    "content": [
                        {"url": "https://a.example/1", "title": "A1"},
                        {"url": "https://a.example/2", "title": "A2"},
                    ]
                }
            ],
        }
    )
    assert [s.url for s in sources_of(SimpleNamespace(), anthropic)] == [
        "https://a.example/3",
        "https://a.example/1",
        "https://a.example/2",
    ]
    perplexity = SimpleNamespace(
        search_results=[{"title": "P1", "url": "https://p.example/1"}],
        citations=["https://p.example/1", "https://p.example/2"],
    )
    found = sources_of(perplexity, SimpleNamespace())
    assert [(s.title, s.url) for s in found] == [
        ("P1", "https://p.example/1"),
        ("p.example", "https://p.example/2"),
    ]
    gemini = SimpleNamespace(
        vertex_ai_grounding_metadata=[
            {"groundingChunks": [{"web": {"uri": "https://g.example/r", "title": "g.example"}}]}
        ]
    )
    assert [s.url for s in sources_of(gemini, SimpleNamespace())] == ["https://g.example/r"]


def test_unsafe_addresses_are_refused() -> None:
    for url in (
        "javascript:alert(1)",
        "data:text/html,x",
        "file:///etc/passwd",
        "https://",
        7,
        None,
    ):
        assert safe_url(url) is None
    assert safe_url("https://a.example/x y)") == "https://a.example/x%20y%29"
