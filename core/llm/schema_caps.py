"""Caps written into a structured-output schema, so that constrained decoding itself ends a looping reply.

A small model at temperature 0 sometimes repeats itself: the same list item again and again (graphiti's
entity and edge lists, Mem0's memories) or the same text inside one string (MemGPT's ``send_message``).
Under json_schema decoding the backend (llama.cpp, vLLM) must close a list at ``maxItems`` and a string at
``maxLength``, so the reply ends well-formed instead of running to ``max_tokens`` and being cut off.
"""

from __future__ import annotations

from typing import Any

_NESTED_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_NESTED_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_NESTED_ONE = ("items", "additionalProperties", "not")


def _has_type(schema: dict[str, Any], kind: str) -> bool:
    types = schema.get("type")
    return types == kind or (isinstance(types, list) and kind in types)


def _capped(schema: Any, kind: str, key: str, limit: int | None) -> Any:
    """A copy of ``schema`` in which every subschema of type ``kind`` has ``key`` <= ``limit`` (a tighter
    value is kept); ``None`` = unchanged."""
    if limit is None or not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if _has_type(out, kind):
        out[key] = min(int(out.get(key, limit)), int(limit))
    for name in _NESTED_MAPS:
        if isinstance(out.get(name), dict):
            out[name] = {sub_name: _capped(sub, kind, key, limit) for sub_name, sub in out[name].items()}
    for name in _NESTED_LISTS:
        if isinstance(out.get(name), list):
            out[name] = [_capped(sub, kind, key, limit) for sub in out[name]]
    for name in _NESTED_ONE:
        if isinstance(out.get(name), dict):
            out[name] = _capped(out[name], kind, key, limit)
    return out


def cap_strings(schema: Any, max_chars: int | None) -> Any:
    """Every string at most ``max_chars`` long (``maxLength``); ``None`` = unchanged."""
    return _capped(schema, "string", "maxLength", max_chars)


def cap_items(schema: Any, max_items: int | None) -> Any:
    """Every array at most ``max_items`` long (``maxItems``); ``None`` = unchanged."""
    return _capped(schema, "array", "maxItems", max_items)


def longest_list(value: Any) -> int:
    """The length of the longest list anywhere in a parsed reply (0 if none): a reply whose longest list
    reached the cap was probably ended by it, which the adapters count."""
    if isinstance(value, list):
        return max([len(value), *(longest_list(v) for v in value)])
    if isinstance(value, dict):
        return max([0, *(longest_list(v) for v in value.values())])
    return 0
