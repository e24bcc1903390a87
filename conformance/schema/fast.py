"""A compiled "is it valid?" check for the ACP schema: the fast path in front of jsonschema.

``conformance/schema/validate.py`` validates every message an agent writes; nearly all of them are valid, and for a
valid message jsonschema still walks every keyword through its generic machinery (``descend``/``evolve``, and a
``referencing`` lookup for every ``$ref``), about a millisecond a message. ``FastChecker`` turns each schema node
into a Python closure once: ``$ref``s are resolved when the closure is built (a recursive one through a
trampoline), objects are checked in one pass over their members, ``const``/``enum`` of strings are an equality
or a set look-up, and a tagged union (``x-ama-tagged-union``, see ``tagged_unions.py``) jumps to its one branch.

It only answers valid / not valid, with jsonschema's own meaning of each keyword (its type checks, its
``equal``, the validator's format checker). ``schema.py`` asks it first and runs jsonschema's ``iter_errors``
only when it says "not valid", so every error message still comes from jsonschema, unchanged, and a wrong "not
valid" here would only cost time. A node using a keyword this module does not implement (none does in the
pinned schema: ``unevaluatedProperties: true`` is the only rarity, and it accepts everything) is checked by
jsonschema itself (``fallback``), so the verdicts are jsonschema's by construction;
``tests/unit/test_schema_fast.py`` checks them against plain jsonschema on generated near-valid messages.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Mapping, Sized
from typing import Any

from ama_conformance.schema.tagged_unions import TAGGED_UNION_KEYWORD

Check = Callable[[Any], bool]

# Keywords that move the base URI or name a node: a node carrying one is left to jsonschema, which follows them.
# Of the keywords the validator class implements, those this module does not compile send their node there too;
# keywords the class does not implement (annotations, `x-…`) are ignored, as jsonschema ignores them.
_IDENTIFIERS = frozenset({"$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$recursiveRef"})
_OBJECT_KEYWORDS = frozenset({"properties", "required", "additionalProperties"})  # compiled together by `_object`


def _always(instance: object) -> bool:
    return True


def _never(instance: object) -> bool:
    return False


def _all(checks: list[Check]) -> Check | None:
    """The check that passes when every one of ``checks`` does (None: there is none)."""
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda x: first(x) and second(x)
    steps = tuple(checks)

    def every(x: Any) -> bool:
        for step in steps:
            if not step(x):
                return False
        return True

    return every


def _escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


def _is_integer(x: object) -> bool:
    if isinstance(x, bool):
        return False
    return isinstance(x, int) or (isinstance(x, float) and x.is_integer())


def _is_number(x: object) -> bool:
    return not isinstance(x, bool) and isinstance(x, numbers.Number)


_TYPES: dict[str, Check] = {
    "string": lambda x: isinstance(x, str),
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
    "integer": _is_integer,
    "number": _is_number,
}


_SIZED: dict[str, type[Sized]] = {"Length": str, "Items": list, "Properties": dict}


class _Unsupported(Exception):
    """This node needs jsonschema itself."""


class FastChecker:
    """Compiled validity checks for the definitions of one schema (build one per validator; thread-safe to *use*
    once built, to be built under the caller's lock).

    ``keywords``: the keywords the jsonschema validator class implements (others are ignored, as it does);
    ``tagged_union``: the name of the tagged-union keyword when the class has it; ``equal``: jsonschema's
    equality; ``formats``: format name -> the validator's format check; ``fallback(pointer)``: a jsonschema
    validity check of the node at that JSON pointer of the root.
    """

    def __init__(
        self,
        root: Mapping[str, Any],
        *,
        keywords: Iterable[str],
        tagged_union: str | None,
        equal: Callable[[Any, Any], bool],
        formats: Mapping[str, Check],
        fallback: Callable[[str], Check],
    ) -> None:
        self._root = root
        self._keywords = frozenset(keywords)
        self._tagged = tagged_union if tagged_union in self._keywords else None
        self._equal = equal
        self._formats = formats
        self._fallback = fallback
        self._refs: dict[str, Check | None] = {}
        self.fallbacks = 0  # nodes handed to jsonschema (0 for the pinned ACP schemas)

    def definition(self, name: str) -> Check:
        """The check of ``$defs/<name>`` (compiled on first use)."""
        return self._ref("/$defs/" + _escape(name)) or _always

    # -- compiling ----------------------------------------------------------------------------------

    def _resolve(self, pointer: str) -> Any:
        node: Any = self._root
        for raw in pointer.split("/")[1:]:
            segment = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and segment in node:
                node = node[segment]
            elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
                node = node[int(segment)]
            else:
                raise _Unsupported(pointer)
        return node

    def _ref(self, pointer: str) -> Check | None:
        if pointer in self._refs:
            return self._refs[pointer]
        cell: list[Check] = []

        def deref(instance: Any) -> bool:  # the target, for references met while compiling it (recursion)
            return cell[0](instance)

        self._refs[pointer] = deref
        try:
            compiled = self._compile(self._resolve(pointer), pointer)
        except _Unsupported:
            compiled = self._fallback_at(pointer)
        cell.append(compiled or _always)
        self._refs[pointer] = compiled
        return compiled

    def _fallback_at(self, pointer: str) -> Check:
        self.fallbacks += 1
        return self._fallback(pointer)

    def _sub(self, node: Any, pointer: str) -> Check | None:
        try:
            return self._compile(node, pointer)
        except _Unsupported:
            return self._fallback_at(pointer)

    def _compile(self, node: Any, pointer: str) -> Check | None:
        """The check of ``node`` (at ``pointer``), None when it accepts everything; raises ``_Unsupported``."""
        if node is True:
            return None
        if node is False:
            return _never
        if not isinstance(node, dict) or not _IDENTIFIERS.isdisjoint(node):
            raise _Unsupported(pointer)
        checks = self._keyword_checks(node, pointer)
        if not _OBJECT_KEYWORDS.isdisjoint(node):
            checks.append(self._object(node, pointer))
        return _all(checks)

    def _keyword_checks(self, node: dict[str, Any], pointer: str) -> list[Check]:
        """The checks of the keywords of ``node`` that are not about an object's members (``_object`` does those)."""
        checks: list[Check] = []
        for key, value in node.items():
            if key not in self._keywords or key in _OBJECT_KEYWORDS:
                continue
            check = self._keyword(key, value, node, f"{pointer}/{_escape(key)}")
            if check is not None:
                checks.append(check)
        return checks

    def _keyword(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> Check | None:
        compile_keyword = _KEYWORDS.get(key)
        if compile_keyword is not None:
            return compile_keyword(self, key, value, node, at)
        if key == self._tagged:
            return self._tagged_union(value, at)
        raise _Unsupported(at)

    # Each compiles one keyword: (its name, its value, the node holding it, its pointer) -> its check, None when
    # it accepts everything; ``_KEYWORDS`` below maps each keyword to one of them.

    def _ref_keyword(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> Check | None:
        if not isinstance(value, str) or not value.startswith("#") or "%" in value:
            raise _Unsupported(at)
        return self._ref(value[1:])

    def _type(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> Check:
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(n, str) and n in _TYPES for n in names):
            raise _Unsupported(at)
        preds = tuple(_TYPES[n] for n in names)
        if len(preds) == 1:
            return preds[0]
        return lambda x: any(p(x) for p in preds)

    def _const(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> Check:
        if isinstance(value, str):
            return lambda x: x == value  # jsonschema's equal() with a string on one side
        equal = self._equal
        return lambda x: equal(x, value)

    def _enum(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> Check:
        if not isinstance(value, list):
            raise _Unsupported(at)
        equal = self._equal
        members = tuple(value)
        strings = frozenset(v for v in value if isinstance(v, str))
        if len(strings) == len(members):
            # A str instance equals a member exactly when it is one of the strings; any other instance takes the
            # general comparison (never true for a JSON value, but this stays jsonschema's meaning).
            return lambda x: x in strings if type(x) is str else any(equal(m, x) for m in members)
        return lambda x: any(equal(m, x) for m in members)

    def _branches(self, value: Any, at: str) -> list[Check | None]:
        """The compiled branches of an ``allOf`` / ``anyOf`` / ``oneOf``."""
        if not isinstance(value, list) or not value:
            raise _Unsupported(at)
        return [self._sub(v, f"{at}/{i}") for i, v in enumerate(value)]

    def _all_of(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> Check | None:
        return _all([s for s in self._branches(value, at) if s is not None])

    def _any_of(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> Check | None:
        subs = self._branches(value, at)
        if any(s is None for s in subs):
            return None
        branches = tuple(s or _always for s in subs)
        return lambda x: any(b(x) for b in branches)

    def _one_of(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> Check:
        branches = tuple(s or _always for s in self._branches(value, at))

        def one_of(x: Any) -> bool:
            found = False
            for branch in branches:
                if branch(x):
                    if found:
                        return False
                    found = True
            return found

        return one_of

    def _not(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> Check:
        inner = self._sub(value, at)
        if inner is None:
            return _never
        return lambda x: not inner(x)

    def _items(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> Check | None:
        if "prefixItems" in node:
            raise _Unsupported(at)
        item = self._sub(value, at)
        if item is None:
            return None

        def each(x: Any) -> bool:
            if isinstance(x, list):
                for i in x:
                    if not item(i):
                        return False
            return True

        return each

    def _format(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> Check | None:
        if not isinstance(value, str) or value not in self._formats:
            return None  # a format the checker does not know is not checked by jsonschema either
        return self._formats[value]

    def _bound(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> Check:
        if not _is_number(value):
            raise _Unsupported(at)
        if key == "minimum":
            return lambda x: not _is_number(x) or not x < value
        if key == "maximum":
            return lambda x: not _is_number(x) or not x > value
        if key == "exclusiveMinimum":
            return lambda x: not _is_number(x) or not x <= value
        return lambda x: not _is_number(x) or not x >= value

    def _size(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> Check:
        if not _is_integer(value):
            raise _Unsupported(at)
        kind = _SIZED[key[3:]]
        if key.startswith("min"):
            return lambda x: not isinstance(x, kind) or len(x) >= value
        return lambda x: not isinstance(x, kind) or len(x) <= value

    def _accepting(self, key: str, value: Any, node: Mapping[str, Any], at: str) -> None:
        """``unevaluated*: true`` and ``uniqueItems: false``: nothing to check. Any other value: jsonschema's."""
        if value is True or (key == "uniqueItems" and value is False):
            return None  # unevaluated members checked against `true`: always valid
        raise _Unsupported(at)

    def _object(self, node: Mapping[str, Any], pointer: str) -> Check:
        """``properties``, ``required`` and ``additionalProperties`` of one node, in one pass over the members."""
        if "patternProperties" in node:
            raise _Unsupported(pointer)
        props_node = node.get("properties", {})
        required = node.get("required", [])
        if not isinstance(props_node, dict) or not isinstance(required, list):
            raise _Unsupported(pointer)
        props: dict[str, Check | None] = {
            name: self._sub(sub, f"{pointer}/properties/{_escape(name)}") for name, sub in props_node.items()
        }
        extra = self._additional(node, pointer)
        if extra is None:
            return _open_object(tuple(required), {k: c for k, c in props.items() if c is not None})
        return _closed_object(tuple(required), {k: c or _always for k, c in props.items()}, extra)

    def _additional(self, node: Mapping[str, Any], pointer: str) -> Check | None:
        """The check of the members ``properties`` does not name (None: any is valid)."""
        extra_node = node.get("additionalProperties", True)
        if isinstance(extra_node, dict):
            return self._sub(extra_node, f"{pointer}/additionalProperties")
        if not extra_node:  # jsonschema: `not aP` (false) rejects any extra member
            return _never
        return None

    def _tagged_union(self, spec: Any, at: str) -> Check | None:
        if (
            not isinstance(spec, dict)
            or not isinstance(spec.get("tag"), str)
            or not isinstance(spec.get("branches"), dict)
        ):
            raise _Unsupported(at)
        tag = spec["tag"]
        branches = {
            value: self._sub(branch, f"{at}/branches/{_escape(value)}") or _always
            for value, branch in spec["branches"].items()
        }

        def dispatch(x: Any) -> bool:
            if not isinstance(x, dict):
                return True  # reported by `type` beside it
            value = x.get(tag)
            branch = branches.get(value) if isinstance(value, str) else None
            return branch is None or branch(x)  # a missing / unknown tag: `required` / `enum` beside it

        return dispatch


def _open_object(names: tuple[str, ...], typed: dict[str, Check]) -> Check:
    """An object whose required members are ``names`` and whose members named in ``typed`` pass their check; any
    other member is valid. (``_closed_object`` with ``_always`` would do the same, a call per unchecked member
    slower: this loop is the fast path's hottest.)"""
    if not typed:
        return lambda x: not isinstance(x, dict) or all(n in x for n in names)

    def open_object(x: Any) -> bool:
        if not isinstance(x, dict):
            return True
        for n in names:
            if n not in x:
                return False
        for k, v in x.items():
            c = typed.get(k)
            if c is not None and not c(v):
                return False
        return True

    return open_object


def _closed_object(names: tuple[str, ...], checks: dict[str, Check], other: Check) -> Check:
    """An object whose required members are ``names``, each member passing its check in ``checks`` or, for a name
    it does not hold, ``other``."""

    def closed_object(x: Any) -> bool:
        if not isinstance(x, dict):
            return True
        for n in names:
            if n not in x:
                return False
        for k, v in x.items():
            if not checks.get(k, other)(v):
                return False
        return True

    return closed_object


_KeywordCompiler = Callable[[FastChecker, str, Any, Mapping[str, Any], str], Check | None]
_KEYWORDS: dict[str, _KeywordCompiler] = {
    "$ref": FastChecker._ref_keyword,
    "type": FastChecker._type,
    "const": FastChecker._const,
    "enum": FastChecker._enum,
    "allOf": FastChecker._all_of,
    "anyOf": FastChecker._any_of,
    "oneOf": FastChecker._one_of,
    "not": FastChecker._not,
    "items": FastChecker._items,
    "format": FastChecker._format,
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"), FastChecker._bound),
    **dict.fromkeys(
        ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"), FastChecker._size
    ),
    **dict.fromkeys(("unevaluatedProperties", "unevaluatedItems", "uniqueItems"), FastChecker._accepting),
}


def _format_check(func: Callable[[Any], object], raises: Any) -> Check:
    """``FormatChecker.conforms`` for one format: its function, and the exceptions that mean "does not conform"."""

    def check(instance: Any) -> bool:
        try:
            return bool(func(instance))
        except raises:
            return False

    return check


def jsonschema_fast_checker(
    root: Mapping[str, Any], uri: str, validator_cls: Any, registry: Any, formats: Any
) -> FastChecker:
    """The ``FastChecker`` of ``root`` (registered in ``registry`` as ``uri``) that gives the verdicts of
    ``validator_cls(..., registry=registry, format_checker=formats)``: its keywords, its equality, its format checks,
    and the validator itself for any node the checker cannot compile."""
    from jsonschema._utils import equal

    def fallback(pointer: str) -> Check:
        ref = {"$ref": f"{uri}#{pointer}"}
        check: Check = validator_cls(ref, registry=registry, format_checker=formats).is_valid
        return check

    return FastChecker(
        root,
        keywords=validator_cls.VALIDATORS,
        tagged_union=TAGGED_UNION_KEYWORD,
        equal=equal,
        formats={name: _format_check(func, raises) for name, (func, raises) in formats.checkers.items()},
        fallback=fallback,
    )
