"""The client's answers to ama's requests (`fs/*`, `terminal/*`, `session/request_permission`), decoded.

An answer is the client's input, so hostile until decoded: each decoder takes whatever JSON value arrived and
returns the typed answer of wire/types.py, or raises `msgspec.ValidationError` naming what is wrong
("Object missing required field `terminalId`", "Expected `str`, got `int` - at `$.content`"). It raises
nothing else, whatever the value. The session layer turns that error into its own (session/editor/client.py).

Lenient where the schema is, strict elsewhere:
- unknown fields and `_meta` are ignored;
- an answer whose fields are all optional (write, kill, release, wait_for_exit) may be `null`: the official
  SDK's clients answer `null` when their handler returns nothing, and ama has always read it as "done";
- `exitStatus`, `exitCode` and `signal` of the wrong type read as absent (the schema marks them
  `x-deserialize-default-on-error`): a client's odd exit status must not turn the command's output into an
  error. A numeric `signal` (the schema says a name) is kept, as ama always read it.
"""

from __future__ import annotations

import msgspec

from ama_acp.wire import types as w


def read_text_file(answer: object) -> w.ReadTextFileResponse:
    return msgspec.convert(answer, w.ReadTextFileResponse)


def write_text_file(answer: object) -> w.WriteTextFileResponse:
    return msgspec.convert(answer, w.WriteTextFileResponse | None) or w.WriteTextFileResponse()


def request_permission(answer: object) -> w.RequestPermissionResponse:
    return msgspec.convert(answer, w.RequestPermissionResponse)


def create_terminal(answer: object) -> w.CreateTerminalResponse:
    return msgspec.convert(answer, w.CreateTerminalResponse)


class _Output(msgspec.Struct, rename="camel", frozen=True):
    """terminal/output as sent: the exit status undecoded, so one of the wrong shape can be read as absent."""

    output: str
    truncated: bool
    exit_status: object = None


def terminal_output(answer: object) -> w.TerminalOutputResponse:
    sent = msgspec.convert(answer, _Output)
    status = sent.exit_status
    return w.TerminalOutputResponse(
        output=sent.output,
        truncated=sent.truncated,
        exit_status=exit_status(status) if isinstance(status, dict) else None,
    )


class _Status(msgspec.Struct, rename="camel", frozen=True):
    """An exit status as sent: its fields undecoded (see `exit_status`)."""

    exit_code: object = None
    signal: object = None


def exit_status(answer: object) -> w.TerminalExitStatus:
    """An exit status (terminal/wait_for_exit's answer, or terminal/output's `exitStatus`): an object or null;
    a field of the wrong type is absent."""
    sent = msgspec.convert(answer, _Status | None) or _Status()
    code, sig = sent.exit_code, sent.signal
    return w.TerminalExitStatus(
        exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        signal=sig if isinstance(sig, str | int) and not isinstance(sig, bool) else None,
    )


def wait_for_terminal_exit(answer: object) -> w.WaitForTerminalExitResponse:
    return exit_status(answer)


def kill_terminal(answer: object) -> w.KillTerminalResponse:
    return msgspec.convert(answer, w.KillTerminalResponse | None) or w.KillTerminalResponse()


def release_terminal(answer: object) -> w.ReleaseTerminalResponse:
    return msgspec.convert(answer, w.ReleaseTerminalResponse | None) or w.ReleaseTerminalResponse()
