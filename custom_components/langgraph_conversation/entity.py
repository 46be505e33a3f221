"""What every entity of ours shares: one entity and one service device per subentry."""

from __future__ import annotations

from collections.abc import Callable
import logging
from typing import Any

from homeassistant.config_entries import ConfigEntry, ConfigSubentry
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers.entity import Entity
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from .agent.model import ModelErrorKind, ModelSettings
from .agent.runtime import TurnError
from .const import (
    CONF_CONTEXT_WINDOW,
    CONF_KEEP_ALIVE,
    CONF_MAX_TOKENS,
    CONF_MODEL,
    CONF_REQUEST_TIMEOUT,
    CONF_TEMPERATURE,
    CONF_THINK,
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_KEEP_ALIVE,
    DEFAULT_MAX_TOKENS,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_THINK,
    DOMAIN,
    THINK_OFF,
    THINK_ON,
)

_LOGGER = logging.getLogger(__name__)

# The thinking option as Ollama's `think` field (None: not sent, the model decides).
_THINK = {THINK_ON: True, THINK_OFF: False}


def add_subentry_entities(
    entry: ConfigEntry,
    subentry_type: str,
    factory: Callable[[ConfigEntry, ConfigSubentry], Entity],
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

    def __init__(self, entry: ConfigEntry, subentry: ConfigSubentry) -> None:
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
        options: Any = self.subentry.data
        return ModelSettings(
            temperature=options.get(CONF_TEMPERATURE, self.default_temperature),
            max_tokens=options.get(CONF_MAX_TOKENS, DEFAULT_MAX_TOKENS),
            request_timeout=options.get(CONF_REQUEST_TIMEOUT, DEFAULT_REQUEST_TIMEOUT),
            # Used by Ollama's native API only (agent/model.py `ollama_options`); agents
            # saved before these options existed get the defaults.
            context_window=int(options.get(CONF_CONTEXT_WINDOW, DEFAULT_CONTEXT_WINDOW)),
            keep_alive=int(options.get(CONF_KEEP_ALIVE, DEFAULT_KEEP_ALIVE)),
            think=_THINK.get(options.get(CONF_THINK, DEFAULT_THINK)),
        )

    def _model_failure(self, err: TurnError) -> HomeAssistantError:
        """A failed turn or task as the sentence the user reads, logged once.

        A refused key also starts re-authentication, so the user can give a new one.
        """
        _LOGGER.warning("%s could not answer (%s): %s", self.entity_id, err.kind, err.detail)
        if err.kind == ModelErrorKind.AUTH:
            self.entry.async_start_reauth(self.hass)
        return HomeAssistantError(translation_domain=DOMAIN, translation_key=f"turn_{err.kind}")
