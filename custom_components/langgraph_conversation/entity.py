"""What every entity of ours shares: one entity and one service device per subentry."""

from __future__ import annotations

from collections.abc import Callable

from homeassistant.config_entries import ConfigSubentry
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers.entity import Entity
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from . import LangGraphConfigEntry
from .agent.model import ModelSettings
from .const import CONF_MODEL, DOMAIN
from .profile import model_settings


def add_subentry_entities(
    entry: LangGraphConfigEntry,
    subentry_type: str,
    factory: Callable[[LangGraphConfigEntry, ConfigSubentry], Entity],
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """One entity per subentry of `subentry_type`, attached to that subentry."""
    for subentry in entry.subentries.values():
        if subentry.subentry_type == subentry_type:
            async_add_entities([factory(entry, subentry)], config_subentry_id=subentry.subentry_id)


class SubentryEntity:
    """Mixin: named after its device, which stands for the subentry (agent, AI Task)."""

    _attr_has_entity_name = True
    _attr_name = None
    # Default temperature of this kind of entity when the subentry sets none.
    default_temperature: float

    def __init__(self, entry: LangGraphConfigEntry, subentry: ConfigSubentry) -> None:
        """Bind the entity to its subentry."""
        self.entry = entry
        self.subentry = subentry
        self._attr_unique_id = subentry.subentry_id
        self._attr_device_info = dr.DeviceInfo(
            identifiers={(DOMAIN, subentry.subentry_id)},
            name=subentry.title,
            manufacturer="LangGraph Conversation",
            model=entry.data.get(CONF_MODEL),
            entry_type=dr.DeviceEntryType.SERVICE,
        )

    def _settings(self) -> ModelSettings:
        """The model settings the subentry chose."""
        return model_settings(self.subentry.data, self.default_temperature)
