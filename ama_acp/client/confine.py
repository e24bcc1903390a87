"""What a client lets an agent touch: files under the session's folders, commands only once someone agreed.

An agent is someone else's program, so its `fs/*` and `terminal/create` requests are checked before they are
served. A path is resolved first (symlinks followed, `..` folded: `os.path.realpath`), so neither a `..` nor a
link inside the project that points out of it gets past the check; the handler then opens the resolved path,
never the one the agent named. What is inside, and what is done with the rest, is the client's policy (`Decide`):
`ama acp-client` asks the person, `ama conformance` refuses and reports. A command that runs, runs in the sandbox
(`[sandbox]` of the client's config, ama_acp/sandbox/) when the client has one: it writes only in the session's
folders and its private temp folder (handlers.py `TerminalManager`).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from ama_acp.config import SandboxConfig as SandboxConfig  # re-exported: the suite reads it through the client
from ama_acp.errors import ConfigError
from ama_acp.sandbox import OFF, SandboxState, sandbox_state


@dataclass(frozen=True)
class Access:
    """One request of the agent's to touch the machine, as a policy sees it."""

    method: str  # fs/read_text_file, fs/write_text_file or terminal/create
    session_id: str | None
    path: str  # the resolved file (fs/*) or working directory (terminal/create)
    inside: bool  # whether `path` is under one of the session's folders
    command: str | None = None  # terminal/create: the command line (shell-quoted)
    # terminal/create: why the command would run unconfined though the client has a `[sandbox]` ("" when it runs
    # in the sandbox, or the client confines no command); the question says "not sandboxed".
    unsandboxed: str = ""

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


def unsandboxed(config: SandboxConfig | None) -> str:
    """Why a client's commands run unconfined though it has a `[sandbox]` (`config`): its mode is off or the kernel
    offers none. "" when they are confined, or when the client has no sandbox (None: it confines no command)."""
    return "" if config is None else why_unconfined(sandbox_state(config))


def why_unconfined(state: SandboxState) -> str:
    """Why commands run unconfined in `state` ("" when they are confined)."""
    if state.active:
        return ""
    return '[sandbox] mode = "off"' if state.mode == OFF else state.reason


def configured_sandbox(path: str | None, warn: Callable[[str], None]) -> SandboxConfig:
    """`[sandbox]` of ama's config file (`path`, else AMA_CONFIG, else the default file): how a client confines the
    commands it runs for an agent. The default sandbox when the file has none or cannot be read, which `warn` is
    told (as is a malformed `[sandbox]`, dropped whole): a broken file never loosens it."""
    from ama_acp.config import load_config

    try:
        config = load_config(path)
    except ConfigError as exc:
        warn(f"ignoring the config ({exc}); the agent's commands get the default sandbox")
        return SandboxConfig()
    for warning in config.warnings:
        if "[sandbox]" in warning:
            warn(warning)
    return config.sandbox
