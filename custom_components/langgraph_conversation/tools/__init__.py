"""Home Assistant's side of the agent's tools: the only code that acts on the home."""
