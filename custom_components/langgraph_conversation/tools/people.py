"""Which person a Home Assistant user is: whose memories a turn or an action uses.

A person's memories are kept by the person entity's id (agent/memory/memories.py), which a
household can make the same on every Home Assistant sharing one PostgreSQL. It is read
from the person entities' `user_id` attribute, the person integration's public face
(importing that integration would set up its web views); Home Assistant links a user to
at most one person, and a person to at most one user.
"""

from __future__ import annotations

from homeassistant.core import HomeAssistant

PERSON_DOMAIN = "person"


def person_of_user(hass: HomeAssistant, user_id: str | None) -> str | None:
    """The entity id of the person whose user is `user_id`, None without one."""
    if not user_id:
        return None
    for state in hass.states.async_all(PERSON_DOMAIN):
        if state.attributes.get("user_id") == user_id:
            return state.entity_id
    return None
