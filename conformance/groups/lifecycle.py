"""Groups about the connection: initialize and version negotiation, authentication, session creation,
extension methods and malformed input."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ama_acp.client.connection import TranscriptEntry
from ama_acp.client.handlers import RpcError
from ama_conformance.core.agent import Agent, AgentFailure
from ama_conformance.core.outcome import describe
from ama_conformance.core.values import arr
from ama_conformance.groups.base import GroupContext, group


def _is_version(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 65535


async def _observed(agent: Agent, what: str, method: str, params: dict[str, Any]) -> str:
    """What the agent answered `method`, as an observation: an error, a result, or no answer at all."""
    try:
        err = await agent.error_of(method, params)
        return f"{what}: {'error ' + str(err.code) if err else 'a result'}"
    except Exception as exc:
        return f"{what}: no answer ({describe(exc)})"


@group("initialize", ("R36", "R41", "R42", "R44"))
async def initialize(ctx: GroupContext) -> None:
    c = ctx.checks
    # Before initialize: the spec says nothing (R44), so what the agent does is recorded, not judged — no answer
    # at all included (its process may even have ended): it blocks nothing, R36 is tested on a fresh process.
    early = await ctx.spawn()
    before = await _observed(
        early, "session/new before initialize", "session/new", {"cwd": str(ctx.config.workspace), "mcpServers": []}
    )
    await early.close()
    agent = await ctx.spawn()
    with c.at("R36"):
        init = await agent.initialize()
        c.check(
            "R36",
            _is_version(init.get("protocolVersion")) and isinstance(init.get("agentCapabilities", {}), dict),
            f"protocolVersion {init.get('protocolVersion')!r}, agentCapabilities "
            f"{'present' if 'agentCapabilities' in init else 'absent (all defaults)'}",
        )
    info = init.get("agentInfo")
    c.check(
        "R41",
        isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str),
        f"agentInfo {info!r:.200}",
    )
    methods = arr(init.get("authMethods"))
    terminal = [m.get("id") for m in methods if isinstance(m, dict) and m.get("type") == "terminal"]
    c.check(
        "R42",
        not terminal,
        f"terminal auth methods offered to a client without auth.terminal: {terminal}"
        if terminal
        else "no terminal auth method (none asked for)",
    )
    second = await _observed(
        agent, "a second initialize", "initialize", {"protocolVersion": 1, "clientCapabilities": {}}
    )
    c.passed("R44", f"{before}; {second}")


def _version_problem(asked: int, answer: Any) -> str | None:
    """What is wrong with `answer` to an initialize that asked for version `asked`, if anything."""
    if not _is_version(answer):
        return f"asked {asked}, answered {answer!r}, not an integer version"
    if asked == 1 and answer != 1:
        return f"asked 1 (a version every v1 agent supports), answered {answer}"
    if asked != 1 and answer not in (asked, 1):
        return f"asked {asked}, answered {answer}: neither the version asked nor the agent's latest (1)"
    if asked in (0, 65535) and answer == asked:
        # 2 may one day be supported and then is rightly echoed; 0 was a pre-release and 65535 exists nowhere.
        return f"asked {asked}, answered {asked}: an echo of a version no agent supports"
    return None


async def _negotiated(ctx: GroupContext, asked: int) -> tuple[str, str | None]:
    """(what a fresh process answered an initialize asking for `asked`, the problem with it if any)."""
    agent = await ctx.spawn()
    try:
        # No answer at all (silence, a dead process) is initialize's own failure, R36's; an error answer to a
        # version the agent does not support is a failed negotiation, R37's (1 it must support: R36 again).
        with ctx.checks.needs("R36"):
            try:
                answer = (await agent.initialize(asked)).get("protocolVersion")
            except AgentFailure as exc:
                if asked == 1 or not isinstance(exc.__cause__, RpcError):
                    raise
                cause = exc.__cause__
                return f"{asked}→error", f"asked {asked}, answered {cause.code} ({cause.message}), not a result"
    finally:
        await agent.close()
    return f"{asked}→{answer!r}", _version_problem(asked, answer)


@group("versions", ("R37",))
async def versions(ctx: GroupContext) -> None:
    """One fresh process per requested version: a v1 agent answers 1 to all of them."""
    seen, bad = [], []
    for asked in (1, 0, 2, 65535):
        what, problem = await _negotiated(ctx, asked)
        seen.append(what)
        if problem is not None:
            bad.append(problem)
    ctx.checks.check("R37", not bad, "; ".join(bad) or ", ".join(seen))


@group("auth", ("R47", "R48", "R50"))
async def auth(ctx: GroupContext) -> None:
    c = ctx.checks
    agent = await ctx.spawn()
    with c.needs("R36"):
        await agent.initialize()
    methods = agent.agent_auth_methods()
    if not methods:
        for rid in ("R47", "R48"):
            c.skip(rid, "no agent-type auth method advertised")
    else:
        with c.at("R48"):
            signed = await ctx.sign_in(agent, methods, "R48")
            if signed is not None:
                _judge_sign_in(ctx, "R48", *signed)
        with c.at("R47"):
            err = await agent.error_of("authenticate", {"methodId": "acp-conformance-no-such-method"})
            c.check("R47", err is not None, "an unknown method id gets " + (f"error {err.code}" if err else "a result"))
    if not agent.advertised("auth.logout"):
        c.skip("R50", "auth.logout not advertised")
    else:
        with c.at("R50"):
            result = await agent.call("logout", {})
            c.check("R50", not {k for k in result if k != "_meta"}, f"logout answered {result!r:.200}")


def _judge_sign_in(ctx: GroupContext, rid: str, method: str, err: RpcError | None) -> None:
    if err is None:
        ctx.checks.passed(rid, f"authenticate {method!r} answered {{}}")
        return
    # ACP defines only authenticate's success: an error says the sign-in needs what the suite cannot give (a
    # browser, a person, a key), so R48 could not be tested — never a failure.
    ctx.checks.untested(
        rid,
        f"authenticate {method!r} answered error {err.code}: {err.message} (a sign-in the suite "
        "cannot give: configure the agent, or name another method with --auth-method)",
    )


@group("sessions", ("R33", "R53", "R56", "R65"))
async def sessions(ctx: GroupContext) -> None:
    c = ctx.checks
    agent = await ctx.spawn()
    with c.needs("R36"):
        await agent.initialize()
    with c.at("R33"):
        first, _ = await agent.new_session()
        c.passed("R33", "session/new works")
    with c.at("R53"):
        second, _ = await agent.new_session()
        c.check("R53", first != second, f"two sessions: {first!r} and {second!r}")
    with c.at("R56"):
        err = await agent.error_of("session/new", {"cwd": "relative/dir", "mcpServers": []})
        c.check("R56", err is not None, "a relative cwd gets " + (f"error {err.code}" if err else "a session"))
    if not agent.advertised("sessionCapabilities.additionalDirectories"):
        c.skip("R65", "sessionCapabilities.additionalDirectories not advertised")
        return
    with c.at("R65"):
        for bad in (["relative/dir"], [""]):
            err = await agent.error_of(
                "session/new", {"cwd": str(ctx.config.workspace), "mcpServers": [], "additionalDirectories": bad}
            )
            c.check(
                "R65",
                err is not None,
                f"additionalDirectories {bad} gets " + (f"error {err.code}" if err else "a session"),
            )


@group("extensions", ("R15", "R16", "R22"))
async def extensions(ctx: GroupContext) -> None:
    c = ctx.checks
    agent = await ctx.spawn()
    with c.needs("R36"):
        await agent.initialize()
    with c.at("R15"):
        err = await agent.error_of("_acp_conformance/unknown", {})
        c.check(
            "R15",
            err is not None and err.code == -32601,
            "an unknown _ request gets " + (f"error {err.code}" if err else "a result"),
        )
    with c.at("R16"):
        await agent.conn.notify("_acp_conformance/notice", {"x": 1})
        await agent.conn.notify("acp_conformance/unknown_notification", {})
        await agent.barrier()
        c.passed("R16", "unknown notifications changed nothing; the agent answered the next request")
    with c.at("R22"):
        pending = await agent.conn.start_request("_acp_conformance/answered", {})
        try:
            await pending.wait(ctx.config.timeouts.request)
        except Exception as exc:  # an error answer is still an answer; only a missing one is a problem here
            if isinstance(exc, TimeoutError):
                raise
        await agent.conn.notify("$/cancel_request", {"requestId": pending.id})
        await agent.barrier()
        c.passed("R22", "cancelling an answered request brought no second response (R12 checks the wire)")


def batch_replies(entries: Sequence[TranscriptEntry]) -> list[str]:
    """What the agent wrote in answer to a batch: its lines after the batch, less its responses to the suite's
    own later requests (the barrier's answer is the barrier's, not the batch's)."""
    ours: set[str] = set()
    for e in entries:
        if e.direction == "out":
            msg = _parsed(e.raw)
            if isinstance(msg, dict) and "method" in msg and "id" in msg:
                ours.add(json.dumps(msg["id"]))
    replies = []
    for e in entries:
        if e.direction != "in":
            continue
        msg = _parsed(e.raw)
        if isinstance(msg, dict) and "method" not in msg and json.dumps(msg.get("id")) in ours:
            continue
        replies.append(e.raw[:120])
    return replies


def _parsed(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


@group("malformed", ("R8", "R17", "R17.1", "R17.2", "R17.3"))
async def malformed(ctx: GroupContext) -> None:
    c = ctx.checks
    agent = await ctx.spawn()
    with c.needs("R36"):
        await agent.initialize()
    conn = agent.conn

    async def null_error_after(line: str, request_id: int | None = None) -> int | None:
        """The code of the error the agent answers `line` with (under id null, or `request_id`)."""
        mark = len(conn.transcript)
        await conn.send_raw(line)

        def answered() -> int | None:
            for e in conn.transcript[mark:]:
                if e.direction != "in":
                    continue
                try:
                    msg = json.loads(e.raw)
                except ValueError:
                    continue
                if (
                    isinstance(msg, dict)
                    and "id" in msg
                    and msg["id"] in (None, request_id)
                    and isinstance(msg.get("error"), dict)
                ):
                    code = msg["error"].get("code")
                    return code if isinstance(code, int) else 0
            return None

        await agent.barrier()  # the agent reads in order: its answer to the line, if any, came before this one's
        return answered()

    with c.at("R17"):
        code = await null_error_after('{"jsonrpc": "2.0", "id": 77, "method": ')
        c.check(
            "R17",
            code == -32700,
            f"a line that is not JSON gets {code if code is not None else 'no answer'}; the agent still serves",
        )
    with c.at("R17.1"):
        # JSON-RPC 2.0's own example of an invalid request (a method that is not a string), with an id: without
        # one it is an (invalid) notification, which an agent may rightly leave unanswered (R13).
        code = await null_error_after('{"jsonrpc": "2.0", "id": 79, "method": 1, "params": "bar"}', 79)
        c.check(
            "R17.1",
            code == -32600,
            f"a JSON object that is no valid request gets {code if code is not None else 'no answer'}",
        )
    with c.at("R8"):
        mark = len(conn.transcript)
        await conn.send_raw('[{"jsonrpc": "2.0", "id": 78, "method": "_acp_conformance/in_batch"}]')
        await agent.barrier()
        replies = batch_replies(conn.transcript[mark:])
        c.passed("R8", f"a one-element batch got: {replies[:2]}" if replies else "a one-element batch got no answer")
    with c.at("R17.2"):
        err = await agent.error_of("acp_conformance/no_such_method", {})
        c.check(
            "R17.2",
            err is not None and err.code == -32601,
            "an unknown method gets " + (f"error {err.code}" if err else "a result"),
        )
    with c.at("R17.3"):
        # session/new, not session/prompt: a turn is R103's business, and this must hold for any agent.
        err = await agent.error_of("session/new", {"mcpServers": []})
        err2 = await agent.error_of("session/new", {"cwd": 5, "mcpServers": "none"})
        codes = [e.code if e else None for e in (err, err2)]
        c.check(
            "R17.3", codes == [-32602, -32602], f"session/new without cwd, and with params of wrong types, get {codes}"
        )
    with c.needs("R33"):
        await agent.new_session()  # still serving after all of it
