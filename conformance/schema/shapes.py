"""Which fields a schema definition allows at its root, for R26 (no custom fields at the root of a spec type).

The ACP schema leaves `additionalProperties` open, so validation alone never notices an invented field: this
walks a definition's `properties`, following `$ref` and `allOf`, and for a tagged union (`oneOf`/`anyOf` whose
branches pin a discriminator with `const`) the branch the instance's tag selects. Where the union has no tag the
instance matches, every branch's fields count (the suite must not call a field unknown that some branch allows).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

_MAX_DEPTH = 12


def _resolve(schema: Mapping[str, Any], node: Any) -> Any:
    seen = 0
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and seen < _MAX_DEPTH:
        ref: str = node["$ref"]
        if not ref.startswith("#/$defs/"):
            return {}
        node = schema.get("$defs", {}).get(ref[len("#/$defs/") :], {})
        seen += 1
    return node


def _tag_matches(branch: Mapping[str, Any], instance: Mapping[str, Any], schema: Mapping[str, Any]) -> bool | None:
    """True/False when the branch pins a discriminator the instance has (or lacks); None when it pins none."""
    props = _collect_props(schema, branch, instance, 0, only_direct=True)
    pinned = False
    for key, sub in props.items():
        sub = _resolve(schema, sub)
        if isinstance(sub, Mapping) and "const" in sub:
            pinned = True
            if instance.get(key) != sub["const"]:
                return False
    return True if pinned else None


def _collect_props(
    schema: Mapping[str, Any], node: Any, instance: Mapping[str, Any], depth: int, *, only_direct: bool = False
) -> dict[str, Any]:
    node = _resolve(schema, node)
    if not isinstance(node, Mapping) or depth > _MAX_DEPTH:
        return {}
    out: dict[str, Any] = {}
    props = node.get("properties")
    if isinstance(props, Mapping):
        out.update(props)
    for part in node.get("allOf", ()) or ():
        out.update(_collect_props(schema, part, instance, depth + 1, only_direct=only_direct))
    if not only_direct:
        out.update(_union_props(schema, node, instance, depth))
    return out


def _union_props(
    schema: Mapping[str, Any], node: Mapping[str, Any], instance: Mapping[str, Any], depth: int
) -> dict[str, Any]:
    """The fields of the branches of the node's `oneOf` and `anyOf` that `instance` may be."""
    out: dict[str, Any] = {}
    for key in ("oneOf", "anyOf"):
        for branch in _chosen(schema, node.get(key, ()) or (), instance):
            out.update(_collect_props(schema, branch, instance, depth + 1))
    return out


def _chosen(schema: Mapping[str, Any], union: Iterable[Any], instance: Mapping[str, Any]) -> list[Any]:
    """The branches whose tag the instance matches; failing that, those that pin no tag; failing that, all."""
    branches = [b for b in union if isinstance(_resolve(schema, b), Mapping)]
    tagged = [(b, _tag_matches(_resolve(schema, b), instance, schema)) for b in branches]
    chosen = [b for b, match in tagged if match is True]
    if not chosen:
        chosen = [b for b, match in tagged if match is None] or branches
    return chosen


def allowed_fields(schema: Mapping[str, Any], definition: str, instance: Mapping[str, Any]) -> set[str] | None:
    """The field names `$defs/<definition>` allows at the root of `instance`; None when the definition is
    missing or declares no properties at all (then nothing can be said)."""
    if definition not in schema.get("$defs", {}):
        return None
    props = _collect_props(schema, {"$ref": f"#/$defs/{definition}"}, instance, 0)
    return set(props) if props else None


def unknown_fields(
    stable: Mapping[str, Any], unstable: Mapping[str, Any], definition: str, instance: Any
) -> tuple[list[str], list[str]]:
    """(fields no schema defines, fields only the unstable schema defines) at the root of `instance`."""
    if not isinstance(instance, Mapping):
        return [], []
    extra = _extra_fields(stable, definition, instance)
    if not extra:
        return [], []
    loose = allowed_fields(unstable, definition, instance) or set()
    return [k for k in extra if k not in loose], [k for k in extra if k in loose]


def _extra_fields(schema: Mapping[str, Any], definition: str, instance: Mapping[str, Any]) -> list[str]:
    """The fields at the root of `instance` that `$defs/<definition>` does not name (`_meta` aside), sorted."""
    allowed = allowed_fields(schema, definition, instance)
    if allowed is None:
        return []
    return sorted(k for k in instance if k not in allowed and k != "_meta")
