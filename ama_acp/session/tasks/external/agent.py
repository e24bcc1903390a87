"""A task carried out by an external ACP agent (`[agents.NAME] command = …`, issue 28 point 2): session/tasks/
worker.py `TaskWorker`, run by the runner like a task of ama's own loop.

ama starts the agent through its own ACP client (client/connection.py `AgentProcess`, the agent the leader of
a process group of its own), initializes it, opens a session in the parent's cwd (no MCP servers), sends the task
as one prompt and returns the text of that turn's `agent_message_chunk`s as the task call's result. What the
agent asks of its client is answered as the parent session answers its own tools (session/tasks/external/
requests.py); terminals are offered when the editor offers them, and forwarded there (session/tasks/external/
terminals.py). Its `usage_update`s are its own figures: context used and size, and its cumulative cost (USD only;
any other currency is not added up) — a figure it never reports stays unknown, never 0. Its cost joins the
parent's; an agent that reports none makes the parent's cost unknown, as an unpriced request does.

The program is found as every program ama starts by name (tools/programs.py): never in a relative, empty or
in-workspace PATH entry, and it runs with that PATH filtered the same way (unless its own `env` sets PATH).

Whatever way the task ends — its answer, a failure, `[tasks] timeout`, the parent's cancel or close, ama's exit
(which cancels every turn) — the agent is sent `session/cancel` if its turn still runs, given `STOP_GRACE` seconds,
its stdin closed, and its whole process group ended, with every process that carries the task's marker in its
environment (tools/proctree.py, as for run_command): what left the group (`setsid`, a daemon) ends too.

What a flood of it can make ama hold is bounded (docs/errors.md "An external agent's limits"): the connection keeps
no history, its answer is cut at `ANSWER_CHARS`, its lines at `MAX_LINES`, what waits for the editor at the view's
bound; the person is told once per task when a bound is reached.
"""

from __future__ import annotations

import io
import logging
import os
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import anyio

from ama_acp.client.process_group import end_group
from ama_acp.config import AgentConfig, Config
from ama_acp.conversation.messages import AssistantMessage, Message, TextPart, Usage, UserMessage
from ama_acp.redact import redact
from ama_acp.rpc.dispatch import JSONObject
from ama_acp.secrets import is_secret, register_secret_values
from ama_acp.session.facets import Rooted
from ama_acp.session.store import entries as en
from ama_acp.session.tasks.call_view import TEXT_SHOWN
from ama_acp.session.tasks.external.requests import ExternalParent, ExternalRequests
from ama_acp.session.tasks.external.terminals import ExternalTerminals
from ama_acp.session.tasks.external.updates import ID_CHARS, MAX_TASK_COST_USD, decode_update
from ama_acp.session.tasks.external.view import ShowsExternal
from ama_acp.session.tasks.record import ExternalTaskRecord
from ama_acp.session.tasks.worker import TaskParent
from ama_acp.tools.base import ToolError
from ama_acp.tools.proctree import MARKER_VAR, marked_pids, new_marker, signal_marked
from ama_acp.wire.warning import warning

if TYPE_CHECKING:
    from ama_acp.client.connection import AgentProcess, PendingRequest

log = logging.getLogger(__name__)

STOP_GRACE = 1.0  # seconds an agent has to end its turn after session/cancel, and to exit after its stdin closed
START_TIMEOUT = 30.0  # initialize and session/new, each (within `[tasks] timeout`)
STDERR_SHOWN = 600  # characters of a dead agent's stderr in the failure's reason
# Bounds on what a hostile agent can make ama hold: the answer's characters, the tool-call lines kept.
ANSWER_CHARS = 4_000_000
MAX_LINES = 1000


class ExternalTaskParent(ExternalParent, TaskParent, Rooted, Protocol):
    """What an external agent's task needs of its session (session/live.py `Session`)."""


class ExternalWorker:
    """One task carried out by an external agent, its process started and ended with it."""

    def __init__(
        self,
        config: Config,
        parent: ExternalTaskParent,
        record: ExternalTaskRecord,
        spec: AgentConfig,
        prompt: str,
        view: ShowsExternal,
        terminals: bool = False,
        notices: bool = False,
    ):
        assert spec.command is not None
        self._cfg = config
        self._p = parent
        self.record = record
        self._spec = spec
        self._prompt = prompt
        # The task call's content, or a session of its own (subagents: session/tasks/external/view.py).
        self.view = view
        self._requests = ExternalRequests(parent, record.id, record.agent, view.subagent)
        # The editor's terminals, forwarded (session/tasks/external/terminals.py), only when the editor offers them.
        self._terminals = ExternalTerminals(parent, self._requests, record.agent) if terminals else None
        self._conn: AgentProcess | None = None
        self._answer = io.StringIO()  # one buffer: a flood of one-character chunks is not a million strings
        self._answer_chars = 0
        self._changed = anyio.Event()
        self._pending: PendingRequest | None = None  # the prompt, while the agent's turn runs
        # In the environment of the agent and of all it starts: what is left of them at the end is found by it.
        self._marker = new_marker()
        self._notices = notices  # the editor shows `notice`s (else a limit is told in an agent message)
        self._told: set[str] = set()  # the limits the person was told about (once each per task)
        self._to_tell: list[str] = []  # told by the progress pump (the reader that hits a limit cannot await)

    async def work(self) -> str:
        try:
            self._conn = self._connection()
            return await self._converse(self._conn, self._prompt)
        finally:
            self._bill_parent()  # no await: a cancel cannot cut it short

    def why_failed(self, exc: Exception) -> str:
        from ama_acp.client.errors import AgentExited, AgentStartError, RpcError

        if isinstance(exc, AgentStartError):
            return f"The external agent could not start: {exc}"
        if isinstance(exc, AgentExited):
            code = f" (exit code {exc.returncode})" if exc.returncode is not None else ""
            return f"The external agent exited before it answered{code}.{self._stderr()}"
        if isinstance(exc, RpcError):
            return f"The external agent answered with an error: {exc.message}"
        if isinstance(exc, TimeoutError):
            return f"The external agent did not answer within {START_TIMEOUT:g} s."
        if isinstance(exc, ToolError):
            return str(exc)
        # A bug of ours or a broken pipe: the call fails with the reason, the session lives.
        return f"The external agent could not run: {type(exc).__name__}: {exc}"

    def fault(self, stop: str) -> str | None:
        return None if self.answer() else f"The external agent ended without an answer (it stopped: {stop})."

    def answer(self) -> str:
        """The text of the agent's turn so far (its answer once the task ended)."""
        return self._answer.getvalue().strip()

    def kept(self) -> list[Message]:
        """Its conversation is its agent's: ama keeps what it saw of it, the task it sent and the answer."""
        seen: list[Message] = [UserMessage(content=[TextPart(self._prompt)])]
        if answer := self.answer():
            seen.append(AssistantMessage(content=[TextPart(answer)], model=self.record.model))
        return seen

    def _connection(self) -> AgentProcess:
        from ama_acp.client.connection import CAPTURE, AgentProcess, ClientOptions

        spec = self._spec
        assert spec.command is not None
        env = _environment(spec, self._marker)
        program = _program(spec, env, self._p.cwd, self._p.tool_ctx.policy.roots)
        conn = AgentProcess(
            [program, *(spec.args or [])],
            # Terminals only when the editor offers them (ama forwards them there, never runs its own). Permission
            # requests, fs/* and terminal/* are answered by ama's handlers (set below), never by the client's own.
            # No history: what it sends is read into the record and the view, under their bounds, and not kept.
            ClientOptions(
                fs=True,
                terminal=self._terminals is not None,
                permission="cancel",
                history=False,
                confined_terminals=self._p.tool_ctx.terminals_confined,  # terminals.py wraps them, or the editor
            ),
            cwd=self._p.cwd,
            env=env,
            stderr=CAPTURE,
            on_update=self._on_update,
        )
        conn.set_handler("session/request_permission", self._requests.request_permission)
        conn.set_handler("fs/read_text_file", self._requests.read_text_file)
        conn.set_handler("fs/write_text_file", self._requests.write_text_file)
        if (t := self._terminals) is not None:
            conn.set_handler("terminal/create", t.create)
            conn.set_handler("terminal/output", t.output)
            conn.set_handler("terminal/wait_for_exit", t.wait_for_exit)
            conn.set_handler("terminal/kill", t.kill)
            conn.set_handler("terminal/release", t.release)
        return conn

    async def _converse(self, conn: AgentProcess, prompt: str) -> str:
        """The agent's one turn on the task: its stop reason. The agent is stopped however this ends.

        The connection lives in a shielded scope of its own (its reader included): a cancel from outside — the
        parent's cancel or close, ama's exit, `[tasks] timeout` — ends the agent's turn with `session/cancel`
        first, and the agent's answer to it must still be read. The cancel reaches the turn through `turn`."""
        outcome: list[str | Exception] = []
        turn = anyio.CancelScope()
        done = anyio.Event()

        async def shielded() -> None:
            try:
                with anyio.CancelScope(shield=True):
                    outcome.append(await self._connected(conn, prompt, turn))
            except Exception as exc:  # raised after the group: a group would wrap it in an ExceptionGroup
                outcome.append(exc)
            finally:
                done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(shielded)
            try:
                await done.wait()
            except anyio.get_cancelled_exc_class():
                turn.cancel()  # the agent's turn stops; the group waits for the agent to be stopped
                raise
        result = outcome[0]
        if isinstance(result, Exception):
            raise result
        return result

    async def _connected(self, conn: AgentProcess, prompt: str, turn: anyio.CancelScope) -> str:
        await conn.start()
        pgid = conn.pid  # the agent leads its own process group
        try:
            error: Exception | None = None
            result: JSONObject | None = None
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._show_progress)
                with turn:
                    try:
                        result = await self._turn(conn, prompt)
                    except Exception as exc:
                        error = exc
                tg.cancel_scope.cancel()
            if error is not None:
                raise error
            if result is None:
                return "cancelled"
            await self.view.show()  # its last lines and figures, which the pump may not have sent yet
            stop = result.get("stopReason")
            self._take_usage(result.get("usage"))
            return stop if isinstance(stop, str) else "end_turn"
        finally:
            with anyio.move_on_after(STOP_GRACE):  # a limit reached at the very end, which the pump did not tell
                await self._tell()
            try:
                await self._stop(conn, self._pending)
                if self._terminals is not None:  # what it left open in the editor is its task's, and ends with it
                    await self._terminals.close()
            finally:
                await conn.aclose()
                async with anyio.create_task_group() as tg:  # its group and what left it, in one grace
                    tg.start_soon(end_group, pgid, STOP_GRACE)
                    tg.start_soon(_end_marked, self._marker, STOP_GRACE)

    async def _turn(self, conn: AgentProcess, prompt: str) -> JSONObject:
        await conn.initialize(timeout=START_TIMEOUT)
        opened = await conn.new_session(self._p.cwd, [], timeout=START_TIMEOUT)
        sid = opened.get("sessionId")
        if not isinstance(sid, str) or not sid:
            raise ToolError("The external agent opened no session (session/new gave no sessionId).")
        self._requests.session_id = sid
        self.record.prompts += 1
        self._pending = await conn.start_request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": prompt}]}
        )
        result = await self._pending.wait()
        self._pending = None
        return result if isinstance(result, dict) else {}

    async def _stop(self, conn: AgentProcess, pending: PendingRequest | None) -> None:
        """session/cancel to a turn still running, a grace to end it, then its stdin closed, a grace to exit, and
        TERM / KILL (AgentProcess.close)."""
        sid = self._requests.session_id
        if pending is not None and sid is not None and not conn.exited:
            try:
                await conn.cancel(sid)
                with anyio.move_on_after(STOP_GRACE):
                    await pending.wait()
            except Exception:  # it went away (AgentExited) or answered an error: it is ended below all the same
                pass
        await conn.close(timeout=STOP_GRACE)

    # --- what the agent reports ------------------------------------------------------------------------

    def _on_update(self, params: JSONObject) -> None:
        if params.get("sessionId") != self._requests.session_id or self._requests.session_id is None:
            return
        update = params.get("update")
        if not isinstance(update, dict):
            return
        forwarded = decode_update(update)  # re-built from typed values, or None (never forwarded as it came)
        if forwarded is not None and not self.view.take(forwarded):
            self._limit("updates", "its updates past what waits for the editor were dropped (a flood)")
        kind = update.get("sessionUpdate")
        read = _READERS.get(kind) if isinstance(kind, str) else None
        if read is not None:
            read(self, update)
        elif forwarded is None:
            return
        self._changed.set()

    def _take_text(self, update: JSONObject) -> None:
        content = update.get("content")
        if isinstance(content, dict) and content.get("type") == "text" and isinstance(content.get("text"), str):
            text = str(content["text"])
            room = ANSWER_CHARS - self._answer_chars
            if room < len(text):  # past the bound the rest is dropped: the result is cut to the window later anyway
                self._limit("answer", f"its answer past {ANSWER_CHARS:,} characters was dropped")
            if room > 0:
                self._answer.write(text[:room])
                self._answer_chars += min(len(text), room)
            self.record.text = (self.record.text[-2 * TEXT_SHOWN :] + text[-2 * TEXT_SHOWN :])[-2 * TEXT_SHOWN :]

    def _take_tool_call(self, update: JSONObject) -> None:
        call_id, title = update.get("toolCallId"), update.get("title")
        r = self.record
        if not isinstance(call_id, str) or not isinstance(title, str) or len(call_id) > ID_CHARS or call_id in r.calls:
            return
        if len(r.calls) >= MAX_LINES:
            self._limit("lines", f"its tool calls past {MAX_LINES:,} are not listed")
            return
        r.call_started(call_id, title)

    def _take_tool_call_update(self, update: JSONObject) -> None:
        call_id, status = update.get("toolCallId"), update.get("status")
        if isinstance(call_id, str) and status in ("completed", "failed"):
            self.record.call_ended(call_id, status == "completed")

    def _take_usage_update(self, update: JSONObject) -> None:
        used, size = update.get("used"), update.get("size")
        if _count(used) and _count(size):
            assert isinstance(used, int) and isinstance(size, int)
            self.record.context_used, self.record.context_size = used, size
        cost = update.get("cost")
        if isinstance(cost, dict):
            amount = cost.get("amount")
            usd = cost.get("currency") == "USD" and isinstance(amount, int | float) and not isinstance(amount, bool)
            if usd and 0 <= float(str(amount)) <= MAX_TASK_COST_USD:
                self.record.cost_usd = float(str(amount))
            else:  # a cost ama cannot add to a USD total, or cannot believe of one task, is not known in USD
                self.record.cost_usd = None
                if usd:
                    self._limit(
                        "cost",
                        f"it reported a cost past ${MAX_TASK_COST_USD:,.0f}, more than ama believes of one task: "
                        "its cost is unknown",
                    )

    def _take_usage(self, usage: object) -> None:
        if isinstance(usage, dict) and _count(total := usage.get("totalTokens")):
            assert isinstance(total, int)
            self.record.tokens = total

    async def _show_progress(self) -> None:
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            await self.view.show()
            await self._tell()

    def _limit(self, key: str, what: str) -> None:
        """A bound on what the agent sends was reached: the person is told once per task (by the pump)."""
        if key in self._told:
            return
        self._told.add(key)
        log.warning("external agent %s, task %s: %s", self.record.agent, self.record.id, what)
        self._to_tell.append(f"The external agent `{self.record.agent}` sent more than ama keeps: {what}.")
        self._changed.set()

    async def _tell(self) -> None:
        """What `_limit` noted, as a `notice` on the parent session, else an agent message there."""
        while self._to_tell:
            text = self._to_tell.pop(0)
            try:
                await self._p.send(warning(self._notices, "External agent", text))
            except Exception as exc:  # the connection is going away: the log has it
                log.info("a limit of %s was not told: %s", self.record.id, type(exc).__name__)

    # --- the end ---------------------------------------------------------------------------------------

    def _bill_parent(self) -> None:
        """The agent's cost joins the parent's (unknown if it reported none) and is stored with it."""
        if self.record.prompts == 0:
            return  # it never got the task: nothing was billed
        ctx = self._p.ctx
        ctx.billing.add_task_cost(self.record.cost_usd)
        self._p.persist(
            en.UsageEntry(
                model_id=self.record.model,
                usage=Usage(total=self.record.tokens),
                cost=self.record.cost_usd,
                purpose="task",
                meter=ctx.meter_state(),
                billing=ctx.billing_state(),
            )
        )

    def _stderr(self) -> str:
        conn = self._conn
        if conn is None or not conn.stderr_tail:
            return ""
        tail = redact(bytes(conn.stderr_tail).decode("utf-8", errors="replace")).strip()[-STDERR_SHOWN:]
        shown = "".join(c if c.isprintable() or c == "\n" else "?" for c in tail)
        return f" Its last words (stderr):\n{shown}" if shown else ""


# What the record takes of each kind of the agent's updates (its answer, its lines, its figures).
_READERS: dict[str, Callable[[ExternalWorker, JSONObject], None]] = {
    "agent_message_chunk": ExternalWorker._take_text,
    "tool_call": ExternalWorker._take_tool_call,
    "tool_call_update": ExternalWorker._take_tool_call_update,
    "usage_update": ExternalWorker._take_usage_update,
}


def _environment(spec: AgentConfig, marker: str) -> dict[str, str]:
    """ama's environment minus every credential (the rule for commands), plus the agent's own `env`, plus the
    task's marker (last: its `env` cannot take it away). The values of its secret-named variables are registered
    as secrets: redacted wherever ama writes text."""
    from ama_acp.tools.workspace import command_env

    env = command_env()
    given = spec.env or {}
    register_secret_values(v for k, v in given.items() if is_secret(k))
    env.update(given)
    env[MARKER_VAR] = marker
    return env


def _program(spec: AgentConfig, env: dict[str, str], cwd: str, roots: list[str]) -> str:
    """The agent's program by absolute path, found as every program ama starts (tools/programs.py: a bare name
    only in absolute PATH entries outside the workspace; a path with `/` as the person configured it), and `env`'s
    PATH filtered the same way, so that what it starts by name is not the project's either — unless its own `env`
    sets PATH, which is the person's and passed as given. Raises AgentStartError with the reason."""
    from ama_acp.client.errors import AgentStartError
    from ama_acp.tools.programs import find_program, safe_path

    assert spec.command is not None
    workspace = (*roots, cwd)
    found = find_program(spec.command, workspace_roots=workspace, cwd=cwd, path=env.get("PATH", os.defpath))
    if found.path is None:
        raise AgentStartError(found.why_not())
    if "PATH" not in (spec.env or {}):
        env["PATH"] = safe_path(env.get("PATH", os.defpath), workspace)
    return found.path


async def _end_marked(marker: str, grace: float) -> None:
    """End every process that still carries the task's marker, wherever it went (TERM, `grace`, KILL)."""
    if not signal_marked(marker, signal.SIGTERM):
        return
    if await _marked_gone(marker, grace):
        return
    signal_marked(marker, signal.SIGKILL)
    await _marked_gone(marker, grace)


async def _marked_gone(marker: str, seconds: float) -> bool:
    """Poll until no live process carries the marker: nothing signals the end of a process that is not a child."""
    deadline = time.monotonic() + seconds
    while marked_pids(marker):
        if time.monotonic() >= deadline:
            return False
        await anyio.sleep(0.05)
    return True


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**53


def shown_command(spec: AgentConfig) -> str:
    """The record's `model`: the program's name, nothing of its arguments or environment (which may hold keys)."""
    return "external: " + os.path.basename(spec.command or "")[:80]
