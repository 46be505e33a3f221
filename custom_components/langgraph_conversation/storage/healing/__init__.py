"""Storage that heals: LangGraph's saver and store, the links and ratings, going on in
memory while their database is down, retried in the background, and written back when it
works again (health.py says how)."""

from .beside import HealingLinks, HealingRatings
from .healing_storage import HealingStorage
from .health import RETRY_DELAYS, StorageHealth

__all__ = ["RETRY_DELAYS", "HealingLinks", "HealingRatings", "HealingStorage", "StorageHealth"]
