"""Where commands come from, read as the workspace's own files are (docs/commands.md "Where ama reads them").

The project's folders (`.ama/commands/`, `.claude/commands/`, `.gemini/commands/`) are the repository's: a link
that leads out of the workspace is refused, whatever its target, like AGENTS.md (agent/instruction_files.py).
The person's folder (`~/.config/ama/commands/`) is their own and may be a link (a dotfiles checkout). Only
regular files are read, FIFOs and devices refused without blocking (tools/regular.py); a folder holds at most
`PER_FOLDER` command files and `DEPTH` levels of subfolders, a file at most `FILE_BYTES`. Each refusal and each
file that is not a command is a `Problem` naming the file and line, and the file is skipped.

`signature` is what `load` read, in stats only (no file is opened): the session compares it at each prompt and
loads again only when it changed.
"""

from __future__ import annotations

import os
import stat

import msgspec

from ama_acp.shaping.commands import (
    CommandFileError,
    FileCommand,
    Format,
    Source,
    command_name,
    parse,
)
from ama_acp.textsafe import one_line
from ama_acp.tools.paths import inside
from ama_acp.tools.regular import NotRegularFileError, describe_mode, open_regular, refusal, special_root

PER_FOLDER = 200
DEPTH = 3  # `a/b/c/name.md`: deeper folders are not read
FILE_BYTES = 2 * 64 * 1024 + 1024  # a front matter (64 KiB at most) and a prompt (cut at 64 KiB characters)
_EXTENSION = {"ama": ".md", "claude": ".md", "gemini": ".toml"}
# What each file parsed to, by its path, stat and folder: a session opened in the same project (and a refresh after
# one file changed) parses only the files whose stat changed. Bounded; cleared when full.
_PARSED: dict[tuple[str, object, Folder], FileCommand | Problem] = {}
_PARSED_MAX = 4096


class Folder(msgspec.Struct, frozen=True):
    """One folder of command files: where it is, how it is shown, whose it is and in which format."""

    path: str
    shown: str
    source: Source
    format: Format
    root_real: str | None  # the workspace's real path a project file must resolve inside; None: the person's


class Problem(msgspec.Struct, frozen=True):
    """A file that is not a command ama offers, and why: reported with its file and line, once."""

    shown: str
    line: int | None
    message: str

    def __str__(self) -> str:
        """One line, its controls made visible: a file's name may hold ESC, or bytes that are not UTF-8."""
        where = f"{self.shown}:{self.line}" if self.line is not None else self.shown
        return one_line(f"{where}: {self.message}")


class Loaded(msgspec.Struct, frozen=True):
    commands: list[FileCommand]
    problems: list[Problem]


def folders(cwd: str, person_dir: str | None) -> list[Folder]:
    """The folders in the order their commands win a name: the project's (ama's, Claude's, Gemini's), then the
    person's."""
    root_real = os.path.realpath(cwd)
    out = [
        Folder(os.path.join(cwd, ".ama", "commands"), ".ama/commands", "project", "ama", root_real),
        Folder(os.path.join(cwd, ".claude", "commands"), ".claude/commands", "project", "claude", root_real),
        Folder(os.path.join(cwd, ".gemini", "commands"), ".gemini/commands", "project", "gemini", root_real),
    ]
    if person_dir:
        path = os.path.join(person_dir, "commands")
        out.append(Folder(path, path, "person", "ama", None))
    return out


# --- what is there, in stats -----------------------------------------------------------------------------------


def signature(places: list[Folder]) -> tuple[object, ...]:
    """Every command file's place and stat (a link's target's too), folder by folder: anything added, removed,
    renamed or written changes it. No file is opened."""
    out: list[object] = []
    for place in places:
        out.append(os.path.realpath(place.path))  # a linked folder pointed elsewhere
        for rel, _mode, entry_stat in _entries(place.path, place.format, ()):
            out.append((place.path, rel, entry_stat))
    return tuple(out)


Entry = tuple[tuple[str, ...], int | None, object]  # (relative parts, lstat mode or None past the bound, stat key)


def _entries(path: str, fmt: Format, below: tuple[str, ...]) -> list[Entry]:
    """The command files under `path`, sorted, bounded as `load` reads them."""
    try:
        with os.scandir(path) as it:
            found = sorted(it, key=lambda e: e.name)
    except (OSError, ValueError):
        return []
    out: list[Entry] = []
    files = 0
    for entry in found:
        if entry.name.startswith("."):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        parts = (*below, entry.name)
        if stat.S_ISDIR(info.st_mode):
            if len(below) < DEPTH:
                out += _entries(entry.path, fmt, parts)
            continue
        if not entry.name.endswith(_EXTENSION[fmt]):
            continue
        files += 1
        if files > PER_FOLDER:
            out.append((parts, None, "over"))  # the first past the bound: reported, and the rest unread
            break
        key = (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino, _target(entry.path, info))
        out.append((parts, info.st_mode, key))
    return out


def _target(path: str, info: os.stat_result) -> object:
    if not stat.S_ISLNK(info.st_mode):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return "dangling"
    return (os.path.realpath(path), st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)


# --- reading ---------------------------------------------------------------------------------------------------


def load(places: list[Folder]) -> Loaded:
    """Every command the folders hold (a name seen twice kept from the first folder: the caller reports the
    hidden one), and the problems met."""
    commands: list[FileCommand] = []
    problems: list[Problem] = []
    for place in places:
        top = _folder_problem(place)
        if top is not None:
            problems.append(top)
            continue
        for parts, mode, key in _entries(place.path, place.format, ()):
            shown = "/".join((place.shown, *parts))
            if mode is None:
                problems.append(Problem(place.shown, None, f"more than {PER_FOLDER} command files: the rest skipped"))
                continue
            name = command_name((*parts[:-1], parts[-1].removesuffix(_EXTENSION[place.format])))
            if name is None:
                problems.append(Problem(shown, None, "not a command name (letters, digits, `_`, `-`, `.`): skipped"))
                continue
            path = os.path.join(place.path, *parts)
            cached = (path, key, place)
            found = _PARSED.get(cached)
            if found is None:
                try:
                    found = parse(
                        _read(path, mode, place.root_real, place.format), name, place.source, shown, place.format
                    )
                except CommandFileError as exc:
                    found = Problem(shown, exc.line, str(exc))
                except OSError as exc:  # not kept: a refusal may pass without the file's stat changing (chmod)
                    problems.append(Problem(shown, None, f"refused: {exc.strerror or exc}"))
                    continue
                if len(_PARSED) >= _PARSED_MAX:
                    _PARSED.clear()
                _PARSED[cached] = found
            if isinstance(found, FileCommand):
                commands.append(found)
            else:
                problems.append(found)
    return Loaded(commands, problems)


def _folder_problem(place: Folder) -> Problem | None:
    """A project folder that is a link out of the workspace (or lies in one), or a folder in a kernel file system
    (a person's link to /proc), is not read at all. Below a folder that passed, only a file that is a link can
    lead elsewhere: subfolder links are never followed."""
    if not os.path.lexists(place.path):
        return None
    real = os.path.realpath(place.path)
    if place.root_real is not None and not inside(real, place.root_real):
        return Problem(place.shown, None, f"refused: it links outside the workspace (to {real})")
    root = special_root(real)
    if root is not None:
        return Problem(place.shown, None, f"refused: it lies in {root}, a kernel file system")
    return None


def _read(path: str, mode: int, root_real: str | None, fmt: Format) -> str:
    """A command file's text, at most FILE_BYTES of it; OSError (with a reason) when it is refused."""
    fd = _open(path, mode, root_real)
    with open(fd, "rb", closefd=True) as f:
        data = f.read(FILE_BYTES + 1)
    if len(data) > FILE_BYTES:
        if fmt == "gemini":  # TOML cut anywhere is not TOML
            raise CommandFileError(f"larger than {FILE_BYTES // 1024} KiB: skipped", 1)
        data = data[:FILE_BYTES]  # the prompt past its cap is cut anyway, with a marker (shaping/commands.py)
    return data.decode("utf-8", errors="replace")


def _open(path: str, mode: int, root_real: str | None) -> int:
    """The file at `path` (`mode`: its lstat's), opened for reading without blocking: a link through
    tools/regular.py once its target is known to be inside the workspace (a project's); a regular file directly,
    not following a link swapped in since, and checked again once open (a path resolved once per file, not per
    component: the folder above it was checked already)."""
    if stat.S_ISLNK(mode):
        real = os.path.realpath(path)
        if root_real is not None and not inside(real, root_real):
            raise OSError(f"it links outside the workspace (to {real})")
        return open_regular(real)  # FIFOs, devices, /proc: refused without blocking
    if not stat.S_ISREG(mode):  # a FIFO or a device is never opened
        raise NotRegularFileError(refusal(path, describe_mode(mode) or "not a regular file", "read"))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        now = os.fstat(fd).st_mode
        if not stat.S_ISREG(now):
            raise NotRegularFileError(refusal(path, describe_mode(now) or "a directory", "read"))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd
