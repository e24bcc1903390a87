"""What a tool gets besides its arguments."""

from __future__ import annotations

from dataclasses import dataclass

from ama_acp.tools.paths import PathPolicy, ResolvedPath
from ama_acp.tools.workspace import Workspace


@dataclass
class ToolContext:
    workspace: Workspace
    cwd: str  # absolute; the session's working directory
    policy: PathPolicy

    def resolve(self, path: str) -> ResolvedPath:
        return self.policy.resolve(path, self.cwd)
