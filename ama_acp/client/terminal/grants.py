"""One question per action: the command a person just allowed in a permission request runs without a second one.

An agent that asks permission for a command (`session/request_permission`, a tool call of kind `execute` whose
`rawInput.command` is a string) then runs it through `terminal/create`; without this the person would be asked
twice about the same command. A grant is recorded when the person picks an allow option for such a request, and
is spent on the first terminal/create of the same session that carries out exactly that command:

- its argv ends with the command: `SHELL -c COMMAND` (SHELL a POSIX shell, whatever runs before it, so a
  launcher in front of the shell does not matter) or the command alone as the whole argv;
- it starts inside the session's folders (a folder outside them is a different action: asked as before).

A grant is used once, and ends when its tool call's update says `completed` or `failed`, or `GRANT_TTL_S` after
it was given. Anything else — another command, another session, a second terminal for the same command — is
asked about as before. Only the person's own answer grants: `--auto-approve` does not.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass

from ama_acp.client.confine import Access, Decide
from ama_acp.rpc.dispatch import JSONObject

GRANT_TTL_S = 120.0
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash"})
_ALLOW = frozenset({"allow_once", "allow_always"})
_ENDED = frozenset({"completed", "failed"})


@dataclass(frozen=True)
class _Grant:
    session_id: str
    tool_call_id: str | None
    command: str
    expires: float


def _allowed(params: JSONObject, outcome: JSONObject) -> bool:
    """Whether the answer picked an allow option of the request (an id two options share is not a clear answer)."""
    options = params.get("options")
    if outcome.get("outcome") != "selected" or not isinstance(options, list):
        return False
    chosen = outcome.get("optionId")
    kinds = [o.get("kind") for o in options if isinstance(o, dict) and o.get("optionId") == chosen]
    return len(kinds) == 1 and kinds[0] in _ALLOW


def _allowed_command(params: JSONObject, outcome: JSONObject) -> tuple[str, str | None, str] | None:
    """(session, tool call, command) of a permission request the person allowed for a command; None otherwise."""
    sid, call = params.get("sessionId"), params.get("toolCall")
    if not isinstance(sid, str) or not isinstance(call, dict) or call.get("kind") != "execute":
        return None
    raw = call.get("rawInput")
    command = raw.get("command") if isinstance(raw, dict) else None
    if not isinstance(command, str) or not command or not _allowed(params, outcome):
        return None
    call_id = call.get("toolCallId")
    return sid, call_id if isinstance(call_id, str) else None, command


def runs_exactly(shown: str | None, command: str) -> bool:
    """Whether the shell-quoted argv `shown` (an `Access.command`) runs `command` and nothing else."""
    if shown is None:
        return False
    try:
        argv = shlex.split(shown)
    except ValueError:
        return False
    if argv == [command]:
        return True
    return len(argv) >= 3 and argv[-1] == command and argv[-2] == "-c" and os.path.basename(argv[-3]) in SHELLS


class Grants:
    """The grants of this client's sessions. `clock` is injectable for tests of the expiry."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._grants: list[_Grant] = []

    def permitted(self, params: JSONObject, outcome: JSONObject) -> None:
        """A permission request was answered (by the person): a grant when it allowed a command."""
        found = _allowed_command(params, outcome)
        if found is not None:
            sid, call_id, command = found
            self._grants.append(_Grant(sid, call_id, command, self._clock() + GRANT_TTL_S))

    def updated(self, params: JSONObject) -> None:
        """A session/update: a tool call that completed or failed takes its grants with it."""
        update = params.get("update")
        if not isinstance(update, dict) or update.get("sessionUpdate") not in ("tool_call", "tool_call_update"):
            return
        if update.get("status") not in _ENDED:
            return
        sid, call_id = params.get("sessionId"), update.get("toolCallId")
        if isinstance(call_id, str):
            self._grants = [g for g in self._grants if not (g.session_id == sid and g.tool_call_id == call_id)]

    def spend(self, access: Access) -> bool:
        """Whether a grant covers this terminal/create (the grant is then used up)."""
        now = self._clock()
        self._grants = [g for g in self._grants if g.expires > now]
        if access.method != "terminal/create" or not access.inside:
            return False
        for grant in self._grants:
            if grant.session_id == access.session_id and runs_exactly(access.command, grant.command):
                self._grants.remove(grant)
                return True
        return False

    def gate(self, ask: Decide) -> Decide:
        """The terminal gate: a command a grant covers runs, any other is decided by `ask`."""

        async def decide(access: Access) -> bool:
            return self.spend(access) or await ask(access)

        return decide
