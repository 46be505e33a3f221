"""Benchmarks of the LangGraph Conversation agent against Home Assistant's own Ollama agent.

Run through `scripts/bench` (it enters the 2026.10 leg and its virtualenv). Both agents talk
to one fake Ollama server on 127.0.0.1 (fakes/) inside a real Home Assistant core, turns
alternate between them, and every figure is reported side by side. See `cli.py` for the
options and the figures (FIGURES, RUN_ORDER), and each figure's module for what it measures
(storage.py with memory_search.py for figure 5, ...).
"""

# Home Assistant first: it installs probatio as voluptuous before anything imports voluptuous
# (the test plugin's helpers would otherwise import it first).
import homeassistant  # noqa: F401
