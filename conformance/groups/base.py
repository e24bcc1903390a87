"""What a test group is: a name, the requirement ids it decides, and a coroutine that drives fresh agents.

Each group gets its own agent process (or several, each fresh: a group about `session/load` starts a second one
to load what the first stored). Nothing a group does can reach another group's agent, so one crash cannot
cascade. A group reports findings only for the ids it declares; the transcript checks
(`conformance/core/wire_checks.py`) run over every agent a group started.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ama_acp.client.errors import RpcError
from ama_conformance.core.agent import Agent, Policy
from ama_conformance.core.config import RunConfig
from ama_conformance.core.directives import directive_line
from ama_conformance.core.outcome import Checks
from ama_conformance.requirements.registry import Profile


class ModelView:
    """What a group may ask of the suite's scripted model (absent when the agent was not pointed at it)."""

    def __init__(self, requests: Callable[[], list[Any]]) -> None:
        self._requests = requests

    def bodies(self) -> list[dict[str, Any]]:
        out = []
        for req in self._requests():
            body = getattr(req, "body", None)
            if isinstance(body, dict):
                out.append(body)
        return out


@dataclass
class GroupContext:
    config: RunConfig
    env: dict[str, str]
    checks: Checks
    own: tuple[str, ...] = ()  # the ids the group itself declares (checks.ids adds the transcript checks')
    model: ModelView | None = None
    agents: list[Agent] = field(default_factory=list)
    # Every agent's connection is entered and left inside the group's own scopes (the runner's exit stack), so
    # a group that ends, fails or times out closes its agents in the order it opened them.
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    async def spawn(
        self,
        *,
        fs: bool = True,
        terminal: bool = True,
        capabilities: bool = True,
        permission: Policy = "allow",
    ) -> Agent:
        agent = Agent(self.config, self.env, fs=fs, terminal=terminal, capabilities=capabilities, permission=permission)
        self.agents.append(agent)
        await agent.start()
        self.stack.push_async_callback(agent.shutdown)
        return agent

    async def ready(self, **kwargs: Any) -> tuple[Agent, str]:
        """A fresh agent, initialized, with one session: the common start of a group. The steps are R36's
        and R33's, checked in their own groups; here their failure only blocks."""
        agent, sid, _ = await self.opened(**kwargs)
        return agent, sid

    async def opened(self, **kwargs: Any) -> tuple[Agent, str, dict[str, Any]]:
        """`ready()`, with the `session/new` result (its modes and config options)."""
        agent = await self.spawn(**kwargs)
        with self.checks.needs("R36"):
            await agent.initialize()
        with self.checks.needs("R33"):
            sid, result = await agent.new_session()
        return agent, sid, result

    async def sign_in(self, agent: Agent, methods: list[str], rid: str) -> tuple[str, RpcError | None] | None:
        """`authenticate` with the method the run names, else the first advertised one that needs no browser or
        person (core/sign_in.py): (the method, the error it got or None). None, and `rid` untested, when no
        method may be tried (the run names one not advertised; every one needs a person). A sign-in that hangs
        leaves `rid` untested and blocks the group: "sign-in could not complete", never the agent's failure."""
        method, why = agent.auth_method()
        if method is None:
            self.checks.untested(rid, f"sign-in could not complete: {why}")
            return None
        if method not in methods:
            self.checks.untested(rid, f"--auth-method {method!r} is not among the advertised {methods}")
            return None
        # A SignInNeeded (a sign-in that hangs) is the caller's `with checks.at(rid)`'s to record, as everywhere.
        return method, await agent.authenticate(method)

    def file(self, name: str, text: str) -> Path:
        """A file of this group in the session directory (names are per group: no two groups share one)."""
        path = self.config.workspace / f"{self.checks.group}-{name}"
        path.write_text(text, encoding="utf-8")
        return path

    def path(self, name: str) -> Path:
        return self.config.workspace / f"{self.checks.group}-{name}"

    def ask(self, verb: str, *args: str) -> str:
        """A prompt asking for `verb`: a plain sentence a real model can follow, and the directive line the
        suite's scripted model (and the fixtures) obey."""
        plain = {
            "reply": "Reply with exactly this text: {0}",
            "slow": "Write a very long essay, at least 5,000 words, about the history of text editors.",
            "read": "Read the file {0} with your file-reading tool and quote its first line.",
            "write": "Create the file {0} with your file-writing tool, containing exactly: {1}",
            "run": "Run this shell command with your command tool and report its output: {0}",
            "mcp": "Call the MCP tool {0} with the text 'conformance'.",
            "think": "Think it over step by step first, then reply in one short sentence. ({0})",
            "plan": "Write a one-step plan with your planning (todo) tool, with this step: {0}",
        }[verb]
        return plain.format(*args, "", "") + "\n" + directive_line(verb, *args)

    @property
    def slow_prompt(self) -> str:
        return self.config.cancel_prompt or self.ask("slow")


def transcript_messages(agent: Agent) -> list[tuple[str, dict[str, Any]]]:
    """(direction, message) for each line of `agent`'s transcript that is a JSON object, in order ("in": from the
    agent); any other line is R4's business."""
    out = []
    for entry in list(agent.conn.transcript):
        try:
            msg = json.loads(entry.raw)
        except ValueError:
            continue
        if isinstance(msg, dict):
            out.append((entry.direction, msg))
    return out


GroupFn = Callable[[GroupContext], Awaitable[None]]


@dataclass(frozen=True)
class Group:
    name: str
    ids: tuple[str, ...]
    run: GroupFn
    profile: Profile = Profile.ACP


GROUPS: list[Group] = []


def group(name: str, ids: tuple[str, ...], *, profile: Profile = Profile.ACP) -> Callable[[GroupFn], GroupFn]:
    """Register a group function under `name`, bound to the requirement ids it decides."""

    def register(fn: GroupFn) -> GroupFn:
        if any(g.name == name for g in GROUPS):
            raise ValueError(f"two groups named {name!r}")
        GROUPS.append(Group(name, ids, fn, profile))
        return fn

    return register
