"""Workarounds for the libraries we depend on: the one place for them.

Each module here carries the workarounds for one library (or one concern) at exact
versions: a comment naming the upstream behaviour and the version it was checked on, a
check at import that the installed version is that one (otherwise it stays out and the
library's plain public path is used, or, where none exists, a safe one that is named), and
contract tests in tests/agent/upstream/ (one file per module) that fail when an upgrade
changes the behaviour, so the workaround is reviewed instead of silently applied to code it was
not written for.
Nothing outside this package touches a private member of LiteLLM, langchain-litellm,
langchain-core, the OpenAI SDK or anyio.

- litellm_lazy: LiteLLM's lazy attributes.
- litellm_release: LiteLLM's logging threads, logging worker and cached HTTP clients.
- litellm_images: an OpenAI client for image generation that LiteLLM cannot make retry.
- langchain_litellm: keeping each call's key and base URL with that call.
- langchain_core: merging a streamed answer's metadata; running a JSON-schema tool.
- sdk_imports: the modules a first embedding or chat call imports (the SDK's, anyio's, LiteLLM's).
- openai_stream: the OpenAI SDK's stream generators, closed with each answer.
- stream_ends: ending httpx's chain of generators under a response closed early.
- heap: taking LiteLLM's import-sized heap out of the cyclic garbage collector's walk.
"""
