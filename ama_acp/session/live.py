"""One live session: who it is, what the person chose (mode, model, thought level), and the turn that may be
running — and the parts it owns, each with one job:

- `conversation` (session/conversation.py): the context, where it sits in the file, what the model was told;
- `journal` (journal.py): the session file as it is written, and what happens when it cannot be;
- `outbox` (outbox.py): every update it sends, text deltas merged at the editor's frame rate;
- `ctx` (accounting.py): the meter, billing and reporter, and their ACP reports;
- `tools` (toolset.py): ama's own tools and the session's MCP servers';
- `host` (host.py): the agent loop's `TurnHost` (requests, tools, replies, events);
- `compactor` (compacting.py): pruning and compaction before each request, and /compact;
- `approver` and `tool_ctx` (approval.py, workspaces.py): permissions, and where its tools work.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import anyio
import msgspec

from ama_acp.agent.instructions import SessionInstructions
from ama_acp.agent.loop import run_turn
from ama_acp.agent.prompt import system_prompt
from ama_acp.config import config_dir
from ama_acp.conversation.messages import ImagePart, TextPart, UserMessage
from ama_acp.rpc.dispatch import defer
from ama_acp.rpc.errors import UNEXPECTED, AcpError
from ama_acp.session import mcp_prompts, options
from ama_acp.session.accounting.session_context import SessionContext
from ama_acp.session.conversation import Conversation
from ama_acp.session.editor.outbox import Outbox
from ama_acp.session.editor.updates import is_stop_reason
from ama_acp.session.editor.workspaces import tool_context
from ama_acp.session.file_commands import FileCommands, tell
from ama_acp.session.history.checkpoints import CheckpointLog, Checkpoints, RecordingWorkspace
from ama_acp.session.hooked import submitted, warner
from ama_acp.session.options import SessionSetup
from ama_acp.session.plan_mode import PLAN, PlanOffer
from ama_acp.session.restore import Restored
from ama_acp.session.runtime import Runtime
from ama_acp.session.store import entries as en
from ama_acp.session.store.journal import Journal
from ama_acp.session.turn.compacting import Compactor
from ama_acp.session.turn.host import SessionHost
from ama_acp.session.turn.toolset import SessionTools
from ama_acp.shaping import skills
from ama_acp.shaping.skill_tool import SkillTool
from ama_acp.tools.base import Tool
from ama_acp.tools.plan_exit import ExitPlanTool
from ama_acp.wire import types as w
from ama_acp.wire.warning import takes_notices

if TYPE_CHECKING:
    from pathlib import Path

    from ama_acp.session.editor.approval import Approver
    from ama_acp.session.history.rewind import Rewinder
    from ama_acp.session.tasks.runner import TaskRunner
    from ama_acp.shaping.hook_points import SessionHooks, Warn

log = logging.getLogger(__name__)


class Session:
    def __init__(self, runtime: Runtime, setup: SessionSetup, restored: Restored | None = None) -> None:
        self.rt = runtime  # the SessionManager (session/runtime.py): config, catalog, store, client, send
        self.id = setup.session_id
        self.cwd = setup.cwd
        self.additional_directories = setup.additional_directories
        self.mode = setup.mode
        self.model_id = setup.model_id
        self.thought_level = setup.thought_level
        self.created_at = setup.created_at or en.utc_now()
        self.updated_at = setup.updated_at or self.created_at
        self.title = setup.title
        self._sent_title = setup.title  # a loaded session's title: the client already has it
        self.conversation = restored.conversation if restored is not None else Conversation()
        self.journal = Journal(self.id)
        # Copies of the files ama changes, per prompt, for /rewind (session/history/checkpoints.py, rewind.py).
        log_ = restored.checkpoints if restored is not None and restored.checkpoints is not None else None
        self.checkpoints = Checkpoints(log_ or CheckpointLog(), self._checkpoints_folder, self.persist)
        self.outbox = Outbox(self.id, runtime, self.journal)
        self.tools = SessionTools(runtime, lambda: runtime.context_window(self.model_id))  # the set follows the window
        # Skills: their names in the system prompt, read once as the session opens; their bodies by the tool.
        self.skills = skills.load(self.cwd, str(config_dir(os.environ)))
        if self.skills.skills:
            self.tools.offer_skill(SkillTool(self.skills))
        # AGENTS.md and the like: in the system prompt, or announced when a tool works in their folder.
        self.instructions = SessionInstructions(runtime.config.instructions, self.cwd, str(config_dir(os.environ)))
        if self.conversation.frozen_instructions is not None:  # the system prompt its file froze, byte for byte
            self.instructions.keep(self.conversation.frozen_instructions)
        self.file_commands = FileCommands(self.cwd, str(config_dir(os.environ)))  # read when first offered
        self.ctx = SessionContext(runtime, self)  # meter, billing, reporter and their ACP reports
        self.host = SessionHost(runtime, self, restored.wire_ids if restored is not None else None)
        self.compactor = Compactor(runtime, self, self.host)
        # Permissions, made by the first call that needs them (`approver`), or now when the config has rules: a
        # malformed one is logged as the session opens, as it always was.
        rules = runtime.config.permissions
        self._approver: Approver | None = _approver(self) if rules.allow or rules.ask or rules.deny else None
        self.tools.offer_plan_exit(ExitPlanTool(PlanOffer(self)), lambda: self.mode == PLAN)
        self._tasks: TaskRunner | None = None  # the `task` tool's tasks, made by the first (`tasks`)
        self.tool_ctx = tool_context(runtime, self)
        self.tool_ctx.workspace = RecordingWorkspace(self.tool_ctx.workspace, self.checkpoints)
        self._rewinder: Rewinder | None = None  # /rewind's, made by the first (`rewinder`)
        # The person's `[[hooks]]` (shaping/): None without any. "load": load, resume and fork alike.
        self.hooks = _hooks(runtime, self.id, self.cwd, warner(self.send, self._takes_notices))
        self._opened_as = "new" if restored is None else "load"
        self._turn_scope: anyio.CancelScope | None = None
        self._model_ran = False
        # Client calls that must not be abandoned at once on cancel (permission, terminal/create): each is
        # shielded, and a cancel shortens its deadline to its grace period (see `graceful`).
        self._graceful: dict[anyio.CancelScope, float] = {}
        self._idle: anyio.Event | None = None  # set once the running turn's response is out
        self.cancelled = False
        self.closed = False
        if restored is not None:
            self.ctx.reload(self.conversation.messages, restored.figures, self.conversation.compactions)
            if restored.budget is not None:  # a /budget of an earlier connection holds over the config's
                self.ctx.set_budget(restored.budget)

    # --- plumbing -----------------------------------------------------------------------------------------

    async def send(self, update: w.SessionUpdate) -> None:
        """Every update of the session goes out through here (session/editor/outbox.py)."""
        await self.outbox.send(update)

    def persist(self, entry: en.Entry) -> None:
        """Every entry of the session file goes through here (session/store/journal.py)."""
        self.checkpoints.log.observe(entry)  # the prompts and the files they changed, also when unsaved
        self.journal.append(entry)

    @contextmanager
    def graceful(self, timeout: float, grace: float) -> Iterator[anyio.CancelScope]:
        """A scope for one client call the turn's cancel must not cut off at once: shielded, ended by
        `timeout`, or `grace` seconds after a cancel (so the client's answer can still be handled)."""
        now = anyio.current_time()
        deadline = now + (grace if self.cancelled else timeout)
        scope = anyio.CancelScope(shield=True, deadline=deadline if math.isfinite(deadline) else math.inf)
        self._graceful[scope] = grace
        try:
            with scope:
                yield scope
        finally:
            self._graceful.pop(scope, None)

    @property
    def approver(self) -> Approver:
        """Permissions: the mode's policy, the person's "always" answers, the config's and this project's rules.
        Made when first needed (a tool call, /rules, a plan to approve), or with the session when the config has
        `[permissions]` rules: a session without them answers in text without its modules (~8 ms, issue 41)."""
        if self._approver is None:
            self._approver = _approver(self)
        return self._approver

    @property
    def tasks(self) -> TaskRunner:
        """The `task` tool's tasks (session/tasks/runner.py), made by the first task, /tasks or a stats request: a
        session that starts none does without the runner's modules (issue 41)."""
        if self._tasks is None:
            from ama_acp.session.tasks.runner import TaskRunner

            self._tasks = TaskRunner(self.rt, self)
        return self._tasks

    @property
    def rewinder(self) -> Rewinder:
        """Made by the first /rewind: a session that never rewinds does without its module (issue 41)."""
        if self._rewinder is None:
            from ama_acp.session.history.rewind import Rewinder

            self._rewinder = Rewinder(self)
        return self._rewinder

    def _checkpoints_folder(self) -> Path:
        """Where the copies of the files this session changes go: first asked when it changes one."""
        from ama_acp.session.history.rewind import checkpoints_folder

        return checkpoints_folder(self.rt.store, self.id)

    @property
    def busy(self) -> bool:
        return self._turn_scope is not None

    def system_prompt(self) -> str:
        """ama's own prompt and the project instructions (both frozen by the first request), with the skills (read
        at the open) between them."""
        return self.base_prompt() + self.skills.block + self.instructions.block()

    def base_prompt(self) -> str:
        """ama's own prompt: what the first request freezes (with the instructions, agent/instructions.py)."""
        if self.conversation.frozen_prompt is not None:
            return self.conversation.frozen_prompt
        return system_prompt(self.cwd, self.additional_directories, self.mode)

    def tool(self, name: str) -> Tool | None:
        """ama's own tool of that name, or an MCP server's (`mcp__server__tool`)."""
        return self.tools.tool(name)

    async def report_usage(self, force: bool = False, message_end: bool = False) -> None:
        """Every usage_update of the session goes through here (D1–D3 apply in the reporter), and the context
        notices after it (tier rises, a reading over the window): an ACP `notice` when the client advertised
        `session.notices`, else an agent message. That one must not land inside a streamed reply, so it goes
        out only after a complete assistant message (`message_end`, E1) or when no turn is running (E2 and the
        points outside a turn); otherwise it waits for the next such point."""
        update = self.ctx.usage_update(force=force)
        if update is not None:
            # The reporter now counts this figure as sent (D1): a cancel that cut the send would leave the editor
            # one figure behind for good, every later identical figure suppressed (the seam fuzzer's long run: an
            # early cancel during the check before a request lost the +1 token of the prompt it had appended).
            with anyio.CancelScope(shield=True):
                await self.send(update)
        as_notice = takes_notices(self.rt.client_caps)
        for n in self.ctx.context_notices(deliver=as_notice or message_end or self._turn_scope is None):
            if as_notice:
                await self.send(w.Notice(severity=n.severity, title=n.title, description=n.text, meta=n.meta))
            else:
                mark = "⚠" if n.severity == "warning" else "ℹ"
                text = f"\n\n{mark} {n.title}: {n.text}\n\n"
                await self.send(w.AgentMessageChunk(content=w.TextContent(text=text)))

    # --- prompt turn --------------------------------------------------------------------------------------

    async def prompt(self, blocks: list[w.ContentBlock]) -> w.PromptResponse:
        if self.busy:
            raise AcpError.session_busy(self.id)
        user = user_message(blocks)
        offer = self.commands_changed()  # a command file added or changed since runs now, and is offered below
        command = self.rt.commands.match(user)
        if command is None and (typed := self.file_commands.expand(user)) is not None:
            self.persist(en.CommandEntry(text=typed[0]))  # a load replays the command, then the prompt it sent
            user = typed[1]
        elif command is None:
            command = mcp_prompts.match(self, user)  # an MCP server's prompt (session/mcp_prompts.py)
        self.cancelled = False
        self.host.new_turn()
        self.instructions.refresh()  # a file changed since the last turn: told by a reminder before the next request
        self.compactor.new_turn()
        idle = self._idle = anyio.Event()
        billed_before = self.ctx.billing.totals()
        stop = "end_turn"
        self._model_ran = False  # the `stop` hooks follow a turn of the model's
        with anyio.CancelScope() as scope:
            self._turn_scope = scope
            self.journal.mark_turn(True)  # another ama's session/list shows the session busy (store/holders.py)
            try:
                with anyio.CancelScope(shield=True):  # the set it sends is the one checked: never sent again
                    await self.offer_commands(offer)
                stop = await command(self) if command is not None else await self.run_model(user)
            finally:
                self._turn_scope = None
                self.journal.mark_turn(False)
        if scope.cancelled_caught or self.cancelled:
            stop = "cancelled"
        with anyio.CancelScope(shield=True):
            if self._model_ran and self.hooks is not None:  # a cancel does not cut them short: each ends by its timeout
                await self.hooks.stop(stop)
            await self._turn_end(stop)
        turn = self.ctx.billing.totals().minus(billed_before)  # S1: everything billed in this turn
        try:
            defer(_set_event(idle))  # idle only once the prompt's response is written (session/close, R88)
        except LookupError:  # not under the RPC peer (ama -p)
            idle.set()
        # S1 only when every request of the turn reported usage: a sum missing one would be an invented figure.
        usage = msgspec.convert(turn.prompt_usage(), w.TurnUsage) if turn.requests and not turn.unreported else None
        reason: w.StopReason = "end_turn"
        if is_stop_reason(stop):  # the loop's and the commands' reasons are ACP's
            reason = stop
        else:  # a bug: answer what is closest, and say so in the log
            log.error("%s turn ended with stop reason %r; answering end_turn", UNEXPECTED, stop)
        return w.PromptResponse(stop_reason=reason, usage=usage)

    async def run_model(self, user: UserMessage) -> str:
        """The model's turn on `user` (a prompt, or what a command made of one: an MCP prompt's messages), once
        the `prompt_submit` hooks let it through."""
        sent = user if self.hooks is None else await submitted(self.hooks, user, self._opened_as, self.send)
        if sent is None:
            return "end_turn"
        if self.title is None:
            self.title = _title_from(user)
            self.persist(en.TitleEntry(title=self.title))
        self._model_ran = True
        async with self.outbox.turn():  # what is pending goes out when the turn ends, however it ends
            return await run_turn(self.host, sent)

    async def _turn_end(self, stop: str) -> None:
        self.updated_at = en.utc_now()
        try:
            await self.host.tell_setting()  # a change during the turn's last reply: in the context and the figure
        except Exception:  # the reminder is retried before the next request; the turn's end must go out
            log.exception("could not append the setting reminder")
        self.persist(en.TurnEntry(stop_reason=stop))  # the store fsyncs after a turn entry
        await self.report_usage()  # E2, before the prompt response
        title = self.title if self.title != self._sent_title else None
        self._sent_title = self.title
        info = w.SessionInfoUpdate(updated_at=self.updated_at, **({"title": title} if title else {}))
        await self.send(info)

    async def wait_idle(self, timeout: float = 5.0) -> None:
        if self._idle is not None:
            with anyio.move_on_after(timeout):
                await self._idle.wait()

    def cancel(self) -> None:
        if self._turn_scope is not None:
            self.cancelled = True
            self._turn_scope.cancel()
            for scope, grace in self._graceful.items():
                scope.deadline = min(scope.deadline, anyio.current_time() + grace)

    # --- options ------------------------------------------------------------------------------------------

    def config_options(self) -> list[w.SessionConfigOption]:
        return options.config_options(
            self.mode, self.model_id, self.rt.model_choices(self.model_id), self.thought_level
        )

    async def set_mode(self, mode: str, announce_options: bool = True) -> None:
        if mode not in options.MODE_NAMES:
            raise AcpError.invalid_params(f"modeId: unknown mode {mode!r}; one of {', '.join(options.MODE_NAMES)}")
        if mode == self.mode:
            return
        self.mode = mode
        self.persist(en.ModeEntry(mode_id=mode))
        await self.send(w.CurrentModeUpdate(current_mode_id=mode))
        if announce_options:
            await self.send(w.ConfigOptionUpdate(config_options=self.config_options()))
        if not self.busy:  # during a turn the reminder waits for the next request (the context must be whole)
            await self.host.tell_setting()
        await self.report_usage()  # the figure moved: a reminder, or (before the first request) the prompt

    async def set_model(self, model_id: str) -> None:
        choices = {mid for mid, _ in self.rt.model_choices(self.model_id)}
        if model_id not in choices and self.rt.model_info(model_id) is None:
            raise AcpError.invalid_params(f"value: unknown model {model_id!r}")
        if model_id == self.model_id:
            return
        old = self.model_id
        self.model_id = model_id
        self.persist(en.ModelEntry(model_id=model_id))
        self.ctx.model_changed(old, model_id)
        await self.send(w.ConfigOptionUpdate(config_options=self.config_options()))  # E3: options first
        await self.report_usage()

    async def set_config(self, config_id: str, value: str | bool) -> list[w.SessionConfigOption]:
        if not isinstance(value, str):
            raise AcpError.invalid_params(f"value: {config_id} takes a string value")
        if config_id == "model":
            await self.set_model(value)
        elif config_id == "thought_level":
            if value not in options.THOUGHT_LEVELS:
                raise AcpError.invalid_params(f"value: unknown thought level {value!r}")
            if value != self.thought_level:
                self.thought_level = value
                self.persist(en.ConfigEntry(config_id="thought_level", value=value))
                await self.send(w.ConfigOptionUpdate(config_options=self.config_options()))
        elif config_id == "mode":
            await self.set_mode(value, announce_options=False)
        else:
            raise AcpError.invalid_params(f"configId: unknown config option {config_id!r}")
        return self.config_options()

    # --- opening and closing ------------------------------------------------------------------------------

    async def announce_open(self) -> None:
        """E4: after the opening response is written: commands, options, then the meter (D2: always)."""
        self.commands_changed()
        await self.offer_commands(changed=True)
        await self.send(w.ConfigOptionUpdate(config_options=self.config_options()))
        await self.report_usage(force=True)
        if self.hooks is not None:  # after the announcements: a slow hook holds up nothing the editor waits for
            await self.hooks.session_start(self._opened_as)

    def _takes_notices(self) -> bool:
        return takes_notices(self.rt.client_caps)

    def commands_changed(self) -> bool:
        """Whether the slash commands offered changed since last offered: the command files looked at (a stat of
        each) and read again when they changed (session/file_commands.py). No await: a prompt checks this between
        its busy check and its turn's start."""
        return self.file_commands.refresh({c.name for c in self.rt.commands.available()})

    async def offer_commands(self, changed: bool) -> None:
        """The slash commands, when they `changed`: the built-ins, then `/init` and the command files', then the
        MCP servers' prompts; and what went wrong with those files, told once."""
        if changed:
            commands = self.rt.commands.available() + self.file_commands.available()
            commands += mcp_prompts.offered(self, {c.name for c in commands})
            await self.send(w.AvailableCommandsUpdate(available_commands=commands))
        await tell(self.send, self._takes_notices(), self.file_commands.untold())

    async def announce_commands(self) -> None:
        """The slash commands again: an MCP server's prompts came, went or changed (session/mcp.py)."""
        await self.offer_commands(changed=True)

    async def release(self) -> None:
        """What the session holds goes with it: its MCP servers and sandbox launcher (no process outlives the
        session) and its file."""
        self.closed = True
        if self.tools.mcp is not None:
            await self.tools.mcp.aclose()
        if self.tool_ctx.sandbox is not None:
            await self.tool_ctx.sandbox.aclose()  # its launcher kept ready for the next command
        self.journal.close()


def user_message(blocks: list[w.ContentBlock]) -> UserMessage:
    """A prompt's ACP content blocks as the message the model reads."""
    parts: list[TextPart | ImagePart] = []
    for block in blocks:
        match block:
            case w.TextContent():
                parts.append(TextPart(block.text))
            case w.ImageContent():
                parts.append(ImagePart(block.data, block.mime_type))
            case w.ResourceLink():
                parts.append(TextPart(f"[@{block.name}]({block.uri})"))
            case w.EmbeddedResource():
                res = block.resource
                if "text" in res:
                    parts.append(TextPart(f'<context uri="{res.get("uri", "")}">\n{res["text"]}\n</context>'))
                else:
                    parts.append(TextPart(f"[attached binary resource {res.get('uri', '')}]"))
            case _:
                raise AcpError.invalid_params("prompt: audio content is not supported (promptCapabilities.audio)")
    if not parts:
        raise AcpError.invalid_params("prompt: at least one content block is required")
    return UserMessage(content=parts)


def _set_event(event: anyio.Event) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        event.set()

    return run


def _title_from(message: UserMessage) -> str:
    text = " ".join(p.text for p in message.content if isinstance(p, TextPart)).strip()
    line = " ".join(text.split())
    if not line:
        return "Untitled"
    return line if len(line) <= 60 else line[:57].rstrip() + "…"


def _hooks(runtime: Runtime, session_id: str, cwd: str, warn: Warn) -> SessionHooks | None:
    """The session's hooks (shaping/hook_points.py), None without any: their modules (~4 ms) are imported only
    for a config that lists some (issue 41)."""
    if not runtime.config.hooks:
        return None
    from ama_acp.shaping.hook_points import SessionHooks

    return SessionHooks.of(runtime.config, session_id, cwd, warn)


def _approver(session: Session) -> Approver:
    """The session's approver, with the config's and this project's rules."""
    from ama_acp.session.editor.approval import Approver
    from ama_acp.session.rules.book import RuleBook

    approver = Approver(session)
    approver.rules = RuleBook.of(session.rt.config, session.cwd)
    return approver
