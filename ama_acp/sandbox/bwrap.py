"""bubblewrap, the sandbox where the kernel has no Landlock (or has it disabled) but `bwrap` is installed and can
start here (docs/tools.md "The sandbox").

`bwrap` builds the command a file system of its own: everything read-only (`--ro-bind / /`), then the folders the
mode allows bound writable over it, a minimal `/dev` and a `/proc`; no network but a loopback of its own
(`--unshare-net`) unless `network = true`; `--die-with-parent`, so that killing it (the process group ama kills)
takes the command with it, and `--new-session` (no terminal to push keystrokes into). It needs unprivileged user
namespaces, which many containers refuse: whether it can start is learnt once per process by a trial run, and
where it cannot, commands run unconfined and ama says why, in bwrap's own words.

The program is found only in absolute PATH entries outside the session's folders (as tools/programs.py finds git;
the sandbox sits below the tools, so that rule is restated here): a `bwrap` the repository ships would otherwise
be the one thing standing between the model's commands and the person's files, and would be run by the trial.
"""

from __future__ import annotations

import functools
import os
import stat
import subprocess
from collections.abc import Sequence

PROGRAM = "bwrap"
# The trial's command: present wherever bwrap could be (the shell run_command uses falls back to it).
_TRIAL = ("/bin/sh", "-c", "exit 0")
_TRIAL_TIMEOUT = 10.0


def find(path: str, roots: Sequence[str]) -> str | None:
    """The absolute path of `bwrap` in `path` (a PATH value), skipping relative and empty entries and any
    inside `roots` (as written or with links resolved), and a candidate whose real path lies in one; None when
    there is none."""
    return _find(
        path, tuple(sorted({os.path.realpath(r) for r in roots if r} | {os.path.abspath(r) for r in roots if r}))
    )


@functools.cache
def _find(path: str, roots: tuple[str, ...]) -> str | None:
    for entry in path.split(os.pathsep):
        if not os.path.isabs(entry) or _inside(entry, roots):
            continue
        candidate = os.path.join(entry, PROGRAM)
        try:
            st = os.stat(candidate)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode) and os.access(candidate, os.X_OK) and not _inside(candidate, roots):
            return candidate
    return None


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    forms = {os.path.normpath(path), os.path.realpath(path)}
    return any(form == root or form.startswith(root.rstrip(os.sep) + os.sep) for form in forms for root in roots)


@functools.cache
def trial(program: str) -> str:
    """ "" when `program` can confine a command here (a trial run with the options commands get), else why not."""
    argv = command_line(program, [], network=False, argv=list(_TRIAL))
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=_TRIAL_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap ({program}) could not be run: {exc}"
    if done.returncode == 0:
        return ""
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()
    why = said[-1] if said else f"exit code {done.returncode}"
    return f"bubblewrap ({program}) cannot start here ({why})"


def command_line(program: str, writable: Sequence[str], *, network: bool, argv: list[str]) -> list[str]:
    """`argv` run by bubblewrap, writing only beneath `writable` (each bound at its real path; one that is not
    there is skipped), with no network unless `network`."""
    line = [program, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--die-with-parent", "--new-session"]
    if not network:
        line.append("--unshare-net")
    for folder in dict.fromkeys(os.path.realpath(f) for f in writable):
        line += ["--bind-try", folder, folder]
    return [*line, "--", *argv]
