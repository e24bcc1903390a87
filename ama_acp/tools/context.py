"""What a tool gets besides its arguments."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar

import msgspec

from ama_acp.sandbox import Sandbox
from ama_acp.tools.paths import PathPolicy, ResolvedPath
from ama_acp.tools.workspace import Workspace

# Characters the running call's result may take, set by the session from the model's window for each call
# (agent/result_fit.py); None: only the tool's own bound. A tool that can cut where the model can read on
# (read_file's `offset`) cuts there itself; the session cuts any result still too long.
result_chars: ContextVar[int | None] = ContextVar("result_chars", default=None)

# Whether the running call may go on to a URL of an origin it was not approved for (web_fetch following a
# redirect: docs/tools.md "web_fetch"), given that URL and the one that led there: None to go on, else why not
# (the model reads it). The session sets it for each call (session/turn/tool_runner.py) to its permissions — the
# rules, the mode, the "always" answers, and a question to the person where they would ask. Unset (a tool run
# with nobody to ask), every such step is refused.
RedirectJudge = Callable[[str, str], Awaitable[str | None]]
redirect_judge: ContextVar[RedirectJudge | None] = ContextVar("redirect_judge", default=None)


class ToolContext(msgspec.Struct):
    workspace: Workspace
    cwd: str  # absolute; the session's working directory
    policy: PathPolicy
    # Why the commands ama runs itself are not sandboxed though `[sandbox]` asks for it (no Landlock here); ""
    # when they are, or when the mode is "off". The permission question for a command says so.
    unsandboxed: str = ""
    # Whether those commands run in an active sandbox: only then is `run_command`'s `outside_sandbox` a run with
    # more rights, which the person is asked about in every mode (session/editor/approval.py). True unless known
    # otherwise: a context that forgot to say asks one question too many, never one too few.
    sandboxed: bool = True
    # The session's sandbox (its folders, `[sandbox]`), for commands others start on its behalf: an external
    # agent's terminals (session/tasks/external/terminals.py). None: such commands run unconfined. Closed with the
    # session: it may keep a launcher ready (sandbox/warm.py).
    sandbox: Sandbox | None = None
    # Whether the terminals the editor runs for this session are confined, by `sandbox` or by the editor itself
    # (it says so: sandbox.CONFINED_TERMINALS): said in turn to an external agent, which then sends bare commands.
    terminals_confined: bool = False

    def resolve(self, path: str) -> ResolvedPath:
        return self.policy.resolve(path, self.cwd)
