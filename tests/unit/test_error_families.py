"""One error family per layer (ama_acp/errors.py) and named error codes only (ama_acp/rpc/errors.py).

The classes are found by importing every module of the package and the code literals by reading its source
with `ast`, so a new exception class or a new `-32xxx` written inline fails here without anyone listing it.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import ama_acp
from ama_acp import errors
from tests.support.source_ast import parse_source

PACKAGE = Path(ama_acp.__file__).parent
FAMILIES = (
    errors.ProtocolError,
    errors.ConfigError,
    errors.ProviderError,
    errors.ToolError,
    errors.StoreError,
    errors.ControlFlow,
)
# `python -m ama_acp` runs the program when imported; it defines no classes.
NOT_IMPORTED = {"ama_acp.__main__"}
CODES_MODULE = PACKAGE / "rpc" / "errors.py"


def _modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(ama_acp.__path__, prefix="ama_acp.")]
    return sorted(n for n in names if n not in NOT_IMPORTED)


def _exception_classes() -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for name in _modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == name:
                found.append(value)
    return found


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_walk_finds_the_known_classes() -> None:
    """Guards the test itself: a walk that found nothing would pass everything below."""
    names = {c.__qualname__ for c in _exception_classes()}
    assert {"AcpError", "ClientError", "ConfigError", "ToolError", "StoreError", "TurnEnd", "StreamError"} <= names
    assert len(names) >= 25


def test_every_exception_class_derives_from_exactly_one_family() -> None:
    wrong: list[str] = []
    for cls in _exception_classes():
        if cls is errors.AmaError or cls in FAMILIES:
            continue
        families = [f.__name__ for f in FAMILIES if issubclass(cls, f)]
        if len(families) != 1:
            wrong.append(f"{cls.__module__}.{cls.__qualname__}: {families or 'no family'}")
    assert not wrong, "each exception class must derive from exactly one family of ama_acp/errors.py:\n" + "\n".join(
        wrong
    )


def test_the_families_hang_from_ama_error_and_nothing_else() -> None:
    for family in FAMILIES:
        assert family.__bases__ == (errors.AmaError,), family
    assert errors.AmaError.__bases__ == (Exception,)


def test_no_exception_class_is_defined_inside_a_function() -> None:
    """A class inside a function is invisible to the walk above; exceptions live at module level."""
    nested: list[str] = []
    for path in _sources():
        tree = parse_source(path.read_text(), str(path))
        for func in ast.walk(tree):
            if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(func):
                    bases = [ast.unparse(b) for b in getattr(node, "bases", [])]
                    if isinstance(node, ast.ClassDef) and any(b.endswith(("Error", "Exception")) for b in bases):
                        nested.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    assert not nested


def test_the_tree_in_the_docstring_names_every_class() -> None:
    """errors.py draws the tree; a class it does not name is a class the drawing forgot."""
    doc = errors.__doc__ or ""
    missing = []
    for cls in _exception_classes():
        if cls.__module__ == "ama_acp.errors":
            assert cls.__name__ in doc
            continue
        dotted = f"{cls.__module__.removeprefix('ama_acp.')}.{cls.__qualname__}"
        if dotted not in doc:
            missing.append(dotted)
    assert not missing, f"not in the tree drawn by ama_acp/errors.py: {missing}"


def test_the_ground_floor_imports_nothing_of_ama() -> None:
    tree = parse_source((PACKAGE / "errors.py").read_text())
    imported = [
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    ]
    assert not [m for m in imported if m and m.split(".")[0] == "ama_acp"]


@pytest.mark.parametrize(
    ("module", "name", "family"),
    [
        ("ama_acp.config", "ConfigError", errors.ConfigError),
        ("ama_acp.tools.base", "ToolError", errors.ToolError),
        ("ama_acp.session.store.session_store", "StoreError", errors.StoreError),
    ],
)
def test_the_old_import_paths_name_the_family_itself(module: str, name: str, family: type[Exception]) -> None:
    assert getattr(importlib.import_module(module), name) is family


def test_members_keep_the_builtin_bases_callers_catch() -> None:
    from ama_acp.session.store.session_store import SessionWriteError
    from ama_acp.tools.regular import NotRegularFileError
    from ama_acp.tools.search.globs import GlobError
    from ama_acp.tools.workspace import BinaryFileError

    assert issubclass(GlobError, ValueError) and issubclass(BinaryFileError, ValueError)
    assert issubclass(NotRegularFileError, OSError) and issubclass(SessionWriteError, OSError)
    assert NotRegularFileError("x").errno is not None  # still built as an OSError with an errno


def _code_literals(path: Path) -> list[str]:
    """Negative integer literals in the JSON-RPC reserved range (-32768..-32000) or ACP's -32800 block."""
    found = []
    for node in ast.walk(parse_source(path.read_text(), str(path))):
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)
            and type(node.operand.value) is int
            and 32000 <= node.operand.value <= 32899
        ):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} -{node.operand.value}")
    return found


def test_the_code_literal_check_sees_a_code() -> None:
    assert _code_literals(CODES_MODULE), "rpc/errors.py defines the codes; the check must see them there"


def test_no_error_code_is_written_as_a_number_outside_rpc_errors() -> None:
    literals = [hit for path in _sources() if path != CODES_MODULE for hit in _code_literals(path)]
    assert not literals, "use the named constants of ama_acp/rpc/errors.py:\n" + "\n".join(literals)


def test_every_code_has_one_name() -> None:
    from ama_acp.rpc import errors as rpc_errors

    codes = {k: v for k, v in vars(rpc_errors).items() if k.isupper() and type(v) is int and v < 0}
    assert len(set(codes.values())) == len(codes), codes
    assert {-32700, -32600, -32601, -32602, -32603, -32800, -32000, -32002, -32010} == set(codes.values())


def test_causes_walks_what_an_exception_wraps_each_once() -> None:
    inner = OSError(111, "Connection refused")
    handled = ValueError("being handled")
    outer = RuntimeError("wrapped")
    outer.__cause__, outer.__context__ = inner, handled  # `raise … from inner` while handling another
    assert list(errors.causes(outer)) == [outer, inner]  # the explicit cause, not the context
    plain = KeyError("k")
    plain.__context__ = handled
    assert list(errors.causes(plain)) == [plain, handled]
    handled.__context__ = plain  # a chain that loops back
    assert list(errors.causes(plain)) == [plain, handled]


def test_setup_s_reason_finds_the_socket_s_words_and_ends_on_a_looping_chain() -> None:
    from ama_acp.setup.verify import _reason

    outer = RuntimeError("connect failed")
    outer.__cause__ = OSError(111, "Connection refused")
    assert _reason(outer) == "Connection refused"
    looped = RuntimeError("no socket error in it")
    looped.__context__ = ValueError("back")
    looped.__context__.__context__ = looped
    assert _reason(looped) == "no socket error in it"  # it used to go round for ever
