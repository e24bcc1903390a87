"""Whether a process is alive, asked of the kernel by its pid: for the files and sockets other ama processes leave
in ama's own folders (a sandbox's temp folder, a session's hand-over socket), which go once their process is gone."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True for a live process, also another user's (EPERM); False once the pid is gone. A pid can come back as
    another program: callers remove only what a dead pid left."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's
        return True
    return True
