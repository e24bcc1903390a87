"""The layers of ama, as the imports draw them (docs/architecture.md "Layers").

Every import in ama_acp/ (at the top of a module and inside functions, `TYPE_CHECKING` blocks included) is
read with `ast`; an edge from one part to another must be allowed by the table below, or the test fails
naming the file, line and rule. The picture in docs/architecture.md is this table.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from tests.support.source_ast import parse_source

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ama_acp"

# The parts of ama, bottom to top. A part may import itself and the parts listed for it, nothing else.
GROUND = {
    "conversation",
    "wire",
    "errors",
    "textsafe",
    "pids",
    "__init__",
}  # import nothing of ama (errors: and nothing else)
SUPPORT = {
    "config",
    "secrets",
    "credentials",
    "redact",
    "logs",
    "ownfiles",
}  # ground utilities: configuration, secrets, logging, ama's own files
AGENT_SIDE = {
    "context",
    "providers",
    "tools",
    "permissions",
    "agent",
    "mcp",
    "sandbox",
    "shaping",
}  # protocol-free: no wire, no rpc

ALLOWED: dict[str, set[str]] = {
    # ground floor
    "conversation": set(),
    "wire": set(),
    "errors": set(),
    "textsafe": set(),  # text from others made safe for a terminal: every printing path uses it
    "pids": set(),  # whether a process is alive: for what other ama processes leave in ama's folders
    "__init__": set(),
    # support
    "config": {"errors", "ownfiles"},
    "secrets": {"errors"},
    "credentials": {"errors", "secrets", "ownfiles"},
    "ownfiles": {"errors"},  # every file in ama's own folders opened one way: no links, no FIFOs, bounded
    "redact": {"secrets"},
    "logs": {"redact", "textsafe", "ownfiles"},
    # transport: JSON-RPC over stdio, knows nothing of sessions or the agent
    "rpc": {"errors"},
    # the protocol-free stack
    "context": {"conversation", "config", "errors"},
    # (and the package's version: the User-Agent of a model request, providers/exchange.py)
    "providers": {"__init__", "conversation", "config", "errors", "secrets", "credentials", "context"},
    "permissions": {"errors"},
    # the sandbox of the commands ama runs for a model or an agent under test: below the tools and the client
    "sandbox": {"config", "pids"},
    "tools": {"conversation", "config", "errors", "secrets", "redact", "permissions", "sandbox"},
    # what shapes ama from a person's or a team's files (commands, skills, hooks): parsed, protocol-free
    "shaping": {"conversation", "config", "errors", "textsafe", "secrets", "redact", "ownfiles", "tools", "sandbox"},
    "agent": {"conversation", "config", "errors", "context", "providers", "tools", "permissions", "shaping"},
    # the editor's MCP servers: connections and their tools, below the sessions that use them
    "mcp": {"conversation", "config", "errors", "secrets", "redact", "tools"},
    # the ACP side: sessions map the agent to the protocol; the server dispatches to them
    # (and the ACP client: an external agent carrying out a task is driven through it, session/tasks/external/agent.py)
    "session": {
        "__init__",
        "conversation",
        "wire",
        "errors",
        "textsafe",
        "pids",
        "rpc",
        "client",
        *SUPPORT,
        *AGENT_SIDE,
    },
    "handlers": {"__init__", "wire", "errors", "rpc", "config", "session"},
    "server": {"config", "errors", "rpc", "handlers", "logs"},
    # beside the agent: the ACP client (`ama acp-client`, `ama demo`) speaks the protocol, knows no agent; it
    # reads the `[client]` table of the same config file (config is support: it imports only errors)
    "client": {"__init__", "wire", "errors", "textsafe", "rpc", "config", "sandbox"},
    # entry points: wire the rest together; nothing imports them but each other
    "catalog_cli": {"config", "providers"},
    "oneshot": {"config", "conversation", "logs", "providers", "session", "textsafe", "wire"},
    "doctor": {"config", "credentials", "errors", "providers", "redact", "secrets", "textsafe", "tools", "sandbox"},
    "setup": {"config", "credentials", "errors", "ownfiles", "providers", "secrets"},
    "cli": {
        "__init__",
        "config",
        "secrets",
        "logs",
        "providers",
        "session",
        "server",
        "client",
        "oneshot",
        "catalog_cli",
        "doctor",
        "setup",
    },
    "__main__": {"cli"},
}


def part_of(module: str) -> str:
    """`ama_acp.session.store.session_store` → `session`; `ama_acp.cli` → `cli`; `ama_acp` → `__init__`."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@functools.cache
def _import_nodes(path: Path, stamp: tuple[int, int]) -> tuple[ast.Import | ast.ImportFrom, ...]:
    tree = parse_source(path.read_text(encoding="utf-8"), filename=str(path))
    return tuple(node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom))


def import_nodes(path: Path) -> tuple[ast.Import | ast.ImportFrom, ...]:
    """Every import statement of the file, at any depth: parsed and walked once for all the checks here (each
    reads every module of the package); a file changed since (a test's planted import) is read again."""
    stat = path.stat()
    return _import_nodes(path, (stat.st_mtime_ns, stat.st_size))


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every ama_acp import in the file, at any depth."""
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in import_nodes(path):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module is None or target == "ama_acp":  # `from ama_acp import x`: x may be a part
                found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, target))
    return [(line, name) for line, name in found if name == "ama_acp" or name.startswith("ama_acp.")]


def _is_module(name: str) -> bool:
    return _is_module_under(ROOT, name)


@functools.cache
def _is_module_under(root: Path, name: str) -> bool:
    rel = Path(*name.split("."))
    return (root / rel).is_dir() or (root / rel).with_suffix(".py").is_file()


def violations() -> list[str]:
    out: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = part_of(module_name(path))
        if source not in ALLOWED:
            out.append(f"{path.relative_to(ROOT)}: part {source!r} has no row in ALLOWED (add it, with its rule)")
            continue
        for line, name in imports_of(path):
            if not _is_module(name):  # `from ama_acp import __version__`: the package itself
                name = name.rpartition(".")[0]
            target = part_of(name)
            if target != source and target not in ALLOWED[source]:
                out.append(f"{path.relative_to(ROOT)}:{line}: {source} may not import {target} ({name})")
    return out


def test_every_import_keeps_to_the_layers() -> None:
    problems = violations()
    assert not problems, "imports that break the layers:\n" + "\n".join(problems)


def test_every_part_of_the_package_has_a_rule() -> None:
    parts = {part_of(module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert parts <= set(ALLOWED), sorted(parts - set(ALLOWED))
    assert set(ALLOWED) - parts == set(), f"rules for parts that do not exist: {sorted(set(ALLOWED) - parts)}"


def test_the_ground_floor_imports_nothing_of_ama() -> None:
    for name in sorted(GROUND):
        assert ALLOWED[name] == set(), name


def test_the_agent_side_never_reaches_the_protocol() -> None:
    for name in sorted(AGENT_SIDE):
        assert not ALLOWED[name] & {"wire", "rpc", "session", "handlers", "server", "client"}, name


def test_no_cycle_between_parts() -> None:
    graph = {name: allowed - {name} for name, allowed in ALLOWED.items()}
    seen: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state = seen.get(node)
        if state == 1:
            pytest.fail("a cycle in ALLOWED: " + " → ".join([*path, node]))
        if state == 2:
            return
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, [*path, node])
        seen[node] = 2

    for name in sorted(graph):
        visit(name, [])


@pytest.mark.parametrize(
    ("source", "line", "expected"),
    [
        ("ama_acp/agent/x.py", "from ama_acp.wire import types as w", "agent may not import wire"),
        ("ama_acp/context/x.py", "def f():\n    from ama_acp.providers.catalog import price_for", "context may not"),
        ("ama_acp/conversation/x.py", "from ama_acp import config", "conversation may not import config"),
        ("ama_acp/tools/x.py", "if TYPE_CHECKING:\n    from ama_acp.session.live import Session", "tools may"),
    ],
)
def test_the_checker_catches_a_forbidden_edge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, line: str, expected: str
) -> None:
    """The test above can fail: a forbidden import, at the top, in a function or under TYPE_CHECKING."""
    fake_root = tmp_path / "repo"
    target = fake_root / source
    target.parent.mkdir(parents=True)
    for init in (fake_root / "ama_acp" / "__init__.py", target.parent / "__init__.py"):
        init.write_text("")
    for existing in ("wire", "providers", "session"):
        (fake_root / "ama_acp" / existing).mkdir(exist_ok=True)
        (fake_root / "ama_acp" / existing / "__init__.py").write_text("")
    (fake_root / "ama_acp" / "config.py").write_text("")
    target.write_text("from typing import TYPE_CHECKING\n" + line + "\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "ROOT", fake_root)
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "PACKAGE", fake_root / "ama_acp")
    problems = violations()
    assert any(expected in p for p in problems), problems


# Inside session/: the Session is built by the manager (session/new) and the lifecycle (load, resume), and driven
# by `ama -p`; every other module of the package sees a session through a Protocol of what it uses (host.py
# `HostedSession`, compacting.py `CompactedSession`, …). A module whose name is a key here may be imported only
# by the modules listed for it (and itself).
IMPORTED_ONLY_BY: dict[str, set[str]] = {
    "ama_acp.session.live": {"ama_acp.session.manager", "ama_acp.session.lifecycle", "ama_acp.oneshot"},
    "ama_acp.session.manager": {"ama_acp.session.lifecycle", "ama_acp.handlers", "ama_acp.oneshot"},
    "ama_acp.session.lifecycle": {"ama_acp.handlers"},
}


def modules_imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every ama_acp module the file imports, at any depth; `from pkg import mod` counts as
    `pkg.mod` when `mod` is a module, and `from pkg.mod import name` as `pkg.mod`."""
    found: list[tuple[int, str]] = []
    for line, name in imports_of(path):
        found.append((line, name if _is_module(name) else name.rpartition(".")[0]))
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    for node in import_nodes(path):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            found += [(node.lineno, f"{target}.{a.name}") for a in node.names if _is_module(f"{target}.{a.name}")]
    return found


def narrow_import_violations() -> list[str]:
    out: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        this = module_name(path)
        for line, name in sorted(set(modules_imported(path))):
            allowed = IMPORTED_ONLY_BY.get(name)
            if allowed is not None and this != name and this not in allowed:
                out.append(f"{path.relative_to(ROOT)}:{line}: imports {name}, which only {sorted(allowed)} may")
    return out


def test_only_the_manager_the_lifecycle_and_oneshot_import_the_session_class() -> None:
    problems = narrow_import_violations()
    assert not problems, "imports of a module kept to a few importers:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "line",
    [
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ama_acp.session.live import Session",
        "def f():\n    from ama_acp.session import live",
        "from . import live",
    ],
)
def test_the_narrow_import_check_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str) -> None:
    """A helper of session/ that imports the Session's module, in any form and even under TYPE_CHECKING, is
    caught; the manager may."""
    fake_root = tmp_path / "repo"
    session = fake_root / "ama_acp" / "session"
    session.mkdir(parents=True)
    for init in (fake_root / "ama_acp" / "__init__.py", session / "__init__.py", session / "live.py"):
        init.write_text("")
    (session / "compacting.py").write_text(line + "\n")
    (session / "manager.py").write_text(line + "\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "ROOT", fake_root)
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "PACKAGE", fake_root / "ama_acp")
    problems = narrow_import_violations()
    assert len(problems) == 1 and problems[0].startswith("ama_acp/session/compacting.py:"), problems


# The rooms of session/, bottom to top: what each subpackage may import of the rest of session/ (its own modules and
# anything outside session/ are the table above's business). The store knows no other room; the editor seam and the
# accounting sit on it; a turn and the history on those; delegated tasks on a turn. The modules at the top of
# session/ (the manager, the lifecycle, the live session, restore) put the rooms together. `facets`, `runtime`,
# `conversation` and `commands` are top-level modules the rooms share (Protocols and values).
SHARED = {"facets", "runtime", "conversation", "commands"}
ROOMS: dict[str, set[str]] = {
    "store": set(),
    "rules": set(),  # permission rules: the config's and the project file's (session/rules/)
    "editor": {"store", "rules", *SHARED},
    "accounting": {"store", *SHARED},
    "history": {"store", "accounting", *SHARED},
    "turn": {"store", "editor", "accounting", "mcp", *SHARED},
    "tasks": {"store", "editor", "accounting", "turn", "restore", *SHARED},
}


def room_of(module: str) -> str | None:
    """`ama_acp.session.store.reader` → `store`; `ama_acp.session.live` → `live`; outside session/ → None."""
    pieces = module.split(".")
    return pieces[2] if pieces[:2] == ["ama_acp", "session"] and len(pieces) > 2 else None


def room_violations() -> list[str]:
    out: list[str] = []
    for path in sorted((PACKAGE / "session").rglob("*.py")):
        source = room_of(module_name(path))
        if source not in ROOMS:
            continue
        for line, name in sorted(set(modules_imported(path))):
            target = room_of(name)
            if target is not None and target != source and target not in ROOMS[source]:
                out.append(f"{path.relative_to(ROOT)}:{line}: session/{source}/ imports session/{target}")
    return out


def test_the_rooms_of_session_keep_their_floors() -> None:
    problems = room_violations()
    assert not problems, "session/'s rooms import against their order:\n" + "\n".join(problems)


def test_the_room_check_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store importing a turn's module (a room above it) is caught; a turn importing the store is not."""
    fake_root = tmp_path / "repo"
    session = fake_root / "ama_acp" / "session"
    for room in ("store", "turn"):
        (session / room).mkdir(parents=True)
        (session / room / "__init__.py").write_text("")
    (fake_root / "ama_acp" / "__init__.py").write_text("")
    (session / "__init__.py").write_text("")
    (session / "turn" / "host.py").write_text("from ama_acp.session.store import reader\n")
    (session / "store" / "reader.py").write_text("def f():\n    from ama_acp.session.turn.host import X\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "ROOT", fake_root)
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "PACKAGE", fake_root / "ama_acp")
    assert room_violations() == ["ama_acp/session/store/reader.py:2: session/store/ imports session/turn"]


def test_every_preloaded_name_imports() -> None:
    """server.PRELOAD names modules as strings (imported in a thread at startup, where a failure is only logged):
    a module renamed or moved must fail here, not quietly leave the preload half done."""
    import importlib

    from ama_acp import server

    for name in server.PRELOAD:
        importlib.import_module(name)


def test_the_architecture_picture_names_every_part() -> None:
    """docs/architecture.md draws this table: a part added here and missing there is a stale picture."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    picture = text.split("```")[1]  # the first code block is the picture
    names = {name for name in ALLOWED if name not in {"__init__", "__main__"}}
    missing = sorted(n for n in names if f"{n}/" not in picture and f"{n}.py" not in picture)
    assert not missing, f"parts missing from the picture in docs/architecture.md: {missing}"


def test_the_conformance_suite_stands_beside_ama() -> None:
    """conformance/ drives agents through ama's client only (it must judge any agent, ama included, from the
    outside); inside ama_acp/, only the command line (`ama conformance`) imports it."""
    suite = ROOT / "conformance"
    problems = []
    for path in sorted(suite.rglob("*.py")):
        for line, name in imports_of(path):
            if part_of(name if _is_module(name) else name.rpartition(".")[0]) not in {
                "client",
                "errors",
                "textsafe",
                "__init__",
            }:
                problems.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in import_nodes(path):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            if any(n == "ama_conformance" or n.startswith("ama_conformance.") for n in names) and path.name != "cli.py":
                problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports the conformance suite")
    assert not problems, "\n".join(problems)
