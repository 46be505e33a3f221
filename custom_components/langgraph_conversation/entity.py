"""What every entity of ours shares: one entity and one service device per subentry."""

from __future__ import annotations

from collections.abc import Callable
import logging

from homeassistant.config_entries import ConfigSubentry
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers.entity import Entity
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from . import LangGraphConfigEntry
from .agent.errors import ModelErrorKind, TurnError
from .agent.models import ModelSettings
from .const import CONF_MODEL, DOMAIN
from .profile import model_settings

_LOGGER = logging.getLogger(__name__)


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
    # Set by Home Assistant's Entity, which every subclass also is.
    hass: HomeAssistant
    entity_id: str

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

    def _model_failure(self, err: TurnError) -> HomeAssistantError:
        """A failed turn or task as the sentence the user reads, logged once.

        A refused key also starts re-authentication, so the user can give a new one.
        """
        _LOGGER.warning("%s could not answer (%s): %s", self.entity_id, err.kind, err.detail)
        if err.kind == ModelErrorKind.AUTH:
            self.entry.async_start_reauth(self.hass)
        return HomeAssistantError(translation_domain=DOMAIN, translation_key=f"turn_{err.kind}")
