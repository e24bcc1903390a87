"""One hook run: its process started in a group of its own, one JSON object written to its stdin, its stdout and
stderr read up to `MAX_STREAM_BYTES` each, and the whole group ended at its timeout or when the call waiting for
it is cancelled.

A hook is the person's own program, named in their config: it runs as they do, outside the sandbox (that is for
what a model or an agent under test runs), with their environment minus every credential ama knows of (the same
rule as run_command's, tools/workspace.py `command_env`).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

import anyio
from anyio.abc import ByteReceiveStream, Process

from ama_acp.shaping.hooks import Hook
from ama_acp.tools.proctree import MARKER_VAR, new_marker
from ama_acp.tools.workspace import command_env, end_command

MAX_STREAM_BYTES = 64 * 1024  # of stdout and of stderr each; the rest is read and counted, not kept
_KILL_GRACE = 0.5  # seconds between SIGTERM and SIGKILL
_SHELL = "/bin/sh"


@dataclass(frozen=True)
class Ran:
    """How a hook ended: its exit `code` (None when it was ended at its timeout, killed by a signal or could not
    start: `trouble` says which), what it printed (each stream cut at MAX_STREAM_BYTES, with a marker)."""

    code: int | None
    stdout: str = ""
    stderr: str = ""
    trouble: str | None = None


class _Capped:
    """The first `MAX_STREAM_BYTES` of a stream, and how many bytes came after them."""

    def __init__(self) -> None:
        self.kept = bytearray()
        self.dropped = 0
        self.done = anyio.Event()

    async def drain(self, stream: ByteReceiveStream | None) -> None:
        try:
            if stream is None:
                return
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for chunk in stream:
                    room = max(MAX_STREAM_BYTES - len(self.kept), 0)
                    self.kept += chunk[:room]
                    self.dropped += max(len(chunk) - room, 0)
        finally:
            self.done.set()

    def text(self) -> str:
        text = self.kept.decode("utf-8", "replace")
        return text if not self.dropped else f"{text}\n[… {self.dropped} more bytes not read]"


def argv_of(hook: Hook) -> list[str]:
    """A string runs in `/bin/sh -c` (the person's shell line as written); a list is the program and its arguments."""
    return [_SHELL, "-c", hook.command] if isinstance(hook.command, str) else list(hook.command)


async def run_hook(hook: Hook, payload: Mapping[str, object], cwd: str, extra_env: Mapping[str, str]) -> Ran:
    """Run `hook` with `payload` on its stdin. Never raises but for a cancel (the group is ended first)."""
    marker = new_marker()
    env = command_env() | dict(extra_env)
    env[MARKER_VAR] = marker  # what the hook starts and moves out of its group is found by it too
    data = json.dumps(payload, ensure_ascii=True).encode("ascii")  # ASCII: a lone surrogate is escaped, not fatal
    try:
        with anyio.CancelScope(shield=True):  # a cancel now would orphan the process asyncio is still starting
            proc = await anyio.open_process(
                argv_of(hook),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,  # one killpg reaches all it started
            )
    except OSError as exc:
        return Ran(None, trouble=f"could not start ({exc.strerror or type(exc).__name__})")
    out, err = _Capped(), _Capped()
    timed_out = False
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_feed, proc, data)
            tg.start_soon(out.drain, proc.stdout)
            tg.start_soon(err.drain, proc.stderr)
            with anyio.move_on_after(hook.timeout) as scope:
                await proc.wait()
            timed_out = scope.cancelled_caught
            await end_command(proc, proc.pid, marker, _KILL_GRACE)  # what it left running goes too
            with anyio.move_on_after(1.0):  # a process that escaped the group may hold a pipe: not waited on
                await out.done.wait()
                await err.done.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await end_command(proc, proc.pid, marker, _KILL_GRACE)
            with contextlib.suppress(Exception):
                await proc.aclose()
    if timed_out:
        return Ran(None, out.text(), err.text(), f"was ended at its timeout ({hook.timeout:g} s)")
    code = proc.returncode
    if code is None or code < 0:
        return Ran(None, out.text(), err.text(), f"was killed by signal {-(code or 0)}")
    return Ran(code, out.text(), err.text())


async def _feed(proc: Process, data: bytes) -> None:
    """The payload, then EOF; a hook that exits without reading it is no error."""
    if proc.stdin is None:
        return
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        await proc.stdin.send(data)
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        await proc.stdin.aclose()
