"""The sandbox of the commands ama runs on someone's behalf (`run_command`, locally or in the editor's terminal; an
external agent's terminals; the terminals ama's client serves an agent under test): what `[sandbox]` asks for,
what the kernel offers, and the launcher command line that confines a command (docs/tools.md "What runs").
`temp.py` makes a command's private temp folder; `terminal.py` readies a command another program starts.

Linux only, through Landlock (`landlock.py`): unprivileged, nothing to install. Reading stays allowed
everywhere; writing only in the workspace roots, a private temp folder and the devices a shell needs; TCP
bind and connect not at all unless `network = true`. Where the kernel has no Landlock, commands run
unconfined and ama says so (a log line once; `ama doctor`; "not sandboxed" in the permission question).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from ama_acp.config import SandboxConfig
from ama_acp.sandbox import landlock

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
# The launcher run as a script, for a command line a person reads (`Sandbox.launcher`): compiled at each start,
# which a command started through an editor's terminal does not feel.
_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "landlock.py")


@dataclass(frozen=True)
class SandboxState:
    """What commands get: the configured mode and network, and what the kernel offers (`abi` 0: nothing,
    `reason` says why)."""

    mode: str
    network: bool
    abi: int
    reason: str

    @property
    def active(self) -> bool:
        return self.mode != OFF and self.abi >= 1

    @property
    def network_blocked(self) -> bool:
        return self.active and not self.network and self.abi >= landlock.NET_ABI

    def summary(self) -> str:
        """One line for `ama doctor` and the log."""
        if self.mode == OFF:
            return 'off ([sandbox] mode = "off"): commands run unconfined'
        if not self.active:
            return f"not available: {self.reason}; commands run unconfined"
        net = "blocked" if self.network_blocked else "allowed"
        if not self.network and not self.network_blocked:
            net = f"allowed (TCP rules need Landlock ABI {landlock.NET_ABI})"
        return f"{self.mode}, Landlock ABI {self.abi}, network {net}"

    def blocked(self) -> str:
        """What the sandbox refuses, for the model reading a failed command."""
        where = "anywhere but the private temp folder" if self.mode == READ_ONLY else "outside the workspace"
        net = " and network connections (TCP connect and bind)" if self.network_blocked else ""
        return f"writes {where}{net}"


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
    return landlock.abi_version()


_told_unavailable = False


def sandbox_state(cfg: SandboxConfig) -> SandboxState:
    global _told_unavailable
    abi, reason = kernel_abi() if cfg.mode != OFF else (0, "")
    state = SandboxState(cfg.mode, cfg.network, abi, reason)
    if cfg.mode != OFF and not state.active and not _told_unavailable:
        _told_unavailable = True
        log.warning("commands are not sandboxed: %s", reason)
    return state


class Sandbox:
    """Confines the commands of one set of workspace roots."""

    def __init__(self, state: SandboxState, roots: Sequence[str]) -> None:
        self.state = state
        self.roots = list(roots)

    def wrap(self, argv: list[str], env: dict[str, str], tmp: str) -> list[str]:
        """The launcher's command line, which runs `argv` writing only where the mode allows (`tmp` always);
        what it needs goes into `env`."""
        dirs = [tmp, *SHARED]
        if self.state.mode == WORKSPACE_WRITE:
            dirs += self.roots
        env[landlock.SPEC_VAR] = landlock.encode_spec(not self.state.network_blocked, dirs, list(DEVICES), argv)
        return [sys.executable, "-I", "-S", "-c", _LAUNCHER]

    def launcher(self, argv: list[str], env: dict[str, str], tmp: str) -> list[str]:
        """As `wrap`, but `argv` ends the launcher's own command line instead of riding in `env`: for a command
        another program starts and shows, where the person reads the real command last (an editor's terminal
        card: `python -I -S …/landlock.py /bin/sh -c 'make test'`). Only `env` and no shell syntax: an editor
        that runs it through a shell gets the same command line."""
        dirs = [tmp, *SHARED, *(self.roots if self.state.mode == WORKSPACE_WRITE else ())]
        env[landlock.SPEC_VAR] = landlock.encode_spec(not self.state.network_blocked, dirs, list(DEVICES), [])
        return [sys.executable, "-I", "-S", _SCRIPT, *argv]
