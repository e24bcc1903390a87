"""A sandboxed command's private temp folder, `ama-run-<pid>-…`: the one place outside the workspace it may write.

Made by the process that starts the command (ama, or `ama acp-client` and `ama conformance` for an agent's
terminal) and removed by it once the command is over or its terminal released. A process killed meanwhile cannot
remove its own: the first folder a process makes also sweeps the ones processes that are gone left behind.
"""

from __future__ import annotations

import os
import stat

from ama_acp.pids import pid_alive

_RUN_PREFIX = "ama-run-"
_swept = False


def private_temp() -> str:
    """A new private temp folder, `ama-run-<this process's pid>-…`; the first one a process makes also sweeps the
    folders that processes which are gone left behind: only directories of ours by that name, whose pid is no
    longer alive; never a link or another's."""
    import tempfile  # with `random`, ~2.3 ms: a command's first run pays it, not a session's open

    global _swept
    if not _swept:
        _swept = True
        sweep_dead_runs(tempfile.gettempdir())
    return tempfile.mkdtemp(prefix=f"{_RUN_PREFIX}{os.getpid()}-")


def remove_temp(path: str | None) -> None:
    """Remove a private temp folder and what the command left in it (None: there is none)."""
    if path is not None:
        import shutil  # with bz2 and lzma: a command's end, not a session's open

        shutil.rmtree(path, ignore_errors=True)


def sweep_dead_runs(folder: str) -> None:
    try:
        names = [n for n in os.listdir(folder) if n.startswith(_RUN_PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(_RUN_PREFIX) :].partition("-")[0]
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not pid.isdigit() or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or pid_alive(int(pid)):
            continue
        remove_temp(path)
