"""Tool parameter schemas: voluptuous → JSON schema that every LiteLLM provider accepts.

Home Assistant converts its voluptuous schemas with voluptuous-openapi up to 2026.8 and
with probatio from 2026.9; both produce JSON schema. Providers accept different subsets:
OpenAI rejects top-level combinators, Gemini accepts only a small keyword set and no
`format` other than enum/date-time, Ollama's templates choke on unusual keys. We keep the
common subset, which loses nothing a model needs to call Home Assistant's tools.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import Enum
from functools import cache, partial
import json
import time
from types import BuiltinFunctionType, FunctionType, MethodType, NoneType
from typing import Any

import voluptuous as vol

from homeassistant.core import HomeAssistant
from homeassistant.helpers import floor_registry as fr

try:  # Home Assistant >= 2026.9
    from probatio import to_openapi as _to_json_schema
except ImportError:  # Home Assistant 2026.2
    from voluptuous_openapi import convert as _to_json_schema

# Keywords every provider understands; anything else is dropped.
_KEPT_KEYWORDS = frozenset(
    {
        "type",
        "description",
        "properties",
        "required",
        "items",
        "enum",
        "anyOf",
        "minimum",
        "maximum",
        "minItems",
        "maxItems",
        "nullable",
    }
)


def schema_to_json(schema: Any, custom_serializer: Callable[[Any], Any] | None) -> dict[str, Any]:
    """Convert a voluptuous schema the way Home Assistant's own LLM agents do."""
    return _to_json_schema(schema, custom_serializer=custom_serializer)


def _merge_all_of(node: dict[str, Any]) -> dict[str, Any]:
    """Fold `allOf` branches into the node itself (properties and required merge)."""
    merged = {k: v for k, v in node.items() if k != "allOf"}
    for branch in node.get("allOf", []):
        branch = _merge_all_of(branch) if isinstance(branch, dict) else {}
        for key, value in branch.items():
            if key == "properties":
                merged.setdefault("properties", {}).update(value)
            elif key == "required":
                merged["required"] = sorted(set(merged.get("required", [])) | set(value))
            else:
                merged.setdefault(key, value)
    return merged


def _clean(node: Any) -> Any:
    if isinstance(node, list):
        return [_clean(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = _merge_all_of(node) if "allOf" in node else node
    if "oneOf" in node:  # one-of and any-of read the same to a model
        node = {**{k: v for k, v in node.items() if k != "oneOf"}, "anyOf": node["oneOf"]}
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _KEPT_KEYWORDS:
            continue
        if key == "properties":
            result[key] = {name: _clean(sub) for name, sub in value.items()}
        elif key == "type" and isinstance(value, list):
            # ["string", "null"] → "string" + nullable: Gemini accepts no type lists.
            types = [t for t in value if t != "null"]
            result[key] = types[0] if types else "string"
            if "null" in value:
                result["nullable"] = True
        else:
            result[key] = _clean(value)
    if "anyOf" in result and len(result["anyOf"]) == 1:
        only = result.pop("anyOf")[0]
        result = {**only, **result}
    return result


def sanitize_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return an object schema without top-level combinators or exotic keywords."""
    # All-of branches all apply: fold them in, required fields included.
    top = _merge_all_of(schema) if "allOf" in schema else dict(schema)
    for combinator in ("anyOf", "oneOf"):
        # No provider accepts a combinator at the top; merge the alternatives' properties
        # so every parameter stays callable (which branch applies is the tool's business).
        for branch in top.pop(combinator, []):
            if isinstance(branch, dict):
                top.setdefault("properties", {}).update(branch.get("properties", {}))
    cleaned = _clean(top)
    cleaned["type"] = "object"
    cleaned.setdefault("properties", {})
    cleaned.pop("nullable", None)
    if required := cleaned.get("required"):
        cleaned["required"] = [name for name in required if name in cleaned["properties"]]
    return cleaned


# Converted tool schemas, by the structure of the voluptuous schema they came from.
# Home Assistant builds new tool objects for every turn (the Assist API's tools list the
# exposed entities' names and areas), so their identity says nothing; converting them
# again every turn was a tenth of the turn's overhead.
_CONVERTED_KEPT = 128
# Each as JSON text (copied from) and as the dict it reads as (shared).
_converted: OrderedDict[Hashable, tuple[str, dict[str, Any]]] = OrderedDict()


class _ByIdentity:
    """Stands for an object whose content cannot be read: equal only to itself.

    Holding the object keeps its id from being reused by another one while cached.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByIdentity) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)


@cache
def _slot_names(cls: type) -> tuple[str, ...]:
    """The instance attributes a class and its bases declare in __slots__."""
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else slots
    return tuple(name for name in names if name not in ("__dict__", "__weakref__"))


_ATOMS = (str, int, float, bool, bytes, type, Enum, NoneType)
_FUNCTIONS = (FunctionType, BuiltinFunctionType, MethodType, partial)


def _fingerprint(value: Any, path: set[int] | None = None) -> Hashable:
    """A hashable summary of everything the conversion can read from `value`.

    Equal fingerprints mean equal types and values all the way down, so the conversion (a
    function of exactly that) gives equal results. Functions, and objects that show no
    attributes, count by identity: one made anew per turn only costs a cache miss.
    """
    if type(value) is str:  # most leaves: names, descriptions
        return value
    if isinstance(value, _ATOMS):
        # With its type: True, 1 and 1.0 are equal in Python but not in a JSON schema.
        return (type(value), value)
    if isinstance(value, _FUNCTIONS):
        # What a function does is its code and closure, which cannot be compared.
        return _ByIdentity(value)
    path = set() if path is None else path
    if id(value) in path:
        # A validator pointing back at the schema that compiled it: nothing new in it.
        return "^"
    path.add(id(value))
    try:
        if isinstance(value, dict):
            return (
                dict,
                tuple(
                    (_fingerprint(key, path), _fingerprint(item, path))
                    for key, item in value.items()
                ),
            )
        if isinstance(value, list | tuple):
            return (type(value), tuple(_fingerprint(item, path) for item in value))
        if isinstance(value, set | frozenset):
            return (type(value), frozenset(_fingerprint(item, path) for item in value))
        return _object_fingerprint(value, path)
    finally:
        path.discard(id(value))


def _object_fingerprint(value: Any, path: set[int]) -> Hashable:
    attributes = dict(getattr(value, "__dict__", ()))
    for name in _slot_names(type(value)):
        if hasattr(value, name):
            attributes[name] = getattr(value, name)
    fields = []
    for name, attribute in attributes.items():
        # Compiled validators and per-instance hash functions derive from the rest.
        if name == "_compiled" or name.startswith("__"):
            continue
        if name == "default" and isinstance(value, vol.Marker) and callable(attribute):
            # vol.Optional wraps its default in a new function per schema.
            attribute = attribute()
        fields.append((name, _fingerprint(attribute, path)))
    if not fields:
        return (type(value), _ByIdentity(value))
    return (type(value), tuple(fields))


# Keywords left out of Home Assistant's tool schemas: every request carries them, and
# Home Assistant validates the arguments itself (an out-of-range value comes back as an
# error the model reads), as its own Ollama agent relies on: it sends no bounds either.
_LEAN_DROPPED = frozenset({"minimum", "maximum"})


def _one_or_many(alternatives: list[Any]) -> dict[str, Any] | None:
    """The scalar of `[scalar, array of that scalar]` (a value or a list of them).

    Home Assistant's tools accept both; the model is shown the single value, which is
    how people ask ("the lights"), and a request with one value validates as before.
    """
    if len(alternatives) != 2 or not all(isinstance(a, dict) for a in alternatives):
        return None
    for one, many in (alternatives, alternatives[::-1]):
        if (
            set(one) <= {"type", "enum"}
            and one.get("type") not in (None, "array", "object")
            and set(many) == {"type", "items"}
            and many["type"] == "array"
            and many["items"] == one
        ):
            return one
    return None


def _device_classes_within(node: Any, present: set[str]) -> Any:
    """A `device_class` parameter offering only the classes some exposed entity has
    (None: no exposed entity has any of them, so the parameter could match nothing)."""
    enum = node.get("enum") or (node.get("items") or {}).get("enum")
    if not isinstance(enum, list):
        return node
    kept = [value for value in enum if value in present]
    if not kept:
        return None
    if "enum" in node:
        return {**node, "enum": kept}
    return {**node, "items": {**node["items"], "enum": kept}}


def lean_schema(
    node: Any, device_classes: set[str] | None = None, *, lists_as_one: bool = True
) -> Any:
    """A sanitized Home Assistant tool schema in fewer tokens, with the same meaning to a
    model: no bounds (see _LEAN_DROPPED), "one or a list" offered as one (unless
    `lists_as_one` is off: a tool whose point is to take several keeps its lists), and with
    `device_classes` (those of the exposed entities) a device class parameter lists only
    those: Home Assistant matches a device class against the exposed entities, so the
    others (21 on the on/off intents) cannot match anything."""
    if isinstance(node, list):
        return [lean_schema(item, device_classes, lists_as_one=lists_as_one) for item in node]
    if not isinstance(node, dict):
        return node
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key in _LEAN_DROPPED:
            continue
        if key == "properties":
            result[key] = {}
            for name, sub in value.items():
                if name == "device_class" and device_classes is not None:
                    sub = _device_classes_within(sub, device_classes)
                    if sub is None:
                        continue
                result[key][name] = lean_schema(sub, device_classes, lists_as_one=lists_as_one)
        else:
            result[key] = lean_schema(value, device_classes, lists_as_one=lists_as_one)
    if lists_as_one and (single := _one_or_many(result.get("anyOf") or [])) is not None:
        del result["anyOf"]
        result = {**single, **result}
    return result


def _single_value(node: Any) -> bool:
    """Whether a parameter allows exactly one value (as such, or as a list of it)."""
    if not isinstance(node, dict):
        return False
    enum = node.get("enum") or (node.get("items") or {}).get("enum")
    return isinstance(enum, list) and len(enum) == 1


def home_has_floors(hass: HomeAssistant) -> bool:
    """Whether the home has a floor a `floor` parameter could match (without_unmatchable)."""
    return next(iter(fr.async_get(hass).async_list_floors()), None) is not None


def without_unmatchable(parameters: dict[str, Any], floors: bool) -> dict[str, Any]:
    """A lean tool schema without the optional parameters that cannot change a call:

    - `floor` when the home has no floors: Home Assistant matches it against the floor
      registry, so any value would match nothing;
    - `domain` when it allows a single domain: the intent then serves only that domain
      (its handler requires it), so naming it adds nothing.

    Required parameters always stay.
    """
    properties = parameters.get("properties")
    if not isinstance(properties, dict):
        return parameters
    required = set(parameters.get("required") or ())
    kept = {
        name: sub
        for name, sub in properties.items()
        if name in required
        or not ((name == "floor" and not floors) or (name == "domain" and _single_value(sub)))
    }
    return {**parameters, "properties": kept}


# In front of the fingerprint, a schema is also known by the objects it holds. Home
# Assistant's intent tools put the same key and validator objects (their intent handler's
# slot schema, built once) into a new Schema every turn, so those objects name the schema
# as well as its fingerprint does, which walks every object in it (about 225 a turn for
# Assist's tools: most of their conversion's cost per turn). A validator changed in place
# keeps its identity, so a schema known this way is fingerprinted again once the entry is
# _RECHECK_AFTER seconds old: such a change shows within that time.
_RECHECK_AFTER = 60.0
_clock = time.monotonic


@dataclass(slots=True)
class _KnownSchema:
    """The fingerprint key of a schema known by identity, and what its identity names."""

    # The key and value objects and the serializer: held, so no id is reused meanwhile.
    parts: tuple[Any, ...]
    key: Hashable
    checked: float


_known: OrderedDict[Hashable, _KnownSchema] = OrderedDict()


def _identity(schema: Any, custom_serializer: Any) -> tuple[Hashable, tuple[Any, ...]] | None:
    """(A key naming `schema` by the objects it holds, those objects); None when its
    content is not a plain dict (then only the fingerprint names it)."""
    inner = getattr(schema, "schema", None)
    if type(inner) is not dict:
        return None
    required, extra = getattr(schema, "required", None), getattr(schema, "extra", None)
    if not isinstance(required, bool | NoneType) or not isinstance(extra, int | NoneType):
        return None
    items = tuple(inner.items())
    key = (
        type(schema),
        required,
        extra,
        id(custom_serializer),
        tuple((id(k), id(v)) for k, v in items),
    )
    return key, (items, custom_serializer)


def _conversion_key(schema: Any, custom_serializer: Any) -> Hashable | None:
    """What the converted schema is cached under (None: not cached, converted anew)."""
    identity, parts = _identity(schema, custom_serializer) or (None, ())
    now = _clock()
    entry = _known.get(identity) if identity is not None else None
    if entry is not None and now - entry.checked < _RECHECK_AFTER:
        _known.move_to_end(identity)
        return entry.key
    try:
        key: Hashable = (_fingerprint(schema), _ByIdentity(custom_serializer))
    except RecursionError:  # nested too deep to summarise: converted every time
        return None
    if identity is not None:
        _known[identity] = _KnownSchema(parts, key, now)
        _known.move_to_end(identity)
        while len(_known) > _CONVERTED_KEPT:
            _known.popitem(last=False)
    return key


def tool_parameters(
    schema: Any, custom_serializer: Callable[[Any], Any] | None, *, shared: bool = False
) -> dict[str, Any]:
    """`sanitize_schema(schema_to_json(...))`, converted once per distinct schema.

    Each call returns its own copy, so a caller changing it cannot change the cache;
    `shared`: the cached dict itself, for a caller that only reads it (lean_schema builds
    a new one), which spares the copy.
    """
    key = _conversion_key(schema, custom_serializer)
    if key is not None and (converted := _converted.get(key)) is not None:
        _converted.move_to_end(key)
        text, parameters = converted
        return parameters if shared else json.loads(text)
    parameters = sanitize_schema(schema_to_json(schema, custom_serializer))
    if key is not None:
        text = json.dumps(parameters)
        _converted[key] = (text, json.loads(text))
        while len(_converted) > _CONVERTED_KEPT:
            _converted.popitem(last=False)
    return parameters
