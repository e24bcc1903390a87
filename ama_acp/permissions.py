"""Permission modes and approvals (docs/tools.md "Permission modes").

`decide` is the policy: for a tool kind, whether every path it touches is inside the session's roots, and
the mode, it says allow, ask or deny. `Approvals` remembers "always" answers for the session, per tool
kind and path scope (the workspace, or the outside directory).
"""

from __future__ import annotations

import os
from typing import Literal

Decision = Literal["allow", "ask", "deny"]

WRITE_KINDS = frozenset({"edit", "delete", "move"})
RISKY_KINDS = WRITE_KINDS | {"execute"}
# Calls that reach out of the machine (web_fetch): they change nothing here, so Read only does not refuse them,
# but the URL itself can carry what the model read to anyone, so every mode but Full access asks.
OUTBOUND_KINDS = frozenset({"fetch"})
# The modes in which nothing is written or run: Plan is Read only while the model works out a plan.
NO_WRITE_MODES = frozenset({"read_only", "plan"})


def path_problem(path: str) -> str | None:
    """Why no file can have this name (a NUL character, a lone surrogate), or None when the OS can be asked
    about it. The policy below resolves real paths; such names must be refused before they get there."""
    if "\0" in path:
        return "contains a NUL character"
    try:
        os.fsencode(path)
    except UnicodeEncodeError:
        return "is not valid Unicode text (it holds a lone surrogate)"
    return None


def decide(mode: str, kind: str, inside: bool) -> Decision:
    if mode == "full_access":
        return "allow"
    if mode in NO_WRITE_MODES and kind in RISKY_KINDS:
        return "deny"
    if kind in OUTBOUND_KINDS:
        return "ask"
    if not inside:
        return "ask"  # outside the roots asks in every mode but full_access
    if kind not in RISKY_KINDS:
        return "allow"
    if mode == "accept_edits" and kind in WRITE_KINDS:
        return "allow"
    return "ask"


def deny_reason(mode: str, kind: str) -> str:
    if mode == "plan":
        return (
            f"The session is in Plan mode: {kind} tools are not allowed while planning. "
            "Put this step in the plan instead; the user switches to a mode that can edit once the plan is agreed."
        )
    return (
        f"The session is in Read only mode: {kind} tools are not allowed. "
        "Tell the user what you would change, or ask them to switch the mode."
    )


class Approvals:
    """ "Always" answers for one session: per tool kind, for the workspace or for an outside directory.

    Outside directories are kept as real paths (symlinks resolved) and a call is covered only when the real
    path of every outside target lies inside a remembered directory: an "always allow" for /tmp/notes must
    not cover /tmp/notes/key, a symlink to ~/.ssh/id_rsa.
    """

    def __init__(self) -> None:
        self._workspace: dict[str, bool] = {}
        self._dirs: dict[str, dict[str, bool]] = {}  # kind → real directory → allowed

    @staticmethod
    def scope(outside_paths: list[str]) -> str:
        """The real directory an "always" answer for these paths covers (of the first, lexically)."""
        if not outside_paths:
            return "workspace"
        return os.path.realpath(os.path.dirname(sorted(outside_paths)[0]) or "/")

    def remembered(self, kind: str, outside_paths: list[str]) -> bool | None:
        if not outside_paths:
            return self._workspace.get(kind)
        dirs = self._dirs.get(kind, {})
        verdicts = [_covering(dirs, os.path.realpath(p)) for p in outside_paths]
        if any(v is False for v in verdicts):
            return False  # one target the person always rejects: the call is rejected
        if verdicts and all(v is True for v in verdicts):
            return True
        return None

    def remember(self, kind: str, outside_paths: list[str], allowed: bool) -> None:
        if not outside_paths:
            self._workspace[kind] = allowed
            return
        self._dirs.setdefault(kind, {})[self.scope(outside_paths)] = allowed


def _covering(dirs: dict[str, bool], real_path: str) -> bool | None:
    """The answer of the deepest remembered directory holding `real_path`, if any."""
    best: tuple[int, bool] | None = None
    for d, allowed in dirs.items():
        if real_path == d or real_path.startswith(d.rstrip(os.sep) + os.sep):
            if best is None or len(d) > best[0]:
                best = (len(d), allowed)
    return None if best is None else best[1]
