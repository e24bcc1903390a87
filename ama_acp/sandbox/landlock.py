"""Landlock through ctypes: what the kernel offers, and the launcher that confines a command before it starts.

Run as a script (`python -I -S landlock.py`, with SPEC in the environment as `AMA_SANDBOX`) it is the launcher: it
restricts itself with the rules SPEC names and execs the command SPEC holds, which inherits them with everything
it starts. The command rides in the environment, not in the launcher's arguments, so that no process but the
command itself shows its command line (a watcher such as ama's own sweep or `pgrep -f` sees one process). A
command another program starts and shows (an editor's terminal) rides instead after the launcher's arguments,
where a person reads it (`python -I -S landlock.py /bin/sh -c 'make'`), and SPEC ends before it. A launcher
process rather than a `preexec_fn`, which is unsafe in a threaded parent. Started ahead of need (`serve`,
sandbox/warm.py) it reads SPEC, the command's folder and its environment from a socket instead, when a command
comes. So that it starts fast (-S: no site,
-I: nothing from the environment) it imports nothing but the standard library and nothing of ama.

SPEC is a list of strings, each written as its length, ":" and itself (`encode_spec`): "1" when TCP is allowed
else "0", the number of folders writable beneath, those folders, the number of device files writable, those
files, then the command (absolute path first). Not JSON: importing `json` (and `re`) would double the launcher's
start-up time, paid by every command.
"""

from __future__ import annotations

import _ctypes  # not `ctypes`: its set-up is a third of the launcher's start-up, paid by every command
import _signal  # not `signal`: that one imports `enum`
import errno
import posix  # not `os`, which -S leaves unimported: 1.4 ms of every command's start
import sys

TYPE_CHECKING = False  # mypy takes it as true; `typing` would cost the launcher 3 ms to import
if TYPE_CHECKING:
    from typing import AnyStr, NoReturn

# Syscall numbers: the same on x86_64 and aarch64 (the generic table); other machines get no sandbox.
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_MACHINES = ("x86_64", "aarch64", "arm64")
_PR_SET_NO_NEW_PRIVS = 38
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

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
# Scopes (ABI 6): a sandboxed process may not connect to an abstract Unix socket made outside its sandbox —
# among them the hand-over socket of each ama process (session/store/handover.py). Signals are not scoped: a
# command may stop a server an earlier command started (each command is a sandbox of its own).
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_ABI = 6
SPEC_VAR = "AMA_SANDBOX"
_FS_ENCODING = sys.getfilesystemencoding()


# C `long`: every argument is passed as one (syscall() is variadic and reads longs); pointers go as bytes.
if TYPE_CHECKING:
    _LongBase = _ctypes._SimpleCData[int]
else:
    _LongBase = _ctypes._SimpleCData  # not subscriptable at run time


class _Long(_LongBase):
    _type_ = "l"


class _Function(_ctypes.CFuncPtr):
    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
    _restype_ = _Long


_functions: dict[str, _Function] = {}


def _libc_call(name: str, *args: int | bytes) -> int:
    """libc's `name` called with `args` (ints as C longs, bytes as pointers to them); OSError with the
    kernel's errno when it fails."""
    result = int(_function(name)(*(_Long(a) if isinstance(a, int) else a for a in args)))
    if result < 0:
        err = _ctypes.get_errno()
        raise OSError(err, posix.strerror(err))
    return result


def _function(name: str) -> _Function:
    if name not in _functions:
        # "": the program itself, libc with it (glibc; elsewhere dlopen fails: OSError, no sandbox).
        _functions[name] = _Function(_ctypes.dlsym(_ctypes.dlopen("", posix.RTLD_NOW), name))
    return _functions[name]


def _u64(value: int) -> bytes:
    return value.to_bytes(8, sys.byteorder)


def abi_version() -> tuple[int, str]:
    """The Landlock ABI the kernel offers (0 when none) and, when none, why."""
    if not sys.platform.startswith("linux"):
        return 0, f"Landlock is Linux-only (this is {sys.platform})"
    machine = posix.uname().machine
    if machine not in _MACHINES:
        return 0, f"ama knows Landlock's syscall numbers only on x86_64 and aarch64 (this is {machine})"
    try:
        return _libc_call("syscall", _CREATE_RULESET, 0, 0, _CREATE_RULESET_VERSION), ""
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
    # struct landlock_ruleset_attr: handled_access_fs, then (ABI 4) handled_access_net, then (ABI 6) scoped.
    attr = _u64(handled) + (_u64(net_rights) if abi >= NET_ABI else b"")
    if abi >= SCOPE_ABI:
        attr += _u64(_SCOPE_ABSTRACT_UNIX_SOCKET)
    ruleset = _libc_call("syscall", _CREATE_RULESET, attr, len(attr), 0)
    try:
        for path, rights in [*((d, handled) for d in dirs), *((f, handled & (_WRITE_FILE | _TRUNCATE)) for f in files)]:
            _allow(ruleset, path, rights)
        _libc_call("prctl", _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # required before restrict_self unprivileged
        _libc_call("syscall", _RESTRICT_SELF, ruleset, 0)
    finally:
        posix.close(ruleset)


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = posix.open(path, posix.O_PATH | posix.O_CLOEXEC)
    except FileNotFoundError:
        return  # a folder that is not there holds nothing to write into
    try:
        # struct landlock_path_beneath_attr, packed: allowed_access (u64), parent_fd (s32).
        rule = _u64(rights) + fd.to_bytes(4, sys.byteorder, signed=True)
        _libc_call("syscall", _ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0)
    finally:
        posix.close(fd)


def encode_spec(net: bool, dirs: list[str], files: list[str], argv: list[str]) -> str:
    items = ["1" if net else "0", str(len(dirs)), *dirs, str(len(files)), *files, *argv]
    return "".join(f"{len(item)}:{item}" for item in items)


def decode_spec(text: str) -> tuple[bool, list[str], list[str], list[str]]:
    """What `encode_spec` wrote; ValueError when it is not that."""
    items = _netstrings(text, ":")
    ndirs = int(items[1])
    nfiles = int(items[2 + ndirs])
    argv = items[3 + ndirs + nfiles :]
    if items[0] not in ("0", "1") or not argv:
        raise ValueError("a malformed sandbox spec")
    return items[0] == "1", items[2 : 2 + ndirs], items[3 + ndirs : 3 + ndirs + nfiles], argv


def encode_request(spec: str, cwd: bytes, env: dict[bytes, bytes]) -> bytes:
    """What a warm launcher (`serve`) reads: the spec, the directory to run in and the command's whole
    environment, framed as one item so that a request cut short (ama killed while writing it) is no request."""
    items = [spec.encode(_FS_ENCODING, "surrogateescape"), cwd, *(k + b"=" + v for k, v in env.items())]
    body = b"".join(b"%d:%s" % (len(item), item) for item in items)
    return b"%d:%s" % (len(body), body)


def decode_request(data: bytes) -> tuple[str, bytes, dict[bytes, bytes]]:
    """What `encode_request` wrote; ValueError (or IndexError) when it is not exactly that."""
    framed = _netstrings(data, b":")
    if len(framed) != 1:
        raise ValueError("a malformed sandbox request")
    items = _netstrings(framed[0], b":")
    env: dict[bytes, bytes] = {}
    for item in items[2:]:
        key, eq, value = item.partition(b"=")
        if not key or not eq:
            raise ValueError("a malformed sandbox request")
        env[key] = value
    return items[0].decode(_FS_ENCODING, "surrogateescape"), items[1], env


def _netstrings(data: AnyStr, colon: AnyStr) -> list[AnyStr]:
    """`data` cut into the items it holds, each written as its length, ":" and itself."""
    items: list[AnyStr] = []
    at = 0
    while at < len(data):
        sep = data.index(colon, at)
        size = data[at:sep]
        end = sep + 1 + int(size) if size.isdigit() else -1
        if end < 0 or end > len(data):
            raise ValueError("a malformed sandbox spec")
        items.append(data[sep + 1 : end])
        at = end
    return items


def main() -> int:
    try:
        env = dict(posix.environ)  # bytes: nothing decoded but the spec, and the command gets it back as it was
        spec = env.pop(SPEC_VAR.encode(), b"").decode(_FS_ENCODING, "surrogateescape")
        # A command after the launcher's own arguments is the end of SPEC (`Sandbox.launcher`).
        _confine_and_exec(spec + "".join(f"{len(a)}:{a}" for a in sys.argv[1:]), None, env)
    except (OSError, ValueError, IndexError) as exc:
        return _refuse(exc)


def serve(fd: int) -> int:
    """The warm launcher (sandbox/warm.py): started ahead of need, it says it is ready with one byte on `fd`
    (a socket to ama), reads one request (`encode_request`) from it until ama closes its side, and runs that
    command confined. A socket closed without a request (ama gone, the sandbox closed) runs nothing: exit 0. One
    request a launcher: it becomes the command or exits."""
    chunks = []
    try:
        abi_version()  # the libc functions found now, while nobody waits
        _function("prctl")
        try:
            posix.write(fd, b"r")
        except OSError:
            pass  # EPIPE: ama has written its request and closed its side before this start was done
        while chunk := posix.read(fd, 1 << 16):
            chunks.append(chunk)
    except OSError:
        pass  # ECONNRESET after the request: ama closed its side with the "r" unread. Judged below.
    finally:
        posix.close(fd)  # never the command's: it must not hold ama's end open, nor read another request
    if not chunks:
        return 0
    try:
        # A request cut short (ama killed while it wrote) is refused here: it is framed as one item.
        spec, cwd, env = decode_request(b"".join(chunks))
        _confine_and_exec(spec, cwd, env)
    except (OSError, ValueError, IndexError) as exc:
        return _refuse(exc)


def _confine_and_exec(spec: str, cwd: bytes | None, env: dict[bytes, bytes]) -> NoReturn:
    """Restrict this process as `spec` says, go to `cwd` and exec the command; returns only by raising."""
    net, dirs, files, argv = decode_spec(spec)
    abi, why = abi_version()
    if abi < 1:
        raise OSError(errno.ENOSYS, why)
    restrict(abi, dirs, files, net)
    if cwd is not None:
        posix.chdir(cwd)
    # Python ignores these for itself; the command gets them as any program started by a shell does.
    for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):
        _signal.signal(sig, _signal.SIG_DFL)
    posix.execve(argv[0], argv, env)  # replaces this process: nothing after it runs


def _refuse(exc: Exception) -> int:
    # 126 as a shell says "found but cannot run": nothing ran, and nothing runs unconfined.
    sys.stderr.write(f"ama: the sandbox could not be set up, so the command did not run: {exc}\n")
    return 126


if __name__ == "__main__":
    sys.exit(main())
