"""The sandbox of the commands ama runs on someone's behalf (`run_command`, locally or in the editor's terminal; an
external agent's terminals; the terminals ama's client serves an agent under test): what `[sandbox]` asks for,
what this machine offers, and how a command is started confined (docs/tools.md "The sandbox").
`temp.py` makes a command's private temp folder; `terminal.py` readies a command another program starts.

Linux only. The mechanism is chosen at run time: Landlock (`landlock.py`: unprivileged, nothing to install)
where the kernel has it, else bubblewrap (`bwrap.py`) where it is installed and can start. Reading stays
allowed everywhere; writing only in the workspace roots, a private temp folder and the devices a shell needs;
no TCP unless `network = true`. With Landlock a launcher kept ready ahead of need (`warm.py`) saves each command
the launcher's start. Where neither can be had, commands run unconfined and ama says so (a log line once; `ama
doctor`; "not sandboxed" in the permission question).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Sequence

import anyio
import msgspec
from anyio.abc import Process

from ama_acp.config import SandboxConfig
from ama_acp.sandbox import landlock
from ama_acp.sandbox.warm import Standby

log = logging.getLogger(__name__)

WORKSPACE_WRITE = "workspace-write"
READ_ONLY = "read-only"
OFF = "off"
MODES = (WORKSPACE_WRITE, READ_ONLY, OFF)

# Written by ordinary shells and tools whatever they do (`> /dev/null`, a progress bar on the terminal).
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom", "/dev/ptmx")
# Shared memory (Python's multiprocessing, browsers, compilers' locks): a RAM folder, not the person's files.
SHARED = ("/dev/shm", "/dev/pts")

# The launcher imported rather than run as a script: an import uses the compiled file, a script is compiled
# at every start (~2 ms a command). -I -S: nothing from the environment or site-packages, a fast start.
_LAUNCHER = (
    f"import sys; sys.path[:0] = [{os.path.dirname(os.path.abspath(__file__))!r}]; import landlock; "
    "sys.exit(landlock.main())"
)
# The warm launcher (warm.py): the same module, serving one request read from the socket `fd` it inherits.
_SERVE = _LAUNCHER.replace("{", "{{").replace("}", "}}").replace("landlock.main()", "landlock.serve({fd})")
# A test hook, never set otherwise: ama acts as if the kernel had no Landlock, so that the tests can reach the
# bubblewrap path through a real `ama` process on a machine that has both.
HIDE_LANDLOCK_VAR = "AMA_TEST_HIDE_LANDLOCK"
# The launcher run as a script, for a command line a person reads (`Sandbox.launcher`): compiled at each start,
# which a command started through an editor's terminal does not feel.
_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "landlock.py")


class SandboxState(msgspec.Struct, frozen=True):
    """What commands get: the configured mode and network, and what the machine offers: the kernel's Landlock
    ABI (`abi` 0: none), else `bwrap`, the bubblewrap that confines them ("" when none can); `reason` says why
    there is no Landlock (and, when nothing confines, why not bubblewrap either)."""

    mode: str
    network: bool
    abi: int
    reason: str
    bwrap: str = ""

    @property
    def mechanism(self) -> str | None:
        """ "landlock", "bubblewrap", or None when commands run unconfined."""
        if self.mode == OFF:
            return None
        if self.abi >= 1:
            return "landlock"
        return "bubblewrap" if self.bwrap else None

    @property
    def active(self) -> bool:
        return self.mechanism is not None

    @property
    def network_blocked(self) -> bool:
        if self.network or not self.active:
            return False
        return self.mechanism == "bubblewrap" or self.abi >= landlock.NET_ABI

    def summary(self) -> str:
        """One line for `ama doctor` and the log."""
        if self.mode == OFF:
            return 'off ([sandbox] mode = "off"): commands run unconfined'
        if not self.active:
            return f"not available: {self.reason}; commands run unconfined"
        net = "blocked" if self.network_blocked else "allowed"
        if not self.network and not self.network_blocked:
            net = f"allowed (TCP rules need Landlock ABI {landlock.NET_ABI})"
        if self.mechanism == "bubblewrap":
            return f"{self.mode}, bubblewrap {self.bwrap} (no Landlock: {self.reason}), network {net}"
        return f"{self.mode}, Landlock ABI {self.abi}, network {net}"

    def blocked(self) -> str:
        """What the sandbox refuses, for the model reading a failed command."""
        where = "anywhere but the private temp folder" if self.mode == READ_ONLY else "outside the workspace"
        if not self.network_blocked:
            return f"writes {where}"
        if self.mechanism == "bubblewrap":
            return f"writes {where} and network connections (no network but its own loopback)"
        return f"writes {where} and network connections (TCP connect and bind)"


# Said in `clientCapabilities._meta` by a client whose terminals run what they are asked confined (ama's own
# client with an active sandbox: `ama acp-client`, `ama conformance`, ama driving an external agent). An agent that
# reads it sends such a client the bare command: a launcher cannot run inside another (the outer one sets its own
# rules and temp folder, which the inner one's cannot include), and the client's sandbox confines it already.
CONFINED_TERMINALS = "ama/confinedTerminals"


def confines_terminals(meta: object) -> bool:
    """Whether a client's `clientCapabilities._meta` says its terminals confine their commands (read with a type
    check: `_meta` is free-form)."""
    return isinstance(meta, dict) and meta.get(CONFINED_TERMINALS) is True


@functools.cache
def kernel_abi() -> tuple[int, str]:
    """The Landlock ABI of this kernel and why there is none; asked once per process."""
    if os.environ.get(HIDE_LANDLOCK_VAR):
        return 0, f"Landlock is hidden from ama ({HIDE_LANDLOCK_VAR}, a test hook)"
    return landlock.abi_version()


def _bubblewrap(roots: Sequence[str]) -> tuple[str, str]:
    """The bubblewrap that can confine commands here ("" when none) and, when none, why not."""
    from ama_acp.sandbox import bwrap  # only where the kernel has no Landlock

    program = bwrap.find(os.environ.get("PATH", os.defpath), roots)
    if program is None:
        return "", "bubblewrap (bwrap) is not installed, or not in an absolute PATH entry outside the workspace"
    why = bwrap.trial(program)
    return ("", why) if why else (program, "")


_told: set[str] = set()  # the log lines said once a process


def sandbox_state(cfg: SandboxConfig, roots: Sequence[str] = ()) -> SandboxState:
    """What `cfg` gets here; `roots`, the session's folders, in which no `bwrap` is taken."""
    if cfg.mode == OFF:
        return SandboxState(cfg.mode, cfg.network, 0, "")
    abi, reason = kernel_abi()
    program = ""
    if abi < 1:
        program, why = _bubblewrap(roots)
        reason = f"{reason}; {why}" if why else reason
    state = SandboxState(cfg.mode, cfg.network, abi, reason, program)
    mechanism = state.mechanism or "none"
    if mechanism not in _told:
        _told.add(mechanism)
        if state.active:
            log.info("commands are sandboxed: %s", state.summary())
        else:
            log.warning("commands are not sandboxed: %s", reason)
    return state


def own_files_exposed(roots: Sequence[str], own: Sequence[str] | None = None) -> str | None:
    """The first of ama's own files — its package, the Python environment it runs in — that lies beneath one of
    `roots` (the folders the sandbox lets commands write); None when none does. There a command the sandbox lets
    write could change ama itself, and what ama imports later (a tool's module on its first call) would run with
    ama's rights: Landlock cannot take a folder back out of one it allows. `own`: a test's stand-in."""
    here = [os.path.dirname(os.path.dirname(os.path.abspath(__file__))), sys.prefix] if own is None else own
    real_roots = [os.path.realpath(r) for r in roots]
    for path in here:
        real = os.path.realpath(path)
        for root in real_roots:
            if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
                return path
    return None


class Sandbox:
    """Confines the commands of one set of workspace roots. With Landlock and `warm`, it keeps a launcher
    ready ahead of need (`start`); `aclose` ends it. `warm` only for an owner that closes it (a session: its
    release does): a launcher left to the garbage collector outlives its event loop, and its transport's
    finalizer then fails ("Event loop is closed") wherever the collector happens to run."""

    def __init__(self, state: SandboxState, roots: Sequence[str], *, warm: bool = False) -> None:
        self.state = state
        self.roots = list(roots)
        self._standby = Standby(_SERVE) if warm and state.mechanism == "landlock" else None

    def wrap(self, argv: list[str], env: dict[str, str], tmp: str) -> list[str]:
        """The command line that runs `argv` writing only where the mode allows (`tmp` always); what it needs
        goes into `env`."""
        writable = [tmp, *self.roots] if self.state.mode == WORKSPACE_WRITE else [tmp]
        if self.state.mechanism == "bubblewrap":
            from ama_acp.sandbox import bwrap

            return bwrap.command_line(self.state.bwrap, writable, network=not self.state.network_blocked, argv=argv)
        env[landlock.SPEC_VAR] = self._spec(argv, tmp)
        return [sys.executable, "-I", "-S", "-c", _LAUNCHER]

    def _spec(self, argv: list[str], tmp: str) -> str:
        dirs = [tmp, *SHARED]
        if self.state.mode == WORKSPACE_WRITE:
            dirs += self.roots
        return landlock.encode_spec(not self.state.network_blocked, dirs, list(DEVICES), argv)

    async def start(self, argv: list[str], env: dict[str, str], tmp: str, cwd: str) -> Process | None:
        """`argv` started confined in `cwd` by the launcher kept ready, whose `marks` (the variables it was started
        with) `env` takes on. None when no launcher could take it (the first command, one that died, a cwd that is
        not a folder): the caller starts `wrap`'s line itself. Either way the caller calls `prepare` once the
        command is over."""
        # A cwd that is not a folder fails the cold way (FileNotFoundError, NotADirectoryError), as unconfined.
        if self._standby is None or not await anyio.Path(cwd).is_dir():
            return None
        started = None
        launcher = await self._standby.take()
        if launcher is not None:
            try:
                env.update(launcher.marks)
                request = landlock.encode_request(
                    self._spec(argv, tmp), os.fsencode(cwd), {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
                )
                started = launcher.proc if await launcher.hand(request) else None
            finally:
                if started is None:  # it died, is stuck, or was never handed its request
                    await launcher.aclose()
        return started

    def prepare(self, marks: dict[str, str]) -> None:
        """Start the next command's launcher in the background, with `marks` (the variables its command will
        carry), unless one is ready or on its way: called as a command ends, so that the start falls between
        commands (a model's turn), not inside one."""
        if self._standby is not None:
            self._standby.refill_soon(marks)

    def warm_ready(self) -> bool:
        """Whether a launcher is ready for the next command (the benchmark and the tests wait for it)."""
        return self._standby is not None and self._standby.ready()

    async def aclose(self) -> None:
        """The launcher kept ready goes (no process outlives its sandbox)."""
        if self._standby is not None:
            await self._standby.aclose()

    def launcher(self, argv: list[str], env: dict[str, str], tmp: str) -> list[str]:
        """As `wrap`, but `argv` ends the launcher's own command line instead of riding in `env`: for a command
        another program starts and shows, where the person reads the real command last (an editor's terminal
        card: `python -I -S …/landlock.py /bin/sh -c 'make test'`, or bubblewrap's line ending in it). Only `env`
        and no shell syntax: an editor that runs it through a shell gets the same command line."""
        if self.state.mechanism == "bubblewrap":
            return self.wrap(argv, env, tmp)
        env[landlock.SPEC_VAR] = self._spec([], tmp)
        return [sys.executable, "-I", "-S", _SCRIPT, *argv]
