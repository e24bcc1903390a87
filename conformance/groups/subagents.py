"""The subagents group: children an agent announces with `subagent_update` (the pinned UNSTABLE schema's
`SubagentUpdate`, for a client that advertises `clientCapabilities.subagents`).

It asks the agent to hand a task to a sub-agent (the `delegate` directive: the suite's scripted model calls the
agent's delegation tool — ama's `task` — asking the child to reply with a marker), twice: once for the suite's
normal client, which does not advertise `subagents` (R116.1: no `subagent_update` may come), and once for a
client that advertises `subagents: {}` (R115.1: each child announced before any update under its id; R123.1: a
child announced running is given a final state before the parent's prompt response).

Whether the agent delegated is read from the scripted model's requests (the child's own request carries the
marker's reply directive) or, for the client that opted in, from the announcements themselves. An agent that did
not delegate (no delegation tool, or a model of its own that chose not to) had nothing to announce: SKIPPED.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ama_conformance.core.agent import Agent
from ama_conformance.core.directives import Directive, directive_line, parse_directive
from ama_conformance.core.values import obj
from ama_conformance.groups.base import GroupContext, group
from ama_conformance.servers.model_dialects import prompt_and_results

PLAIN_MARK = "conformance-child-plain"  # the child's reply when the client did not opt in
OPTED_MARK = "conformance-child-opted"  # the child's reply when it did
NOT_DELEGATED = "the agent's model did not delegate (the agent has no delegation tool its model called)"
NO_SIGN = "no sign that the agent delegated (its own model may not have; run with --model-env)"


def _ask(mark: str) -> str:
    plain = f"Hand this task to a sub-agent with your task (delegation) tool: have it reply with exactly {mark}."
    return plain + "\n" + directive_line("delegate", mark)


def _child_ran(ctx: GroupContext, mark: str) -> bool | None:
    """Whether the scripted model got the child's request (the delegated reply directive as its prompt); None
    when the agent was not pointed at the scripted model."""
    if ctx.model is None:
        return None
    wanted = Directive("reply", text=mark)
    for body in ctx.model.bodies():
        for dialect in ("openai", "anthropic"):
            prompt, _ = prompt_and_results(dialect, body)
            if prompt is not None and parse_directive(prompt) == wanted:
                return True
    return False


@dataclass
class Children:
    """The children one transcript announced, read in order (indices are positions among the agent's lines)."""

    known: set[str]
    announced: dict[str, int] = field(default_factory=dict)  # child id -> where its first announcement came
    early: dict[str, int] = field(default_factory=dict)  # session id -> its first update, while not yet known
    states: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # child id -> (where, state) seen
    answered: int | None = None  # where the parent's prompt response came

    def read(self, agent: Agent, parent: str) -> Children:
        prompts: set[str] = set()
        for at, entry in enumerate(agent.conn.transcript):
            try:
                msg = obj(json.loads(entry.raw))
            except ValueError:
                continue  # a line that is not JSON is R4's
            if entry.direction == "out":
                if msg.get("method") == "session/prompt" and obj(msg.get("params")).get("sessionId") == parent:
                    prompts.add(json.dumps(msg.get("id")))
            elif "method" not in msg and json.dumps(msg.get("id")) in prompts:
                self.answered = at
            elif msg.get("method") == "session/update":
                self._update(at, obj(msg.get("params")))
        return self

    def _update(self, at: int, params: dict[str, Any]) -> None:
        sid, update = params.get("sessionId"), obj(params.get("update"))
        child = update.get("sessionId")
        if not isinstance(sid, str):
            return
        if update.get("sessionUpdate") == "subagent_update" and isinstance(child, str) and self.knows(sid):
            self.announced.setdefault(child, at)
            state = update.get("state")
            if isinstance(state, dict) and isinstance(state.get("state"), str):
                self.states.setdefault(child, []).append((at, state["state"]))
        elif not self.knows(sid):
            self.early.setdefault(sid, at)

    def knows(self, sid: str) -> bool:
        return sid in self.known or sid in self.announced

    def running(self) -> list[str]:
        """The children announced `running` at some point."""
        return [child for child, states in self.states.items() if any(s == "running" for _, s in states)]

    def still_running(self, child: str) -> bool:
        """Whether `child`'s last state before the parent's prompt response was `running`."""
        before = [s for at, s in self.states[child] if at < (self.answered or 0)]
        return before[-1:] == ["running"]


@group("subagents", ("R116.1", "R115.1", "R123.1"))
async def subagents(ctx: GroupContext) -> None:
    c = ctx.checks
    # The suite's normal client: no `subagents` in its capabilities.
    agent, sid = await ctx.ready()
    with c.needs("R103"):
        await agent.prompt(sid, _ask(PLAIN_MARK))
    with c.at("R116.1"):
        _none_unasked(ctx, "R116.1", agent)

    # A client that advertises `subagents: {}` (unstable), otherwise the same.
    opted = await ctx.spawn()
    opted.conn.options.extra_capabilities["subagents"] = {}
    with c.needs("R36"):
        await opted.initialize()
    with c.needs("R33"):
        parent, _ = await opted.new_session()
    with c.needs("R103"):
        await opted.prompt(parent, _ask(OPTED_MARK))
    seen = Children({parent}).read(opted, parent)
    with c.at("R115.1"):
        _announced_first(ctx, "R115.1", seen)
    with c.at("R123.1"):
        _ended_in_time(ctx, "R123.1", seen)


def _none_unasked(ctx: GroupContext, rid: str, agent: Agent) -> None:
    """R116.1: no subagent_update to a client that did not advertise `subagents`."""
    c = ctx.checks
    sent = [p for p in agent.conn.updates if obj(p.get("update")).get("sessionUpdate") == "subagent_update"]
    ran = _child_ran(ctx, PLAIN_MARK)
    if sent:
        c.failed(rid, f"{len(sent)} subagent_update(s) to a client without the capability: {sent[0]!r:.300}")
    elif ran:
        c.passed(rid, "the agent delegated and announced no child to a client that did not opt in")
    else:
        c.skip(rid, NO_SIGN if ran is None else NOT_DELEGATED)


def _announced_first(ctx: GroupContext, rid: str, seen: Children) -> None:
    """R115.1: each child announced before any update under its id."""
    c = ctx.checks
    late = {child: at for child, at in seen.early.items() if child in seen.announced}
    if late:
        child, at = next(iter(late.items()))
        c.failed(
            rid,
            f"an update for child {child!r} came before the subagent_update announcing it "
            f"(message {at + 1} of the transcript; announced at message {seen.announced[child] + 1})",
        )
    elif seen.announced:
        c.passed(rid, f"{len(seen.announced)} child session(s), each announced before its first update")
    else:
        c.skip(rid, _why_no_child(ctx))


def _why_no_child(ctx: GroupContext) -> str:
    ran = _child_ran(ctx, OPTED_MARK)
    if ran is None:
        return NO_SIGN
    return "the agent delegated but announced no child" if ran else NOT_DELEGATED


def _ended_in_time(ctx: GroupContext, rid: str, seen: Children) -> None:
    """R123.1: a child announced running is given a final state before the parent's prompt response."""
    running = seen.running()
    if not running or seen.answered is None:
        ctx.checks.skip(rid, "no child was announced running")
        return
    left = [child for child in running if seen.still_running(child)]
    ctx.checks.check(
        rid,
        not left,
        f"still running when the parent's prompt was answered: {left}"
        if left
        else f"{len(running)} child(ren) given a final state before the parent's prompt response",
    )
