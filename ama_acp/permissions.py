"""Permission modes and approvals (interface.md "Permission modes").

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


def decide(mode: str, kind: str, inside: bool) -> Decision:
    if mode == "full_access":
        return "allow"
    if mode == "read_only" and kind in RISKY_KINDS:
        return "deny"
    if not inside:
        return "ask"  # outside the roots asks in every mode but full_access
    if kind not in RISKY_KINDS:
        return "allow"
    if mode == "accept_edits" and kind in WRITE_KINDS:
        return "allow"
    return "ask"


def deny_reason(mode: str, kind: str) -> str:
    return (
        f"The session is in Read only mode: {kind} tools are not allowed. "
        "Tell the user what you would change, or ask them to switch the mode."
    )


class Approvals:
    def __init__(self) -> None:
        self._always: dict[tuple[str, str], bool] = {}

    @staticmethod
    def scope(outside_paths: list[str]) -> str:
        if not outside_paths:
            return "workspace"
        return os.path.dirname(sorted(outside_paths)[0]) or "/"

    def remembered(self, kind: str, outside_paths: list[str]) -> bool | None:
        return self._always.get((kind, self.scope(outside_paths)))

    def remember(self, kind: str, outside_paths: list[str], allowed: bool) -> None:
        self._always[(kind, self.scope(outside_paths))] = allowed
