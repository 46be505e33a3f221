"""Contract of agent/upstream/litellm_lazy.py: LiteLLM's lazy registry."""

from __future__ import annotations

from litellm import _lazy_imports

from custom_components.langgraph_conversation.agent.upstream import litellm_lazy, versions


def test_the_installed_litellm_is_the_checked_one() -> None:
    """An upgrade lands here first: review agent/upstream/litellm_lazy.py for it."""
    assert versions.installed("litellm") in litellm_lazy.CHECKED_VERSIONS
    assert litellm_lazy.ACTIVE


def test_the_registry_lists_lazy_attributes() -> None:
    registry = _lazy_imports._get_lazy_import_registry()
    assert len(registry) > 20
    assert all(isinstance(name, str) for name in registry)


def test_the_providers_configs_are_lazy_attributes_left_to_their_calls() -> None:
    """The names the warm-up leaves out are lazy attributes of LiteLLM, config classes
    that LiteLLM resolves through its own registry; every other name is resolved: reading
    it afterwards imports nothing."""
    import sys

    import litellm
    from litellm import _lazy_imports_registry

    registry = _lazy_imports._get_lazy_import_registry()
    configs = set(_lazy_imports_registry.LLM_CONFIG_NAMES)
    assert len(configs) > 50
    assert configs <= set(registry)
    assert all(name.endswith("Config") for name in configs)
    assert {registry[name] for name in configs} == {_lazy_imports._lazy_import_llm_configs}
    litellm_lazy.resolve_lazy_attributes()
    others = set(registry) - configs
    assert others
    modules = set(sys.modules)
    for name in others:
        getattr(litellm, name)
    assert set(sys.modules) == modules


def test_resolving_the_provider_configs_leaves_none_for_later() -> None:
    """What image generation and embeddings resolve first: reading a config afterwards
    imports nothing."""
    import sys

    import litellm
    from litellm import _lazy_imports_registry

    litellm_lazy.resolve_provider_configs()
    modules = set(sys.modules)
    for name in _lazy_imports_registry.LLM_CONFIG_NAMES:
        assert isinstance(getattr(litellm, name), type)
    assert set(sys.modules) == modules
