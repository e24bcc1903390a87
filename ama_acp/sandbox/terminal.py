"""A command another program starts confined (an editor's terminal, for ama or an external agent) or ama's client
starts for an agent under test (`terminal/create`): the program found as a shell would find it, the launcher's
command line with the real command last, and the variables the command gets (docs/tools.md "What runs").
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import msgspec

from ama_acp.sandbox import Sandbox, landlock
from ama_acp.sandbox.temp import private_temp

# Read by the dynamic loader as the launcher starts, before it confines itself: a library named here would run
# unconfined. The command still gets them, set by `env` once the launcher has confined itself.
_LOADER_PREFIX = "LD_"
# Set by the sandbox, never by the requester: the launcher's rules and the private temp folder.
_OURS = (landlock.SPEC_VAR, "TMPDIR")


class Confined(msgspec.Struct, frozen=True):
    """A command ready to start confined."""

    argv: list[str]  # the launcher, the command at its end
    env: dict[str, str]  # the variables to set for it, over the environment it starts with
    tmp: str  # its private temp folder: `temp.remove_temp` once the command is over or its terminal released


def program_argv(command: str, args: Sequence[str], path: str | None, cwd: str) -> list[str]:
    """The command line the launcher execs (by path: it searches no PATH) for a terminal's `command` and `args`.
    The program is found on `path` (a PATH value; None: this process's) as a shell would find it. A command line
    given whole (`ls -la | wc`, no args) runs through /bin/sh as an editor's terminal runs it, and so does a
    program found nowhere: the shell says so (exit 127), as a terminal would."""
    import shutil  # an editor terminal's command only

    if os.sep in command:
        return [os.path.join(cwd, command), *args]
    found = shutil.which(command, path=path)
    if found is not None and os.path.isabs(found):
        return [found, *args]
    import shlex  # a command given with arguments only

    return ["/bin/sh", "-c", shlex.join([command, *args]) if args else command]


def confine(sandbox: Sandbox | None, argv: list[str], env: Mapping[str, str]) -> Confined | None:
    """`argv` (its program an absolute path) made ready to run confined by `sandbox`, `env` being the variables
    its requester set (an agent's: hostile); None when no sandbox is active (the command runs as asked). The
    requester's loader variables reach the command through `env` after the launcher; its AMA_SANDBOX and TMPDIR
    are replaced by the sandbox's."""
    if sandbox is None or not sandbox.state.active:
        return None
    given = {k: v for k, v in env.items() if k not in _OURS}
    loader = [f"{k}={v}" for k, v in given.items() if k.startswith(_LOADER_PREFIX)]
    if loader:
        argv = [_env_program(), *loader, *argv]
    out = {k: v for k, v in given.items() if not k.startswith(_LOADER_PREFIX)}
    out["TMPDIR"] = tmp = private_temp()
    return Confined(sandbox.launcher(argv, out, tmp), out, tmp)


def _env_program() -> str:
    import shutil

    return shutil.which("env", path=os.defpath) or "/usr/bin/env"
