"""Tagged unions rewritten for a fast validator: only the branch whose tag matches is evaluated."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def _union_tag(branches: object) -> str | None:
    """The discriminator property of a tagged union, or None if ``branches`` is not one.

    A tagged union: every branch is ``{"type": "object", "required": [..tag..], "properties": {tag: {"const": c}}}``
    (plus anything else) and the constants are pairwise distinct.
    """
    if not isinstance(branches, list) or len(branches) < 2 or not all(isinstance(b, dict) for b in branches):
        return None
    candidates: set[str] | None = None
    for b in branches:
        tags = _pinned(b)
        if tags is None:
            return None
        candidates = tags if candidates is None else candidates & tags
        if not candidates:
            return None
    return _distinct_tag(branches, candidates or ())


def _pinned(branch: dict) -> set[str] | None:
    """The required properties an object branch pins to a string ``const`` (None: not an object branch)."""
    props = branch.get("properties")
    if branch.get("type") != "object" or not isinstance(props, dict):
        return None
    required = branch.get("required", ())
    return {
        k
        for k, v in props.items()
        if isinstance(v, dict) and "const" in v and k in required and isinstance(v["const"], str)
    }


def _distinct_tag(branches: list[dict], candidates: Iterable[str]) -> str | None:
    """The first of ``candidates`` (by name) whose constants differ from branch to branch."""
    for tag in sorted(candidates):
        consts = [b["properties"][tag]["const"] for b in branches]
        if len(set(consts)) == len(consts):
            return tag
    return None


TAGGED_UNION_KEYWORD = "x-ama-tagged-union"


def optimize_tagged_unions(node: Any) -> tuple[Any, int]:
    """Rewrite tagged ``oneOf``/``anyOf`` unions into an equivalent, tag-dispatched form.

    jsonschema evaluates every branch of a ``oneOf``; ``SessionUpdate`` has 19, each pulling in further unions,
    which makes validating one ``session/update`` take about a millisecond. In a tagged union (see ``_union_tag``)
    only the branch whose constant equals the instance's tag can match, so ``oneOf``/``anyOf`` [b1..bn] accepts
    exactly what ``{type: object, required: [tag], properties: {tag: {enum: [c1..cn]}}}`` plus "the instance
    is valid against bi where ci == instance[tag]" accepts. The last part is the ``x-ama-tagged-union`` keyword
    (``{"tag": tag, "branches": {ci: bi}}``), implemented by ``tagged_union_keyword``. The branches are kept
    unchanged. Returns a new tree (the input is not modified) and the number of unions rewritten.
    """
    count = 0

    def walk(n: Any) -> Any:
        nonlocal count
        if isinstance(n, list):
            return [walk(x) for x in n]
        if not isinstance(n, dict):
            return n
        out = {k: walk(v) for k, v in n.items()}
        for kw in ("oneOf", "anyOf"):
            tag = _union_tag(out.get(kw))
            if tag is None:
                continue
            branches = out.pop(kw)
            dispatch = {
                "type": "object",
                "required": [tag],
                "properties": {tag: {"enum": [b["properties"][tag]["const"] for b in branches]}},
                TAGGED_UNION_KEYWORD: {"tag": tag, "branches": {b["properties"][tag]["const"]: b for b in branches}},
            }
            out["allOf"] = [*out.get("allOf", ()), dispatch]
            count += 1
        return out

    return walk(node), count


def tagged_union_keyword(validator, spec, instance, schema):
    if not validator.is_type(instance, "object"):
        return  # reported by the "type" keyword next to this one
    value = instance.get(spec["tag"])
    branch = spec["branches"].get(value) if isinstance(value, str) else None
    if branch is not None:  # a missing / unknown tag is reported by "required" / "enum"
        yield from validator.descend(instance, branch, schema_path=value)
