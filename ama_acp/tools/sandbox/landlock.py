"""Landlock through ctypes: what the kernel offers, and the launcher that confines a command before it starts.

Run as a script (`python -I -S landlock.py`, with SPEC in the environment as `AMA_SANDBOX`) it is the launcher: it
restricts itself with the rules SPEC names and execs the command SPEC holds, which inherits them with everything
it starts. The command rides in the environment, not in the launcher's arguments, so that no process but the
command itself shows its command line (a watcher such as ama's own sweep or `pgrep -f` sees one process). A launcher process rather
than a `preexec_fn`, which is unsafe in a threaded parent. So that it starts fast (-S: no site, -I: nothing
from the environment) it imports nothing but the standard library and nothing of ama.

SPEC is JSON: {"dirs": [paths writable beneath], "files": [device files writable], "net": bool (TCP allowed),
"argv": [the command, absolute path first]}.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import signal
import sys

# Syscall numbers: the same on x86_64 and aarch64 (the generic table); other machines get no sandbox.
_SYSCALLS = {"create_ruleset": 444, "add_rule": 445, "restrict_self": 446}
_MACHINES = ("x86_64", "aarch64", "arm64")
_PR_SET_NO_NEW_PRIVS = 38
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2

# Filesystem rights ama handles: every kind of write. Reading and executing are never handled, so stay
# allowed everywhere. The ABI a right came with is the key.
_WRITE_FILE = 1 << 1
_TRUNCATE = 1 << 14
_FS_RIGHTS = {
    1: _WRITE_FILE | sum(1 << n for n in range(4, 13)),  # remove dir/file, make char/dir/reg/sock/fifo/block/sym
    2: 1 << 13,  # REFER: link or rename into another directory
    3: _TRUNCATE,
}
_NET_BIND_TCP = 1 << 0
_NET_CONNECT_TCP = 1 << 1
NET_ABI = 4  # TCP bind/connect rules came with ABI 4
SPEC_VAR = "AMA_SANDBOX"


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc: ctypes.CDLL | None = None


def _syscall(name: str, *args: object) -> int:
    """The syscall's result; raises OSError with the kernel's errno when it fails."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    result = int(_libc.syscall(ctypes.c_long(_SYSCALLS[name]), *args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def abi_version() -> tuple[int, str]:
    """The Landlock ABI the kernel offers (0 when none) and, when none, why."""
    if not sys.platform.startswith("linux"):
        return 0, f"Landlock is Linux-only (this is {sys.platform})"
    if platform.machine() not in _MACHINES:
        return 0, f"ama knows Landlock's syscall numbers only on x86_64 and aarch64 (this is {platform.machine()})"
    try:
        return _syscall("create_ruleset", None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)), ""
    except OSError as exc:
        if exc.errno == errno.ENOSYS:
            return 0, "the kernel has no Landlock (too old, or built without it)"
        if exc.errno == errno.EOPNOTSUPP:
            return 0, "Landlock is disabled in this kernel (boot parameter `lsm=`)"
        return 0, f"Landlock is not usable here ({exc.strerror})"


def fs_rights(abi: int) -> int:
    return sum(bits for since, bits in _FS_RIGHTS.items() if abi >= since)


def restrict(abi: int, dirs: list[str], files: list[str], net: bool) -> None:
    """Confine this process (and whatever it execs) to writing beneath `dirs` and into `files`; with `net`
    False and an ABI that can, no TCP bind or connect. Raises OSError when it cannot: never half-applied,
    since nothing runs after a failure."""
    handled = fs_rights(abi)
    net_rights = 0 if net or abi < NET_ABI else _NET_BIND_TCP | _NET_CONNECT_TCP
    attr = _RulesetAttr(handled, net_rights)
    # An older kernel rejects a struct larger than it knows unless the extra bytes are zero (they are).
    size = ctypes.sizeof(attr) if abi >= NET_ABI else 8
    ruleset = _syscall("create_ruleset", ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        for path, rights in [*((d, handled) for d in dirs), *((f, handled & (_WRITE_FILE | _TRUNCATE)) for f in files)]:
            _allow(ruleset, path, rights)
        _prctl_no_new_privs()
        _syscall("restrict_self", ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # a folder that is not there holds nothing to write into
    try:
        rule = _PathBeneathAttr(rights, fd)
        _syscall("add_rule", ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), 0)
    finally:
        os.close(fd)


def _prctl_no_new_privs() -> None:
    assert _libc is not None
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def main() -> int:
    try:
        spec = json.loads(os.environ.pop(SPEC_VAR, ""))
        argv = [str(a) for a in spec["argv"]]
        abi, why = abi_version()
        if abi < 1:
            raise OSError(errno.ENOSYS, why)
        restrict(abi, list(spec["dirs"]), list(spec["files"]), bool(spec["net"]))
        # Python ignores these for itself; the command gets them as any program started by a shell does.
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        os.execv(argv[0], argv)  # replaces this process: nothing after it runs
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        # 126 as a shell says "found but cannot run": nothing ran, and nothing runs unconfined.
        sys.stderr.write(f"ama: the sandbox could not be set up, so the command did not run: {exc}\n")
        return 126


if __name__ == "__main__":
    sys.exit(main())
