"""Who holds a session file: the writer's exclusive `flock`, and the process that holds it (Linux's
/proc/locks), so a busy session names its holder and a folder in use is never cleaned away.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ama_acp.session.store.errors import SessionBusy, SessionWriteError, in_words
from ama_acp.session.store.files import NotRegularFile, open_regular
from ama_acp.session.store.holders import lock_table


def lock_for_writing(fd: int, path: Path) -> None:
    """The writer's exclusive lock, or the descriptor closed and SessionBusy (held elsewhere) or
    SessionWriteError (the file system cannot lock: ENOLCK on some network file systems)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = lock_holder(os.fstat(fd))
        except OSError:
            holder = None
        finally:
            os.close(fd)
        raise busy_error(path.stem, holder) from None
    except OSError as exc:
        os.close(fd)
        raise SessionWriteError(path, f"it cannot be locked: {in_words(exc)}", exc) from exc


def busy_error(session_id: str, pid: int | None) -> SessionBusy:
    """The SessionBusy for a session whose file `pid` (None: a process the system does not name) holds."""
    if pid is None:
        where = "another ama process (its file is locked)"
    elif pid == os.getpid():
        where = "this process"
    else:
        where = f"another ama process (pid {pid})"
    return SessionBusy(f"session {session_id} is open in {where}", pid)


def lock_holder(info: os.stat_result) -> int | None:
    """The pid holding the flock on the file `info` describes (its writer's), from /proc/locks (Linux, read by
    holders.lock_table); None where the system does not say."""
    return lock_table()[0].get((os.major(info.st_dev), os.minor(info.st_dev), info.st_ino))


def in_use(path: Path) -> bool:
    """Whether an ama process holds the session file open for writing (its writer's flock), or it cannot be told."""
    try:
        # Never blocking: a FIFO named like a session file must not block the retention thread for good.
        fd, _ = open_regular(path)
    except NotRegularFile as exc:  # not a session file ama writes: nobody holds it (a link: it cannot be told)
        return exc.kind == "a symbolic link"
    except OSError:
        return True
    try:
        # Shared and released at once: a writer opening this very moment could see it as busy, so only a
        # folder that would otherwise be removed is checked.
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: held; another error: the file system cannot say, so keep the folder
        return True
    finally:
        os.close(fd)  # releases the shared lock
    return False


def held_by(path: Path) -> int | None:
    """The pid of the process holding the session file's writer lock, when one does and the system names it
    (a loader asks it to hand the session over: handover.py); None otherwise. Nothing is changed: a shared
    lock tried and released at once, as `in_use` does."""
    try:
        fd, info = open_regular(path)
    except OSError:  # gone, not a session file, unreadable: the open that follows says why
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return lock_holder(info)
    except OSError:
        return None
    finally:
        os.close(fd)
    return None
