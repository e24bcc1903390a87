"""One project-instruction file (AGENTS.md, CLAUDE.md) found and read safely, and the words the model reads.

A file in the workspace is the project's, but what it points at may not be: a link that leads outside the
workspace is refused (and logged), whatever the target, so a checked-out repository cannot pour the person's
other files into the model's context. The person's global file (in ama's config folder) is their own, and may
be a link. Only regular files are read: a FIFO, a device or a directory named AGENTS.md is refused without
blocking (`tools/regular.py`: stat first, then an `O_NONBLOCK` open checked again with `fstat`). Bytes that are
not UTF-8 are decoded with replacement characters. Each file is capped in characters, with a visible marker
where it was cut; nothing here rounds, clocks or orders by anything but the names given, so the same files
always give the same system prompt (U10: the prefix estimate equals what the first request carries).
"""

from __future__ import annotations

import logging
import os
import re
from typing import Literal

import msgspec

from ama_acp.tools.paths import inside
from ama_acp.tools.regular import open_regular

log = logging.getLogger(__name__)

PER_FILE_CHARS = 40_000  # one file, as a person expects of Claude Code (it warns above 40k characters)
PROMPT_CHARS = 60_000  # the workspace's and the person's global file together, in the system prompt
NESTED_CHARS = 100_000  # the nested files announced in one session (until a compaction starts the count again)

Scope = Literal["global", "workspace", "nested"]
# What decides whether a file changed: its real path, size, modification time and inode.
Signature = tuple[str, int, int, int]


class InstructionFile(msgspec.Struct, frozen=True):
    """One instruction file as ama loaded it."""

    scope: Scope
    path: str  # absolute, as found (not resolved)
    shown: str  # how the model and the person see it: relative to the workspace, or the global file's path
    text: str  # the content, cut at the cap (with the marker)
    size: int  # bytes on disk
    cut: bool
    digest: str  # the first 12 hex digits of the SHA-256 of the text shown
    signature: Signature


def signature_of(path: str) -> Signature | None:
    """What `find` compares to tell a changed file; None when nothing is there."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino)


def find(
    directory: str, names: list[str], scope: Scope, shown_dir: str, root_real: str | None, cap: int
) -> InstructionFile | None:
    """The first of `names` in `directory` that can be read (a refused one is logged and the next name tried).
    `root_real`: the workspace's real path, which the file must resolve inside (None: the person's own folder).
    `shown_dir`: the directory as the model sees it ('' for the workspace itself)."""
    for name in names:
        path = os.path.join(directory, name)
        shown = f"{shown_dir}/{name}" if shown_dir else name
        loaded = _read(path, shown, scope, root_real, cap)
        if loaded is not None:
            return loaded
    return None


def _read(path: str, shown: str, scope: Scope, root_real: str | None, cap: int) -> InstructionFile | None:
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None  # the usual case: no file by that name here
    except (OSError, ValueError) as exc:
        log.warning("project instructions: cannot read %s: %s", shown, exc)
        return None
    real = os.path.realpath(path)
    if root_real is not None and not inside(real, root_real):
        log.warning("project instructions: %s refused: it links outside the workspace (to %s)", shown, real)
        return None
    try:
        fd = open_regular(real)  # refuses FIFOs, devices, sockets, /proc, without blocking
    except IsADirectoryError:
        log.warning("project instructions: %s refused: it is a directory", shown)
        return None
    except OSError as exc:
        log.warning("project instructions: %s refused: %s", shown, exc)
        return None
    with open(fd, "rb", closefd=True) as f:
        st = os.fstat(f.fileno())
        data = f.read(cap * 4 + 4)  # enough bytes for cap + 1 characters, whatever their encoding
    text, cut = clip(data.decode("utf-8", errors="replace"), cap, st.st_size)
    digest = _digest(text)
    return InstructionFile(
        scope, path, shown, text, st.st_size, cut, digest, (real, st.st_size, st.st_mtime_ns, st.st_ino)
    )


def clip(text: str, cap: int, size: int) -> tuple[str, bool]:
    """`text` at most `cap` characters (cut at a line end when one is in the last tenth), with a marker that
    says so; (text, whether it was cut)."""
    if len(text) <= cap:
        return text, False
    head = text[:cap]
    end = head.rfind("\n")
    if end >= cap - cap // 10:
        head = head[: end + 1]
    marker = (
        f"\n[ama cut this file here: it holds {size:,} bytes, and at most {cap:,} characters of it are loaded. "
        "Read the rest with read_file if you need it.]"
    )
    return head.rstrip("\n") + "\n" + marker, True


# --- what the model reads -------------------------------------------------------------------------------------

_SCOPE_WORDS = {
    "global": "the user's own instructions, for every project",
    "workspace": "this project's instructions, at the working directory",
}

PROMPT_HEADER = """# Project instructions
ama loaded these instruction files. Follow them. The project's instructions are more specific than the user's \
global ones and win where they conflict; what the user says in the conversation wins over both. Instruction \
files in folders under the working directory reach you as notes from ama when you first work there."""


def prompt_section(f: InstructionFile) -> str:
    """One file's part of the system prompt: a header saying where it came from, then its text."""
    return f"## {f.shown} ({_SCOPE_WORDS.get(f.scope, f.scope)})\n\n{f.text.strip()}\n"


def prompt_block(files: list[InstructionFile]) -> str:
    """The system prompt's instructions (empty without files): the header, then each file's section."""
    if not files:
        return ""
    return "\n" + PROMPT_HEADER + "\n\n" + "\n".join(prompt_section(f) for f in files)


REMINDER_HEADER = "[A note from ama about this session, not written by the user]"
_TAG = re.compile(r'^<project-instructions path=("(?:[^"\\\n]|\\.)*") sha="([0-9a-f]{12})"', re.MULTILINE)


def _digest(text: str) -> str:
    import hashlib  # ~2.5 ms (OpenSSL's): paid by a workspace with instruction files, not by every session's open

    return hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:12]


def _tagged(shown: str, digest: str, body: str) -> str:
    """A note's `<project-instructions>` element, as `_TAG` above reads it back: the path quoted as json.dumps
    quotes it (ASCII only: what the tags have always carried), the digest, then `body`."""
    import json  # as `_digest`: only a workspace with instruction files writes a note

    return f'<project-instructions path={json.dumps(shown)} sha="{digest}">\n{body}\n</project-instructions>'


def nested_section(f: InstructionFile, changed: bool) -> str:
    """A nested file as the note announces it; the tag lets a loaded session tell which files it announced."""
    folder = f.shown.rpartition("/")[0] or "."
    why = "changed on disk; it now reads" if changed else "applies to the files under"
    lead = (
        f"The instruction file {f.shown} {why}"
        + ("" if changed else f" `{folder}/`; follow it there (it is more specific than the project's instructions)")
        + ":"
    )
    return _tagged(f.shown, f.digest, f"{lead}\n\n{f.text.strip()}")


# A prompt file gone from disk: the digest its removal note carries (no text's digest is all zeros in practice).
REMOVED = "0" * 12


def changed_section(f: InstructionFile) -> str:
    """A file of the system prompt changed on disk since the model was told of it: its text of now, which replaces
    the system prompt's copy (the system prompt itself is never rewritten: the provider's cached prefix)."""
    where = _SCOPE_WORDS.get(f.scope, f.scope)
    lead = (
        f"The instruction file {f.shown} ({where}) changed on disk. It now reads as below; this replaces what the "
        "system prompt (or an earlier note) says of this file:"
    )
    return _tagged(f.shown, f.digest, f"{lead}\n\n{f.text.strip()}")


def removed_section(shown: str) -> str:
    """A file of the system prompt no longer on disk."""
    lead = f"The instruction file {shown} was removed: what the system prompt (or an earlier note) says of it no longer applies."
    return _tagged(shown, REMOVED, lead)


def system_reminder(text: str) -> str:
    """The seed's wrapping of a change the system prompt does not show (`<system-reminder>`)."""
    return f"<system-reminder>\n{text}\n</system-reminder>"


def kept_file(scope: str, shown: str, text: str, size: int, cut: bool) -> InstructionFile | None:
    """A file of the system prompt as a session file stored it (hostile: a scope ama does not put there is
    refused); its digest is the one `find` gives the same text."""
    kind: Scope
    if len(text) > PER_FILE_CHARS * 2:  # more than ama ever stores: not its copy
        return None
    if scope == "global":
        kind = "global"
    elif scope == "workspace":
        kind = "workspace"
    else:
        return None
    digest = _digest(text)
    return InstructionFile(kind, shown, shown, text, max(size, 0), cut, digest, ("", 0, 0, 0))


def skipped_section(shown: str, size: int) -> str:
    """A nested file past the session's room: named, not loaded."""
    return (
        f"The instruction file {shown} ({size:,} bytes) was not loaded: this session's room for instruction files "
        f"({NESTED_CHARS:,} characters) is spent. Read it with read_file if it matters for your work there."
    )


def announced_in(text: str) -> list[tuple[str, str]]:
    """(shown path, digest) of each nested file a note of ama's announced (`nested_section`'s tag)."""
    out: list[tuple[str, str]] = []
    for m in _TAG.finditer(text):
        try:
            import json  # a note's tag read back: only a session that has instruction files

            path = json.loads(m.group(1))
        except ValueError:
            continue
        if isinstance(path, str):
            out.append((path, m.group(2)))
    return out
