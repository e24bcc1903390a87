"""What one run of the suite is given: the agent's command, its environment, the directories and the limits."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio.abc

from ama_acp.client.confine import SandboxConfig
from ama_conformance.requirements.registry import Profile

# A seam for embedding the suite (not on the command line): starts the agent under test instead of spawning
# `RunConfig.command`, given (command, environment, working directory), and returns it as an anyio process (its
# stdin, stdout and, when it has one, stderr stream; its exit status). ama's tests launch ama's server inside
# the test's own process this way (tests/support/conformance_inprocess.py). A launched agent's process group is
# ended after it only when it leads one (conformance/core/agent.py).
Launcher = Callable[[list[str], dict[str, str], Path], Awaitable[anyio.abc.Process]]

# What `--env-clean` keeps of the suite's environment: what a program needs to find executables (PATH), its
# home (HOME, where agents keep their config), and the locale and terminal type, which decide how it encodes
# text. Nothing else: no API key, no proxy, no variable that changes an agent's behaviour unasked
# (IS_SANDBOX, CI, …). `--env NAME=VALUE` adds to it.
CLEAN_ENV_NAMES = ("PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TMPDIR")
CLEAN_ENV_PREFIXES = ("LC_",)


def clean_env(source: dict[str, str]) -> dict[str, str]:
    """The part of `source` that `--env-clean` passes to the agent."""
    return {k: v for k, v in source.items() if k in CLEAN_ENV_NAMES or k.startswith(CLEAN_ENV_PREFIXES)}


@dataclass
class StartupWatch:
    """Whether the agent could be started and initialized at all, shared by every group of one run.

    The first `initialize` (of protocol version 1) that gets no answer in time, or whose process exits before it
    answers, is recorded here; the runner then runs no further group (each would only wait out its own timeout
    for the same silence) and reports their requirements NOT_TESTED with this one reason."""

    failure: str | None = None
    exited: bool = False  # the process had exited (died at start), rather than staying silent
    # The failed agent's exit code and stderr, read when asked: by then its process has been closed and its
    # stderr read to the end.
    details: Callable[[], tuple[int | None, str]] = lambda: (None, "")

    def record(self, failure: str, *, exited: bool, details: Callable[[], tuple[int | None, str]]) -> None:
        if self.failure is None:
            self.failure, self.exited, self.details = failure, exited, details

    @property
    def returncode(self) -> int | None:
        return self.details()[0]

    @property
    def stderr(self) -> str:
        return self.details()[1]


@dataclass
class ExitWatch:
    """Whether the agent has been seen to stay running after its stdin closed, shared by every group of one run.

    The first close waits out the whole exit grace, which is what R7 measures. Once an agent has ignored EOF,
    each later close of the same run terminates the agent at once: the rule has already failed, and the full grace
    at each of a run's ~32 closes made a run take minutes."""

    ignored_eof: bool = False

    def grace(self, full: float) -> float:
        return 0.0 if self.ignored_eof else full


@dataclass
class TurnWatch:
    """Whether a prompt turn can complete at all, shared by every group of one run.

    A turn that shows nothing within `Timeouts.stall` — no update of a turn, no request of the agent's, no
    request to the scripted model — is taken for one that cannot complete (its model unreachable, a sign-in it
    waits for): the first such turn records the reason here, and every later turn of the run that shows nothing
    within a second gives up with it, as NOT_TESTED, instead of waiting out `--prompt-timeout` in every group
    (conformance/core/agent.py `Agent.finish`). A turn that shows anything is waited for as long as the prompt
    timeout allows."""

    stalled: str | None = None
    # How many requests the scripted model has had (0 when the agent is not pointed at it): a turn whose model got
    # a request is under way, even before the agent writes anything.
    model_requests: Callable[[], int] = lambda: 0


@dataclass(frozen=True)
class Timeouts:
    request: float = 30.0  # any request that is not a prompt
    prompt: float = 120.0  # a whole prompt turn
    exit: float = 5.0  # grace after stdin closes before the agent is terminated (R7)
    group: float = 300.0  # one whole group, whatever happens inside it
    turn_start: float = 20.0  # how long a cancel test waits for the turn to show it runs
    stall: float = 10.0  # how long a turn may show nothing before it is taken for one that cannot complete (0: off)


@dataclass
class RunConfig:
    command: list[str]
    cwd: Path  # the agent process's working directory and the parent of the session directory
    workspace: Path  # the sessions' cwd: a directory the suite creates inside `cwd` (its files go there)
    scratch: Path  # the suite's own files (MCP server logs), outside the workspace
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    timeouts: Timeouts = field(default_factory=Timeouts)
    cancel_prompt: str | None = None  # a prompt that keeps the agent busy long enough to cancel it
    auth_method: str | None = None
    profiles: tuple[Profile, ...] = (Profile.ACP,)
    select: str | None = None  # -k: substring or `not X` / `A or B` expression over ids and group names
    model_env: dict[str, str] = field(default_factory=dict)  # NAME -> value template ({openai}, {anthropic}, …)
    model_port: int | None = None  # serve the scripted model on this port (for an agent configured by file)
    # The directories the suite created for this run: fs/* and terminals are served inside them only. Empty means
    # the workspace and the scratch directory.
    created: tuple[Path, ...] = ()
    startup: StartupWatch = field(default_factory=StartupWatch)
    exits: ExitWatch = field(default_factory=ExitWatch)
    turns: TurnWatch = field(default_factory=TurnWatch)
    # Where each group's fresh HOME and XDG_* directories are made (conformance/core/homes.py); None: the agent
    # keeps the HOME of `env`, shared by every group (--keep-home).
    homes: Path | None = None
    home_copy: tuple[Path, ...] = ()  # what each fresh home is seeded with (--home-copy), absolute
    jobs: int = 1  # groups run at once (--jobs)
    progress: Callable[[str], None] | None = None  # told a line as each group ends (--progress, or a tty)
    launch: Launcher | None = None  # None: spawn `command` (the seam above; never set from the command line)
    # The sandbox of the commands an agent runs (terminal/create): `[sandbox]` of ama's config file, writable in
    # the run's directories only (ama_acp/sandbox/).
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)

    @property
    def run_dirs(self) -> tuple[Path, ...]:
        return self.created or (self.workspace, self.scratch)

    @property
    def uses_model(self) -> bool:
        """Whether the agent was pointed at the suite's scripted model (then directives are obeyed)."""
        return bool(self.model_env) or self.model_port is not None
