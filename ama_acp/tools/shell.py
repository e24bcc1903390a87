"""run_command: a shell command in the session's cwd, with a timeout and capped output."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from typing import NotRequired, TypedDict

from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolError, ToolKind, ToolResult
from ama_acp.tools.common import arg_int, arg_str, closed_object, os_errors_as_tool_errors, short, validate
from ama_acp.tools.context import ToolContext

DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 600
# Beyond its own timeout a command gets this long to be killed and its output gathered before the call's
# deadline (tools.registry.run_with_deadline) gives up on it.
DEADLINE_GRACE = 15.0
OUTPUT_CAP = 30_000  # bytes kept: the first and the last half


# The argument that asks for one run outside the sandbox. The approver (session/editor/approval.py) asks the
# person about it in every mode, and the tool runs unconfined on it: both read it through `outside_sandbox`.
OUTSIDE_SANDBOX = "outside_sandbox"


class ShellArgs(TypedDict):
    command: str
    timeout: int  # the default filled in
    description: NotRequired[str]
    outside_sandbox: NotRequired[bool]  # read through `outside_sandbox`, never from here


class ShellTool:
    name = "run_command"
    kind: ToolKind = "execute"
    description = (
        "Run a shell command in the working directory and get its combined stdout and stderr and its exit "
        "code. Write POSIX sh: it runs under bash, or /bin/sh when the editor's terminal runs it. Use it for "
        "builds, tests, git and other programs. Nothing is interactive: stdin is empty and pagers are off. "
        "Each call starts a fresh shell, so `cd` and exported variables do not carry over; "
        f"chain them with `&&`. The command is killed after `timeout` seconds (default {DEFAULT_TIMEOUT}, at "
        f"most {MAX_TIMEOUT}), with everything it started. Output above about 30 KB keeps its beginning and end. "
        "To read, find or search files prefer read_file, find_files and search. Commands may run in ama's "
        "sandbox, which blocks some writes and network access; the result of a blocked command says so."
    )
    parameters: JSONObject = closed_object(
        {
            "command": {"type": "string", "description": "The command line."},
            "timeout": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TIMEOUT,
                "description": f"Seconds before the command is killed. Default {DEFAULT_TIMEOUT}.",
                "default": DEFAULT_TIMEOUT,
            },
            "description": {
                "type": "string",
                "description": "What the command does, in a few words, for the person watching.",
            },
            OUTSIDE_SANDBOX: {
                "type": "boolean",
                "description": (
                    "Run this command once outside ama's sandbox, with the person's full rights. Only after the "
                    "sandbox blocked this command (its result says so) and the task needs what was blocked. The "
                    "person is always asked and may decline. Default false."
                ),
            },
        },
        "command",
    )

    def title(self, args: ToolArgs) -> str:
        return f"Run `{short(arg_str(args, 'command'), 80)}`"

    def locations(self, args: ToolArgs, cwd: str) -> list[Location]:
        return []

    def deadline_seconds(self, args: object) -> float:
        timeout = arg_int(args, "timeout")
        timeout = DEFAULT_TIMEOUT if timeout is None else min(max(timeout, 1), MAX_TIMEOUT)
        return timeout + DEADLINE_GRACE

    @os_errors_as_tool_errors
    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        checked = validate(self.parameters, args, ShellArgs)
        command = checked["command"]
        if not command.strip():
            raise ToolError("`command` is empty.")
        timeout = checked["timeout"]
        confined = not outside_sandbox(args)
        result = await ctx.workspace.run_command(command, ctx.cwd, float(timeout), OUTPUT_CAP, confined)

        output = result.output.rstrip("\n")
        parts = [output if output.strip() else "(no output)"]
        if result.truncated:
            parts.append(f"[The output was longer than {OUTPUT_CAP // 1000} KB; its middle was cut.]")
        if result.timed_out:
            parts.append(f"[Timed out after {timeout} s; the command and everything it started were killed.]")
        elif result.signal is not None:
            parts.append(f"[Killed by signal {_signal_name(result.signal)}.]")
        else:
            parts.append(f"Exit code: {result.exit_code}")
        failed = result.timed_out or result.signal is not None or result.exit_code != 0
        if failed and result.sandbox and any(sign in output for sign in _SANDBOX_SIGNS):
            parts.append(_blocked_note(result.sandbox))
        return ToolResult(text="\n\n".join(parts), is_error=failed)


def outside_sandbox(args: object) -> bool:
    """Whether the call asks to run outside the sandbox: a JSON `true` only (missing or null: no). Unlike the
    other arguments not read leniently ("true" as a string is an error): the person is asked on exactly this
    value, and the command must run on the same one."""
    value = args.get(OUTSIDE_SANDBOX) if isinstance(args, Mapping) else None
    if value is None or isinstance(value, bool):
        return value is True
    raise ToolError(f"Argument `{OUTSIDE_SANDBOX}` must be the JSON value true or false, not {short(repr(value))}.")


def _blocked_note(blocked: str) -> str:
    """What the model reads under a command the sandbox may have stopped: what it blocks, and the one way past it."""
    return (
        f"[{blocked[:1].upper()}{blocked[1:]} are blocked by ama's sandbox, which this command ran in: the "
        "permission error above may be the sandbox's. Work inside the workspace if you can. If the task needs "
        f"what was blocked, call run_command again with `{OUTSIDE_SANDBOX}: true`: the person is asked, and "
        "only if they allow it does the command run, once, outside the sandbox.]"
    )


# How a refusal by the sandbox reads in a command's output: Landlock's EACCES and EPERM; bubblewrap's read-only
# file system (EROFS) and its network of one loopback (nothing listens there; nothing else is reachable).
_SANDBOX_SIGNS = (
    "Permission denied",
    "Operation not permitted",
    "EACCES",
    "EPERM",
    "PermissionError",
    "Read-only file system",
    "EROFS",
    "Network is unreachable",
    "ENETUNREACH",
)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
