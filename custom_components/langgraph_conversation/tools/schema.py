"""Tool parameter schemas: voluptuous → JSON schema that every LiteLLM provider accepts.

Home Assistant converts its voluptuous schemas with voluptuous-openapi up to 2026.8 and
with probatio from 2026.9; both produce JSON schema. Providers accept different subsets:
OpenAI rejects top-level combinators, Gemini accepts only a small keyword set and no
`format` other than enum/date-time, Ollama's templates choke on unusual keys. We keep the
common subset, which loses nothing a model needs to call Home Assistant's tools.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
