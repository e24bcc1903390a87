"""What a tool gets besides its arguments."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from ama_acp.sandbox import Sandbox
from ama_acp.tools.paths import PathPolicy, ResolvedPath
from ama_acp.tools.workspace import Workspace

# Characters the running call's result may take, set by the session from the model's window for each call
# (agent/result_fit.py); None: only the tool's own bound. A tool that can cut where the model can read on
# (read_file's `offset`) cuts there itself; the session cuts any result still too long.
result_chars: ContextVar[int | None] = ContextVar("result_chars", default=None)


@dataclass
class ToolContext:
    workspace: Workspace
    cwd: str  # absolute; the session's working directory
    policy: PathPolicy
    # Why the commands ama runs itself are not sandboxed though `[sandbox]` asks for it (no Landlock here); ""
    # when they are, or when the mode is "off". The permission question for a command says so.
    unsandboxed: str = ""
    # The sandbox of the commands ama runs itself, closed with the session (it may keep a launcher ready).
    sandbox: Sandbox | None = None

    def resolve(self, path: str) -> ResolvedPath:
        return self.policy.resolve(path, self.cwd)
