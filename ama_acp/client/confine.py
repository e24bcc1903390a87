"""What a client lets an agent touch: files under the session's folders, commands only once someone agreed.

An agent is someone else's program, so its `fs/*` and `terminal/create` requests are checked before they are
served. A path is resolved first (symlinks followed, `..` folded: `os.path.realpath`), so neither a `..` nor a
link inside the project that points out of it gets past the check; the handler then opens the resolved path,
never the one the agent named. What is inside, and what is done with the rest, is the client's policy (`Decide`):
`ama acp-client` asks the person, `ama conformance` refuses and reports.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Access:
    """One request of the agent's to touch the machine, as a policy sees it."""

    method: str  # fs/read_text_file, fs/write_text_file or terminal/create
    session_id: str | None
    path: str  # the resolved file (fs/*) or working directory (terminal/create)
    inside: bool  # whether `path` is under one of the session's folders
    command: str | None = None  # terminal/create: the command line (shell-quoted)

    @property
    def verb(self) -> str:
        return {"fs/read_text_file": "read", "fs/write_text_file": "write"}.get(self.method, "run")


# A client's policy: True serves the request, False refuses it (the agent gets an error).
Decide = Callable[[Access], Awaitable[bool]]
# The folders a session may use (resolved by `within`); empty when the session is unknown.
Roots = Callable[[str | None], Iterable[str]]


def resolve(path: str) -> str:
    """The path with every symlink followed and `..` folded (a missing tail is kept as named)."""
    return os.path.realpath(path)


def within(resolved: str, roots: Iterable[str]) -> bool:
    """Whether an already resolved path is one of `roots` or under one (each root is resolved here)."""
    for root in roots:
        real = os.path.realpath(root)
        try:
            if os.path.commonpath([resolved, real]) == real:
                return True
        except ValueError:  # different drives (Windows), or a relative root: not inside
            continue
    return False
