"""Every file ama opens in its own folders goes through one opener (ama_acp/ownfiles.py; issue 39): this test
reads every module of ama_acp/ with `ast` and fails on a call that opens, creates, writes or renames a file by
itself, unless the module is listed below with the reason it may. So the next file ama keeps in its data or
config folder is covered by construction: it goes through `ownfiles`, or it is listed here and a reviewer reads
why. The opener's own guarantees are tested through real links, FIFOs and devices below."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp import ownfiles
from tests.support.source_ast import parse_source

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ama_acp"

# Calls that open, create, write or rename a file: `module.function` for module functions, `.name` for a method
# called on anything (a Path's), `open` for the builtin.
RAW = {
    "open",
    "io.open",
    "os.open",
    "os.fdopen",
    "os.replace",
    "os.rename",
    "os.mkdir",
    "os.makedirs",
    "os.mkfifo",
    "shutil.copy",
    "shutil.copy2",
    "shutil.copyfile",
    "shutil.copytree",
    "shutil.move",
    "tempfile.mkstemp",
    "tempfile.NamedTemporaryFile",
    ".read_text",
    ".write_text",
    ".read_bytes",
    ".write_bytes",
    ".mkdir",
    ".touch",
}  # (`.replace`/`.rename` as methods are every str's and struct's too: a Path's rename is written `os.replace`)

# Where a raw open is right, and why: folders of their own policy, then single modules (module: the calls it may
# make). Nothing here touches the data dir or the config dir except as said.
OWN_POLICY = {
    "ama_acp/tools/": "the workspace: the model's tools, under the path policy and tools/regular.py",
    "ama_acp/sandbox/": "the launcher of confined commands: its own files, in its own temporary folder",
    "ama_acp/client/": "ama's own ACP client: an agent's fs/* requests, in the person's workspace",
    "ama_acp/mcp/": "MCP servers: their pipes, and /proc to find their processes",
}
ALLOWED: dict[str, tuple[set[str], str]] = {
    "ama_acp/ownfiles.py": ({"open", "os.open", "os.replace", "os.mkdir", "os.makedirs"}, "the opener itself"),
    "ama_acp/credentials.py": (
        {"os.open", "os.replace", "os.mkdir"},
        "the file a person named (its link followed on purpose: dotfiles) replaced through a new exclusive file "
        "and a rename, never opening what has the name; read through ownfiles.read_named",
    ),
    "ama_acp/logs.py": (
        {"open", "os.replace"},
        "wraps the descriptor ownfiles opened; a rollover renames the log files in their own folder (a link among "
        "them is renamed, never followed)",
    ),
    "ama_acp/session/store/reader.py": ({"open"}, "wraps the descriptor store/files.py (ownfiles) opened"),
    "ama_acp/session/store/listing.py": ({"open"}, "wraps the descriptor store/files.py (ownfiles) opened"),
    "ama_acp/session/store/search.py": ({"open"}, "wraps the descriptor store/files.py (ownfiles) opened"),
    "ama_acp/session/store/holders.py": ({"open"}, "reads /proc/locks (the kernel's, not ama's)"),
    "ama_acp/session/store/handover.py": ({"open"}, "reads /proc/PID/status of an asker (the kernel's, not ama's)"),
    "ama_acp/session/store/session_store.py": (
        {".mkdir"},
        "the sessions folder itself: the root below which ownfiles follows no link",
    ),
    "ama_acp/session/store/checkpoint_files.py": (
        {"open"},
        "reads the workspace's files ama is about to change (through store/files.py, final link refused)",
    ),
    "ama_acp/session/history/rewind.py": (
        {"os.open", "os.mkdir"},
        "puts the workspace's files back, under the session's path policy, folder by folder without links (the "
        "file itself through ownfiles.replace_in)",
    ),
    "ama_acp/session/history/checkpoints.py": (
        {".read_text", ".write_text"},
        "the session's workspace (RecordingWorkspace), not a file of ama's",
    ),
    "ama_acp/session/editor/approval.py": ({".read_text"}, "the session's workspace (a diff's old text)"),
    "ama_acp/session/editor/workspaces.py": (
        {".read_text", ".write_text"},
        "the workspace: the disk's or the editor's",
    ),
    "ama_acp/session/tasks/external/requests.py": (
        {".read_text", ".write_text"},
        "an external agent's fs/* requests, through the session's workspace",
    ),
    "ama_acp/agent/instruction_files.py": (
        {"open"},
        "AGENTS.md: its own reader refuses links out, FIFOs and devices and caps the size (docs/context.md)",
    ),
    "ama_acp/shaping/command_files.py": (
        {"open", "os.open"},
        "command files: the workspace's and the person's, read as AGENTS.md is (links out, FIFOs and devices "
        "refused, O_NOFOLLOW | O_NONBLOCK, the size capped: docs/commands.md)",
    ),
    "ama_acp/providers/scripted.py": ({".read_text"}, "the scripted model's script, a file the person names"),
    "ama_acp/oneshot.py": ({"os.open"}, "/dev/null in place of a stdout its reader closed (`ama -p … | head`)"),
    "ama_acp/setup/write.py": ({".mkdir"}, "the config folder `ama setup` writes the person's config into"),
}


def _called(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id if func.id == "open" else None
    if not isinstance(func, ast.Attribute):
        return None
    if isinstance(func.value, ast.Name) and f"{func.value.id}.{func.attr}" in RAW:
        return f"{func.value.id}.{func.attr}"
    return f".{func.attr}" if f".{func.attr}" in RAW else None


def raw_opens(path: Path) -> list[tuple[int, str]]:
    tree = parse_source(path.read_text(encoding="utf-8"), filename=str(path))
    return [(n.lineno, name) for n in ast.walk(tree) if isinstance(n, ast.Call) and (name := _called(n))]


def unlisted() -> list[str]:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if any(rel.startswith(folder) for folder in OWN_POLICY):
            continue
        allowed = ALLOWED.get(rel, (set(), ""))[0]
        found += [f"{rel}:{line}: {name}" for line, name in raw_opens(path) if name not in allowed]
    return found


def test_every_file_of_amas_folders_is_opened_through_ownfiles() -> None:
    found = unlisted()
    assert not found, "raw file opens outside ama_acp/ownfiles.py (use it, or list the module with why):\n" + (
        "\n".join(found)
    )


def test_the_allowlist_names_only_what_is_there() -> None:
    """A listed call that is gone is a stale reason: the list shrinks as modules move to the opener."""
    stale = []
    for rel, (names, _why) in ALLOWED.items():
        used = {name for _line, name in raw_opens(ROOT / rel)}
        stale += [f"{rel}: {name}" for name in sorted(names - used)]
    assert not stale, stale


def test_a_planted_raw_open_is_found(tmp_path, monkeypatch):
    fake = tmp_path / "ama_acp" / "session"
    fake.mkdir(parents=True)
    (fake / "new_surface.py").write_text(
        "from pathlib import Path\n\ndef f(p: Path) -> str:\n    return p.read_text()\n"
    )
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "PACKAGE", tmp_path / "ama_acp")
    assert unlisted() == ["ama_acp/session/new_surface.py:4: .read_text"]


# --- the opener's guarantees, through real links, FIFOs and devices -------------------------------------------


def test_a_link_anywhere_below_the_root_is_refused(tmp_path):
    root, outside = tmp_path / "data", tmp_path / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    (outside / "f").write_text("theirs")
    (root / "linked").symlink_to(outside)
    (root / "real" / "f").symlink_to(outside / "f")
    for path in (root / "linked" / "f", root / "real" / "f"):
        with pytest.raises(ownfiles.LinkRefused, match="symbolic link"):
            ownfiles.read_file(path, root, 100)
    with pytest.raises(ownfiles.LinkRefused):
        ownfiles.write_file(root / "linked" / "new", root, b"x")
    with pytest.raises(ownfiles.LinkRefused):
        ownfiles.append(root / "real" / "f", root, b"x")
    assert sorted(p.name for p in outside.iterdir()) == ["f"] and (outside / "f").read_text() == "theirs"
    # A whole-file write replaces a link in the file's own place: the link goes, its target stays.
    ownfiles.write_file(root / "real" / "f", root, b"ours")
    assert not (root / "real" / "f").is_symlink() and (outside / "f").read_text() == "theirs"


def test_the_root_itself_may_be_a_link(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "data").symlink_to(tmp_path / "elsewhere")
    ownfiles.write_file(tmp_path / "data" / "a" / "f", tmp_path / "data", b"kept")
    assert ownfiles.read_file(tmp_path / "data" / "a" / "f", tmp_path / "data", 10) == b"kept"


_FIFO_CHECKS = """
import os, sys
from pathlib import Path
from ama_acp import ownfiles
d = Path(sys.argv[1])
os.mkfifo(d / "fifo")
(d / "zero").symlink_to("/dev/zero")
for call in (
    lambda: ownfiles.read_file(d / "fifo", d, 100),
    lambda: ownfiles.append(d / "fifo", d, b"line"),
    lambda: ownfiles.open_file(d / "fifo", d, os.O_WRONLY),
    lambda: ownfiles.read_named(d / "fifo", 100),
    lambda: ownfiles.read_named(d / "zero", 100),
):
    try:
        call()
    except ownfiles.NotRegular as exc:
        print(exc.kind)
ownfiles.write_file(d / "fifo", d, b"replaced")  # the name replaced, the FIFO never opened
print((d / "fifo").read_bytes().decode())
"""


def test_fifos_and_devices_are_refused_without_blocking(tmp_path):
    # In a child with a deadline: a regression that blocks on the FIFO fails here instead of hanging the run.
    done = subprocess.run([sys.executable, "-c", _FIFO_CHECKS, str(tmp_path)], capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines() == ["a FIFO (named pipe)"] * 4 + ["a character device", "replaced"]


def test_reads_are_bounded(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 101)
    assert ownfiles.read_file(tmp_path / "big", tmp_path, 101) == b"x" * 101
    with pytest.raises(ownfiles.TooLarge, match="larger than 100 bytes"):
        ownfiles.read_file(tmp_path / "big", tmp_path, 100)


def test_a_path_outside_the_root_is_refused(tmp_path):
    with pytest.raises(ownfiles.OwnFileRefused, match="outside"):
        ownfiles.read_file(tmp_path / "x", tmp_path / "data", 10)
    with pytest.raises(ownfiles.OwnFileRefused):
        ownfiles.read_file(tmp_path / "data" / ".." / "x", tmp_path / "data", 10)


# --- any tree a hostile hand plants, any operation -------------------------------------------------------------

KINDS = ("file", "dir", "fifo", "link-out", "link-in", "link-dir-out", "link-zero", "missing")
NAMES = ("a", "b", "c")


def _plant(root: Path, outside: Path, layout: list[tuple[tuple[str, ...], str]]) -> list[Path]:
    """The layout planted below `root` (each entry: a path of names, what to put there); the FIFOs made."""
    fifos: list[Path] = []
    for parts, kind in layout:
        path = root.joinpath(*parts)
        if os.path.lexists(path) or not path.parent.is_dir() or path.parent.is_symlink():
            continue
        if kind == "file":
            path.write_bytes(b"ama's")
        elif kind == "dir":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
            fifos.append(path)
        elif kind == "link-out":
            path.symlink_to(outside / "f")
        elif kind == "link-in":
            path.symlink_to(root / "a")
        elif kind == "link-dir-out":
            path.symlink_to(outside)
        elif kind == "link-zero":
            path.symlink_to("/dev/zero")
    return fifos


def _unblock_after(fifos: list[Path], seconds: float, blocked: threading.Event) -> threading.Timer:
    """A regression that blocks on a FIFO fails the property instead of hanging the run: after `seconds`, each
    FIFO is opened read-write (which never blocks) and closed again, which frees a blocked open or read."""

    def free() -> None:
        blocked.set()
        for fifo in fifos:
            try:
                os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
            except OSError:
                pass

    timer = threading.Timer(seconds, free)
    timer.start()
    return timer


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    layout=st.lists(
        st.tuples(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map(tuple), st.sampled_from(KINDS)),
        max_size=8,
    ),
    target=st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map(tuple),
    operation=st.sampled_from(("read", "write", "append", "open-write")),
)
def test_whatever_is_planted_nothing_outside_changes_and_nothing_blocks(tmp_path_factory, layout, target, operation):
    base = tmp_path_factory.mktemp("tree")
    root, outside = base / "data", base / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "f").write_bytes(b"theirs")
    fifos = _plant(root, outside, layout)
    path = root.joinpath(*target)
    blocked = threading.Event()
    timer = _unblock_after(fifos, 5.0, blocked)
    try:
        if operation == "read":
            data = ownfiles.read_file(path, root, 1000)
            assert data == b"ama's"  # only a regular file ama could have made is ever read
        elif operation == "write":
            ownfiles.write_file(path, root, b"new")
        elif operation == "append":
            ownfiles.append(path, root, b"line\n")
        else:
            os.close(ownfiles.open_file(path, root, os.O_WRONLY | os.O_CREAT, create_dirs=True))
    except OSError:
        pass  # a refusal (OwnFileRefused), a missing file, a folder where a file belongs: all fine
    finally:
        timer.cancel()
    assert not blocked.is_set(), f"{operation} of {target} blocked on a FIFO"
    assert sorted(p.name for p in outside.iterdir()) == ["f"] and (outside / "f").read_bytes() == b"theirs"


def test_replace_in_gives_the_new_file_the_mode_asked_whatever_the_umask_and_never_a_wider_one(tmp_path: Path) -> None:
    """ownfiles.replace_in, shared by ama's own files (0600) and /rewind (a workspace file's own mode)."""
    old = os.umask(0o022)
    try:
        fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            ownfiles.replace_in(fd, "private", b"secret", 0o600)
            ownfiles.replace_in(fd, "script", b"#!/bin/sh\n", 0o755)
            ownfiles.replace_in(fd, "plain", b"text", None)  # what creating a file gives: 0666 less the umask
            (tmp_path / "target").write_text("kept")
            (tmp_path / "link").symlink_to(tmp_path / "target")
            ownfiles.replace_in(fd, "link", b"instead", 0o644)
        finally:
            os.close(fd)
    finally:
        os.umask(old)
    modes = {p.name: p.lstat().st_mode & 0o7777 for p in tmp_path.iterdir()}
    assert modes == {"private": 0o600, "script": 0o755, "plain": 0o644, "target": 0o644, "link": 0o644}
    assert (tmp_path / "target").read_text() == "kept" and not (tmp_path / "link").is_symlink()
    assert (tmp_path / "private").read_bytes() == b"secret"


def test_rewind_puts_a_file_back_with_the_mode_it_has_now(tmp_path: Path) -> None:
    from ama_acp.session.history.rewind import _write_back
    from ama_acp.tools.paths import PathPolicy

    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\necho new\n")
    script.chmod(0o750)
    assert _write_back(str(script), b"#!/bin/sh\necho old\n", PathPolicy([str(tmp_path)])) is None
    assert script.read_text() == "#!/bin/sh\necho old\n" and script.stat().st_mode & 0o7777 == 0o750
    assert [p.name for p in tmp_path.iterdir()] == ["run.sh"]  # no file of the write left beside it
