"""The meta-test of the conformance suite: the requirement registry is well-formed, every requirement is bound to
a check that can report it (and no check to an id the registry lacks), group functions report only the ids they
declare, and together with the unobservable list the registry covers every MUST of the ACP v1 digest."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

import ama_conformance.groups.catalog  # noqa: F401  (registers every group in base.GROUPS)
from ama_conformance.core.wire_checks import TRANSCRIPT_IDS
from ama_conformance.groups import base
from ama_conformance.requirements import registry as requirements
from ama_conformance.requirements.registry import BY_ID, REGISTRY, Profile, Tier
from ama_conformance.requirements.unobservable import UNOBSERVABLE

REPO = Path(__file__).resolve().parents[2]
GROUP_DIR = Path(base.__file__).resolve().parent
# The digest itself is not part of the repository; a person who has it names it by env to cross-check the
# fixed list below against it (the repository stands alone without it).
DIGEST = Path(os.environ["AMA_ACP_DIGEST"]) if os.environ.get("AMA_ACP_DIGEST") else None
DOC = REPO / "docs" / "conformance.md"

# The MUST / MUST NOT ids of the ACP v1 agent requirements digest, fixed here so the check stands without it.
DIGEST_MUSTS = """R1 R2 R3 R4 R6 R10 R11 R12 R13 R18 R20 R26 R27 R28 R30 R33 R35 R36 R37 R39 R42 R45 R48 R50 R53 R54 R60
R63 R64 R65 R66 R67 R74 R79 R80 R88 R94 R95 R96 R100 R103 R108 R110 R111 R112 R113 R115 R124 R131 R132 R133 R136
R138 R139 R140 R141 R142 R147""".split()

# Gates a requirement may name: a capability path of the initialize result, a session-setup result field, an
# advertised auth method, or an observed behaviour (requirements.py's docstring lists them).
GATE = re.compile(
    r"(sessionCapabilities|promptCapabilities|mcpCapabilities)\.[A-Za-z]+"
    r"|loadSession|modes|configOptions|authMethods\.agent|auth\.logout|used:(terminal|permission|lines|messageId|cancel_request|delegation)"
)
# The calls through which a group reports a finding; `needs` names another group's requirement and reports none.
REPORTING = frozenset({"check", "passed", "failed", "skip", "untested", "at"})


def declared_by_groups() -> dict[str, set[str]]:
    """id -> names of the registered groups that declare it."""
    out: dict[str, set[str]] = {}
    for g in base.GROUPS:
        for rid in g.ids:
            out.setdefault(rid, set()).add(g.name)
    return out


# --- the registry itself -------------------------------------------------------------------------------------


def test_ids_are_unique() -> None:
    ids = [r.id for r in REGISTRY]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert set(BY_ID) == set(ids)


@pytest.mark.parametrize("req", REGISTRY, ids=lambda r: r.id)
def test_requirement_has_text_section_and_a_known_gate(req: requirements.Requirement) -> None:
    assert req.text.strip() and req.text == " ".join(req.text.split())
    assert req.section.strip()
    # ACP ids are the digest's (R); H ids are the suite's own rules for agents it cannot trust (H1: confinement).
    assert re.fullmatch(r"R\d+(\.\d+)?|H\d+" if req.profile is Profile.ACP else r"[EDPU]\d+", req.id)
    if req.gate is not None:
        assert GATE.fullmatch(req.gate), f"{req.id}: unknown gate form {req.gate!r}"
    if req.tier is Tier.CAPABILITY:
        assert req.gate is not None, f"{req.id} is CAPABILITY without a gate: it could never be SKIPPED"


def test_tiers_that_decide() -> None:
    assert {t for t in Tier if t.decides} == {Tier.MANDATORY, Tier.CAPABILITY}


# --- binding of ids to checks ------------------------------------------------------------------------------


def test_every_requirement_is_bound_to_a_check() -> None:
    bound = set(declared_by_groups()) | set(TRANSCRIPT_IDS)
    unbound = [r.id for r in REGISTRY if r.id not in bound]
    assert not unbound, f"no group and no transcript check declares {unbound}"


def test_no_check_is_bound_to_an_unknown_id() -> None:
    unknown = {rid: names for rid, names in declared_by_groups().items() if rid not in BY_ID}
    assert not unknown, f"groups declare ids the registry lacks: {unknown}"
    assert not [rid for rid in TRANSCRIPT_IDS if rid not in BY_ID]
    assert len(TRANSCRIPT_IDS) == len(set(TRANSCRIPT_IDS))


def test_group_names_are_unique_and_ids_not_repeated_within_a_group() -> None:
    names = [g.name for g in base.GROUPS]
    assert len(names) == len(set(names))
    for g in base.GROUPS:
        assert g.ids, f"group {g.name} declares nothing"
        assert len(g.ids) == len(set(g.ids)), g.name


def test_usage_ids_only_in_the_usage_group_and_transcript_ids_are_acp() -> None:
    for g in base.GROUPS:
        wrong = [rid for rid in g.ids if rid in BY_ID and BY_ID[rid].profile is not g.profile]
        assert not wrong, f"group {g.name} ({g.profile.value}) declares ids of another profile: {wrong}"
    usage_groups = {g.name for g in base.GROUPS if g.profile is Profile.USAGE}
    assert usage_groups == {"usage"}
    for rid, names in declared_by_groups().items():
        if rid in BY_ID and BY_ID[rid].profile is Profile.USAGE:
            assert names == {"usage"}, (rid, names)
    assert all(BY_ID[rid].profile is Profile.ACP for rid in TRANSCRIPT_IDS)
    assert "R7" in TRANSCRIPT_IDS


# --- group functions report only what they declare (read from their source) ----------------------------------


def _is_group_decorator(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "group"


def _literal_loops(fn: ast.AST) -> dict[int, set[str]]:
    """Calls inside `for rid in ("R1", "R2"):` loops: id(call's argument node) -> the literal ids it takes."""
    out: dict[int, set[str]] = {}
    for loop in ast.walk(fn):
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)):
            continue
        if not isinstance(loop.iter, ast.Tuple | ast.List):
            continue
        values = {e.value for e in loop.iter.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        if len(values) != len(loop.iter.elts):
            continue
        for node in ast.walk(loop):
            if isinstance(node, ast.Name) and node.id == loop.target.id and isinstance(node.ctx, ast.Load):
                out[id(node)] = values
    return out


def _reported(fn: ast.AST, calls: frozenset[str]) -> list[tuple[int, str]]:
    """(line, id) of every literal (or literal-loop) id passed first to one of `calls` on any receiver."""
    loops = _literal_loops(fn)
    found: list[tuple[int, str]] = []
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in calls):
            continue
        if not node.args:
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.append((node.lineno, first.value))
        elif id(first) in loops:
            found.extend((node.lineno, rid) for rid in sorted(loops[id(first)]))
    return found


def _group_modules() -> list[Path]:
    return sorted(p for p in GROUP_DIR.glob("*.py") if p.name not in ("__init__.py", "base.py"))


def _decorated(tree: ast.Module) -> list[tuple[str, tuple[str, ...], ast.AsyncFunctionDef]]:
    out = []
    for node in tree.body:
        if not isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            if _is_group_decorator(dec):
                assert isinstance(dec, ast.Call)
                name = ast.literal_eval(dec.args[0])
                ids = ast.literal_eval(dec.args[1])
                assert isinstance(node, ast.AsyncFunctionDef), f"group {name} is not a coroutine function"
                out.append((name, tuple(ids), node))
    return out


def test_the_source_parse_sees_every_registered_group() -> None:
    parsed = {}
    for path in _group_modules():
        for name, ids, _ in _decorated(ast.parse(path.read_text(encoding="utf-8"))):
            parsed[name] = ids
    assert parsed == {g.name: g.ids for g in base.GROUPS}


@pytest.mark.parametrize("path", _group_modules(), ids=lambda p: p.stem)
def test_group_functions_report_only_their_declared_ids(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for name, ids, fn in _decorated(tree):
        stray = [(line, rid) for line, rid in _reported(fn, REPORTING) if rid not in ids]
        assert not stray, f"{path.name}: group {name} reports ids it does not declare {ids}: {stray}"
        blocked_on = [rid for _, rid in _reported(fn, frozenset({"needs"}))]
        assert all(rid in BY_ID for rid in blocked_on), f"{name} needs unknown ids: {blocked_on}"


@pytest.mark.parametrize("path", _group_modules(), ids=lambda p: p.stem)
def test_helpers_outside_groups_report_no_literal_id(path: Path) -> None:
    """A helper shared by groups reports through ids its caller passes, or blocks (needs); a literal id in a
    helper would be reported by every group that calls it, declared or not."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    groups = {id(fn) for _, _, fn in _decorated(tree)}
    for node in tree.body:
        if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef) and id(node) not in groups:
            assert not _reported(node, REPORTING), f"{path.name}: {node.name} reports literal ids"
            assert all(rid in BY_ID for _, rid in _reported(node, frozenset({"needs"})))


def test_the_source_scan_finds_reporting_calls() -> None:
    """The scan above must not pass for want of matches: it finds the checks of a known group."""
    tree = ast.parse((GROUP_DIR / "lifecycle.py").read_text(encoding="utf-8"))
    found = {name: {rid for _, rid in _reported(fn, REPORTING)} for name, _, fn in _decorated(tree)}
    assert {"R36", "R41", "R42", "R44"} <= found["initialize"]
    assert {"R47", "R48", "R50"} <= found["auth"]  # R47/R48 partly through a literal loop


# --- coverage of the ACP v1 MUSTs ------------------------------------------------------------------------


def test_unobservable_entries_have_reasons_and_are_not_also_checked() -> None:
    for rid, reason in UNOBSERVABLE.items():
        assert re.fullmatch(r"R\d+", rid), rid
        assert reason.strip(), f"{rid} has no reason"
        assert rid not in BY_ID, f"{rid} is both checked and called unobservable"


def test_the_digest_musts_are_covered() -> None:
    covered = set(BY_ID) | set(UNOBSERVABLE)
    missing = [rid for rid in DIGEST_MUSTS if rid not in covered]
    assert not missing, f"MUSTs neither checked nor explained as unobservable: {missing}"


_BOLD_HEAD = re.compile(r"^\s*- \*\*(R\d+)\b([^*]*)\*\*")  # - **R3 MUST NOT** — …, - **R142 (URL mode) MUST**
_BARE_HEAD = re.compile(r"\*\*(R\d+)\*\* — (.*)")  # - **R27** — … Receivers **MUST NOT** …


def digest_must_ids(text: str) -> set[str]:
    ids = set()
    for line in text.splitlines():
        head = _BOLD_HEAD.match(line)
        if head and re.search(r"\bMUST\b", head.group(2)):
            ids.add(head.group(1))
        bare = _BARE_HEAD.search(line)
        if bare and re.search(r"\bMUST\b", bare.group(2)):
            ids.add(bare.group(1))
    return ids


def test_digest_parser_reads_each_form() -> None:
    sample = "\n".join(
        [
            "- **R1 MUST** — Every message is UTF-8.",
            "- **R3 MUST NOT** — No raw newline.",
            "- **R142 (URL mode) MUST**",
            "- **R27** — Receivers **MUST NOT** assume anything.",
            "- **R14 should\\*** — short.",
            "- **R87 SHOULD** — succeeds silently.",
            "- **R81** — With the cwd filter.",
        ]
    )
    assert digest_must_ids(sample) == {"R1", "R3", "R142", "R27"}


def test_every_must_of_the_digest_file_is_covered() -> None:
    if DIGEST is None or not DIGEST.is_file():
        pytest.skip("AMA_ACP_DIGEST names no digest file: the repository stands alone, the fixed list still applies")
    found = digest_must_ids(DIGEST.read_text(encoding="utf-8"))
    # The file's format still matches the parser: most of the fixed list is found in it (the rest, such as R10's
    # "SHOULD … MUST" or R136's sub-bullets, states its MUST in a form the parser leaves alone).
    assert len(found & set(DIGEST_MUSTS)) >= len(DIGEST_MUSTS) * 3 // 4, sorted(found)
    covered = set(BY_ID) | set(UNOBSERVABLE)
    missing = sorted(found - covered, key=lambda r: int(r[1:]))
    assert not missing, f"MUSTs of {DIGEST.name} neither checked nor explained as unobservable: {missing}"


# --- the documentation carries the registry ----------------------------------------------------------------


def test_markdown_table_has_a_row_per_requirement() -> None:
    table = requirements.markdown_table()
    rows = table.splitlines()[2:]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == [r.id for r in REGISTRY]
    assert all(row.count(" | ") == 5 for row in rows)


def test_docs_carry_the_registry_table_verbatim() -> None:
    assert requirements.markdown_table() in DOC.read_text(encoding="utf-8")
