"""How a person rates an answer (a light module: the rate_answer action's schema names
the ratings without loading the memory's libraries)."""

from __future__ import annotations

RATINGS = ("up", "down")
