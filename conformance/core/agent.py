"""`Agent`: one fresh process of the agent under test, driven by ama's ACP client (`ama_acp/client/`).

The client advertises exactly what a group asks for and serves nothing else: a call to a method it did not
advertise is answered -32601 and recorded (the transcript checks turn it into a failure of R131/R132/R138).
Permission requests are answered by the group's policy: allow, reject, or hold until the group lets go (a
cancel answers every held request `cancelled`, as a client must).
"""

from __future__ import annotations

import functools
import itertools
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import anyio

from ama_acp.client.confine import Access, within
from ama_acp.client.connection import CAPTURE, AgentProcess, ClientOptions, PendingRequest
from ama_acp.client.errors import AgentExited
from ama_acp.client.handlers import RpcError, choose_option
from ama_acp.client.process_group import end_group
from ama_conformance.core.config import RunConfig
from ama_conformance.core.outcome import SignInNeeded, TurnTimedOut
from ama_conformance.core.sign_in import agent_methods, choose

Policy = Literal["allow", "reject", "hold"]
TURN_KINDS = frozenset(
    {"user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"}
)

# What shows a turn is under way: not the echo of the prompt (`user_message_chunk`), which an agent sends before
# its model is asked.
_TURN_PROGRESS = TURN_KINDS - {"user_message_chunk"}

_barrier_ids = itertools.count(1)


class AgentFailure(Exception):
    """The agent answered something the step at hand cannot go on with (an error, a wrong type)."""


class TurnStalled(TurnTimedOut):
    """A prompt turn showed nothing in time (config.py `TurnWatch`): it cannot complete, which is no violation
    (NOT_TESTED with its words, as any turn that did not complete in time: core/outcome.py)."""


# Once a turn of the run has stalled, a later turn that shows nothing within this many seconds gives up too.
STALLED_AGAIN = 1.0


AUTH_REQUIRED = -32000
# The violation a request outside the run's directories is recorded as (wire_checks turns it into H1's FAIL).
OUTSIDE_RUN = "outside_run"


def _auth_required(exc: AgentFailure) -> bool:
    """Whether a failed request was answered auth_required: the agent wants sign-in first."""
    return isinstance(exc.__cause__, RpcError) and exc.__cause__.code == AUTH_REQUIRED


class Agent:
    def __init__(
        self,
        config: RunConfig,
        env: dict[str, str],
        *,
        fs: bool = True,
        terminal: bool = True,
        capabilities: bool = True,
        permission: Policy = "allow",
    ) -> None:
        self.config = config
        self.permission: Policy = permission
        self.capabilities_sent = capabilities
        self._release = anyio.Event()
        self.held: list[dict[str, Any]] = []  # permission requests received while holding
        self.permission_requests: list[dict[str, Any]] = []
        self.init: dict[str, Any] = {}
        self._group: int | None = None  # the agent's process group, until close() has ended it
        self.grace_note = ""  # R7's words when close() cut the exit grace short
        # Per prompt request id: where the transcript and the scripted model's requests were when it was sent.
        self._turn_marks: dict[Any, tuple[int, int, int]] = {}
        self.conn = AgentProcess(
            config.command,
            ClientOptions(
                fs=fs and capabilities,
                terminal=terminal and capabilities,
                permission=self._decide,
                file_gate=self._confined,
                terminal_gate=self._confined,
                # A command in the run's directories still writes nowhere else (ama_acp/sandbox/).
                sandbox=config.sandbox,
                sandbox_roots=tuple(str(d) for d in config.run_dirs),
            ),
            cwd=str(config.cwd),
            env=env,
            stderr=CAPTURE,
            # The embedding seam (conformance/core/config.py Launcher): the launcher starts the agent instead.
            launch=functools.partial(config.launch, list(config.command), dict(env), config.cwd)
            if config.launch is not None
            else None,
        )

    # --- lifecycle -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.conn.start()
        # The agent leads a process group of its own (AgentProcess starts it with start_new_session): whatever it
        # starts (MCP servers, a relaunched child, a shell) is in that group unless it left it on purpose.
        self._group = self._process_group()

    def _process_group(self) -> int | None:
        """The process group close() ends: the spawned agent's own; a launched agent's only when it leads one (an
        agent run inside the suite's own process has no pid and no group: ending one would end the suite)."""
        try:
            pid = self.conn.pid
        except RuntimeError:  # a launched agent without a process of its own
            return None
        if pid is None or self.config.launch is None:
            return pid
        try:
            return pid if os.getpgid(pid) == pid and pid != os.getpgid(0) else None
        except OSError:
            return None

    async def close(self) -> None:
        """Close stdin and wait (the exit grace, then terminate, then kill); then end whatever the agent left
        running in its process group (TERM, a grace, KILL). The transcript stays readable. Once an agent of this
        run has ignored EOF, the grace is a short one (config.py `ExitWatch`)."""
        exits, full = self.config.exits, self.config.timeouts.exit
        grace = exits.grace(full)
        try:
            await self.conn.close(timeout=grace)
            if self.conn.ended_by in ("terminated", "killed"):
                if grace < full:
                    self.grace_note = " (ended at once: it had ignored stdin EOF earlier in this run)"
                exits.ignored_eof = True
        finally:
            group, self._group = self._group, None
            if group is not None:
                with anyio.CancelScope(shield=True):
                    await end_group(group)

    async def shutdown(self) -> None:
        """close(), then stop the connection's reader tasks."""
        try:
            await self.close()
        finally:
            await self.conn.aclose()

    @property
    def stderr(self) -> str:
        return bytes(self.conn.stderr_tail).decode("utf-8", errors="replace")

    # --- requests ------------------------------------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        return await self.conn.request(method, params, timeout=timeout or self.config.timeouts.request)

    async def call(
        self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """A request whose result must be an object; an error response or another type is an AgentFailure."""
        try:
            result = await self.request(method, params, timeout)
        except RpcError as exc:
            raise AgentFailure(f"{method} answered error {exc.code}: {exc.message}") from exc
        if not isinstance(result, dict):
            raise AgentFailure(f"{method} answered {type(result).__name__}, not an object")
        return result

    async def error_of(self, method: str, params: Any, timeout: float | None = None) -> RpcError | None:
        """The error the agent answers `method` with, or None when it answers with a result."""
        try:
            await self.conn.request(method, params, timeout=timeout or self.config.timeouts.request)
        except RpcError as exc:
            return exc
        return None

    async def initialize(self, version: Any = 1) -> dict[str, Any]:
        params: dict[str, Any] = {"protocolVersion": version, "clientInfo": self.conn.options.client_info}
        if self.capabilities_sent:
            params["clientCapabilities"] = self.conn.options.capabilities()
        try:
            self.init = await self.call("initialize", params)
        except (TimeoutError, AgentExited) as exc:
            if version == 1:  # other versions are R37's business: an agent may rightly choke on 65535
                self._startup_failed(exc)
            raise
        return self.init

    def _startup_failed(self, exc: TimeoutError | AgentExited) -> None:
        """Tell the run that this agent cannot be initialized (silent, or dead before answering): the runner
        then starts no further group (conformance/core/config.py StartupWatch)."""
        if isinstance(exc, TimeoutError):
            reason = f"the agent did not answer initialize within {self.config.timeouts.request:g} s"
        else:
            code = self.conn.returncode if self.conn.returncode is not None else exc.returncode
            reason = "the agent exited before answering initialize" + (
                f" (exit code {code})" if code is not None else ""
            )
        self.config.startup.record(
            reason, exited=isinstance(exc, AgentExited), details=lambda: (self.conn.returncode, self.stderr)
        )

    def advertised(self, path: str) -> bool:
        """Whether the initialize result advertises the capability at `path` (e.g. `sessionCapabilities.resume`,
        `promptCapabilities.image`, `loadSession`, `authMethods.agent`). Absent, null and false mean no."""
        if path == "authMethods.agent":
            return bool(self.agent_auth_methods())
        node: Any = self.init.get("agentCapabilities")
        for part in path.split("."):
            if not isinstance(node, dict):
                return False
            node = node.get(part)
        return node is not None and node is not False

    def agent_auth_methods(self) -> list[str]:
        return [str(m["id"]) for m in agent_methods(self.init)]

    def auth_method(self) -> tuple[str | None, str]:
        """The auth method the suite may authenticate with (--auth-method, else the first advertised one that
        needs no browser or person: core/sign_in.py), or (None, why there is none)."""
        return choose(agent_methods(self.init), self.config.auth_method)

    async def authenticate(self, method: str) -> RpcError | None:
        """`authenticate` with `method`: the error it answered, or None. A sign-in that gets no answer in time
        (a browser it waits for) or whose agent dies raises SignInNeeded: it could not complete, which says
        nothing about the agent's protocol."""
        try:
            return await self.error_of("authenticate", {"methodId": method})
        except (TimeoutError, AgentExited) as exc:
            why = (
                f"no answer within {self.config.timeouts.request:g} s"
                if isinstance(exc, TimeoutError)
                else "the agent exited"
            )
            raise SignInNeeded(f"sign-in could not complete: authenticate {method!r} got {why}") from exc

    async def new_session(
        self, cwd: Path | None = None, mcp: list[dict[str, Any]] | None = None, extra: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """session/new (`extra`: more params, e.g. additionalDirectories); an agent that asks to sign in first is
        signed in once, as an editor would, and asked again."""
        params = {"cwd": str(cwd or self.config.workspace), "mcpServers": mcp or [], **(extra or {})}
        try:
            result = await self.call("session/new", params)
        except AgentFailure as exc:
            if not _auth_required(exc):
                raise
            # The agent asks to sign in first (ACP allows it): sign in once, as an editor would, and retry.
            await self.sign_in_once(exc)
            try:
                result = await self.call("session/new", params)
            except AgentFailure as again:
                if not _auth_required(again):
                    raise
                # Signed in, and still refused (gemini-cli's API-key method, with no key in its environment): a
                # sign-in the suite cannot give, never the agent's failure.
                raise SignInNeeded(f"session/new still needs sign-in after authenticate: {again}") from again
        sid = result.get("sessionId")
        if not isinstance(sid, str) or not sid:
            raise AgentFailure(f"session/new answered no session id: {result!r:.300}")
        self.conn.session_cwds[sid] = str(cwd or self.config.workspace)
        return sid, result

    async def sign_in_once(self, refused: AgentFailure) -> None:
        """Sign in once after `refused` (a session/new that answered auth_required), as an editor would: with
        `auth_method()`. SignInNeeded when that is not possible or did not succeed."""
        method, why = self.auth_method()
        if method is None:
            raise SignInNeeded(f"session/new needs sign-in; {why}: {refused}") from refused
        err = await self.authenticate(method)
        if err is not None:
            raise SignInNeeded(
                f"session/new needs sign-in; authenticate {method!r} answered {err.code}: {err.message}"
            ) from refused

    async def start_prompt(self, sid: str, prompt: str | list[dict[str, Any]]) -> PendingRequest:
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else prompt
        mark = (len(self.conn.updates), len(self.conn.requests_received), self.config.turns.model_requests())
        pending = await self.conn.start_request("session/prompt", {"sessionId": sid, "prompt": blocks})
        self._turn_marks[pending.id] = mark
        return pending

    async def finish(self, pending: PendingRequest, timeout: float | None = None) -> dict[str, Any]:
        limit = timeout or self.config.timeouts.prompt
        try:
            result = await self._turn_result(pending, limit)
        except TurnTimedOut:
            raise  # a stalled turn, with its own words
        except TimeoutError as exc:
            raise TurnTimedOut(f"the turn did not complete within {limit:g} s") from exc
        except RpcError as exc:
            raise AgentFailure(f"session/prompt answered error {exc.code}: {exc.message}") from exc
        if not isinstance(result, dict):
            raise AgentFailure(f"session/prompt answered {type(result).__name__}, not an object")
        return result

    async def _turn_result(self, pending: PendingRequest, limit: float) -> Any:
        """The prompt's result within `limit`, unless the turn stalls: it shows nothing (`_turn_shown`) within
        `Timeouts.stall` of being sent — or, once a turn of this run has stalled, within `STALLED_AGAIN` — and then
        TurnStalled says why, the same words for every turn of the run (config.py `TurnWatch`). A turn that shows
        anything gets the whole `limit`. Once turns stall, a group that waits for a turn to show it runs (before
        it cancels it) waits `STALLED_AGAIN` too, not `Timeouts.turn_start`: nothing will show."""
        mark = self._turn_marks.pop(pending.id, None)
        watch, stall = self.config.turns, self.config.timeouts.stall
        first = watch.stalled is None
        wait = stall if first else min(stall, STALLED_AGAIN)
        if mark is None or not stall or wait >= limit:
            return await pending.wait(limit)
        started = time.monotonic()

        def shown() -> bool:
            return pending.done or self._turn_shown(mark)

        # Re-checked as lines arrive, and once more at the end: a request to the model is no line.
        if not await self.wait_for(shown, wait) and not shown():
            if watch.stalled is None:
                watch.stalled = self._stall_reason(stall)
                timeouts = self.config.timeouts
                self.config.timeouts = replace(timeouts, turn_start=min(timeouts.turn_start, STALLED_AGAIN))
            raise TurnStalled(watch.stalled)
        return await pending.wait(max(0.0, limit - (time.monotonic() - started)))

    def _turn_shown(self, mark: tuple[int, int, int]) -> bool:
        """Whether anything of a turn has shown since `mark`: an update of a turn (a chunk, a tool call, a plan —
        not the commands or usage an agent sends by itself), a request of the agent's (a permission, a file), a
        request to the scripted model."""
        updates, requests, model = mark
        if self.config.turns.model_requests() > model or len(self.conn.requests_received) > requests:
            return True
        return any(
            isinstance(u := params.get("update"), dict) and u.get("sessionUpdate") in _TURN_PROGRESS
            for params in self.conn.updates[updates:]
        )

    def _stall_reason(self, stall: float) -> str:
        model = " and the suite's scripted model got no request" if self.config.uses_model else ""
        return (
            f"no prompt turn could complete: within {stall:g} s of session/prompt the agent sent nothing{model} "
            "(is its model reachable and signed in? see --model-env; --stall-timeout gives a slow model longer)"
        )

    async def prompt(self, sid: str, prompt: str | list[dict[str, Any]]) -> dict[str, Any]:
        return await self.finish(await self.start_prompt(sid, prompt))

    async def barrier(self) -> None:
        """A sync point: an extension request the agent must answer (with -32601, most likely). Whatever the
        agent sent in reply to earlier messages it read before this one has been received when it returns."""
        try:
            await self.conn.request(
                f"_conformance/barrier{next(_barrier_ids)}", {}, timeout=self.config.timeouts.request
            )
        except RpcError:
            pass  # any answer is a sync point; what it says is R15's business

    # --- waiting -------------------------------------------------------------------------------------------

    async def wait_for(self, condition: Callable[[], bool], timeout: float | None = None) -> bool:
        """Whether `condition` comes to hold within `timeout` (re-checked as messages arrive)."""
        try:
            await self.conn.wait_for(condition, timeout or self.config.timeouts.request)
        except TimeoutError:
            return False
        return True

    def mark(self) -> int:
        """A position in the updates, for `updates_since`."""
        return len(self.conn.updates)

    def updates_since(self, mark: int, sid: str, kinds: frozenset[str] | None = None) -> list[dict[str, Any]]:
        out = []
        for params in self.conn.updates[mark:]:
            update = params.get("update")
            if params.get("sessionId") == sid and isinstance(update, dict):
                if kinds is None or update.get("sessionUpdate") in kinds:
                    out.append(update)
        return out

    async def turn_started(self, sid: str, mark: int) -> bool:
        """Whether the turn shows that it runs (an update of the turn, or a permission request) in time."""
        return await self.wait_for(
            lambda: bool(self.updates_since(mark, sid, TURN_KINDS)) or bool(self.held),
            self.config.timeouts.turn_start,
        )

    # --- confinement ---------------------------------------------------------------------------------------

    async def _confined(self, access: Access) -> bool:
        """fs/* and terminals are served inside the directories the suite created for the run; anything else is
        refused (the agent gets an error) and recorded, to be reported as a finding."""
        if within(access.path, [str(d) for d in self.config.run_dirs]):
            return True
        what = (
            f"terminal/create {access.command} in {access.path}" if access.command else f"{access.method} {access.path}"
        )
        self.conn.record_violation(OUTSIDE_RUN, f"{what[:500]}: outside the run's directories, refused")
        return False

    # --- permission ----------------------------------------------------------------------------------------

    async def _decide(self, params: dict[str, Any]) -> str | None:
        self.permission_requests.append(params)
        options = params.get("options")
        options = options if isinstance(options, list) else []
        if self.permission == "hold":
            self.held.append(params)
            await self._release.wait()  # a cancel of the session cancels this wait: the answer is `cancelled`
            return None
        return choose_option(options, "allow" if self.permission == "allow" else "reject")

    def release_held(self) -> None:
        self._release.set()
