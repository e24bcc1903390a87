"""One live session: its conversation, model, mode, context meter and the turn that may be running.

It is the agent loop's host (agent/loop.py `TurnHost`): it builds requests, runs tools through the
session's workspace and permissions, persists every entry as it happens, and sends updates through the
session's `UpdateSink`. The meter, billing and reporter (context/) hang off the same events.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from ama_acp.agent import events as ev
from ama_acp.agent.loop import Refusal, run_turn
from ama_acp.agent.prompt import Setting, setting_reminder, system_prompt
from ama_acp.agent.result_fit import fit_result, result_budget, tool_chars
from ama_acp.conversation.messages import AssistantMessage, ImagePart, Message, TextPart, Usage, UserMessage
from ama_acp.conversation.tools import ToolSpec
from ama_acp.providers import base as pb
from ama_acp.rpc.dispatch import defer
from ama_acp.rpc.errors import UNEXPECTED, AcpError
from ama_acp.session import entries as en
from ama_acp.session import options
from ama_acp.session.accounting import SessionContext
from ama_acp.session.approval import Approver
from ama_acp.session.coalesce import ChunkCoalescer
from ama_acp.session.runtime import Runtime
from ama_acp.session.updates import is_stop_reason, plan_update, to_update
from ama_acp.session.wire_ids import WireIds
from ama_acp.session.workspaces import current_tool_call, tool_context
from ama_acp.tools.base import Tool, ToolError, ToolResult
from ama_acp.tools.context import result_chars
from ama_acp.tools.registry import run_with_deadline
from ama_acp.wire import types as w

if TYPE_CHECKING:
    from ama_acp.session.mcp import SessionMcp
    from ama_acp.session.store import SessionWriter

log = logging.getLogger(__name__)

Send = Callable[[w.SessionUpdate], Awaitable[None]]


class Session:
    def __init__(
        self,
        runtime: Runtime,
        *,
        session_id: str,
        cwd: str,
        additional_directories: list[str],
        mode: str,
        model_id: str,
        thought_level: str = "off",
        created_at: str | None = None,
    ) -> None:
        self.rt = runtime  # the SessionManager (session/runtime.py): config, catalog, store, client, send
        self.id = session_id
        self.cwd = cwd
        self.additional_directories = additional_directories
        self.mode = mode
        self.model_id = model_id
        self.thought_level = thought_level
        self.created_at = created_at or en.utc_now()
        self.updated_at = self.created_at
        self.messages: list[Message] = []  # the context the next request carries
        self.message_total = 0  # MessageEntries written to the session file (compaction indexes by it)
        self.compactions = 0
        self.turn_compactions = 0  # automatic compactions in the running turn (session/compacting.py bounds them)
        # Where the context sits in the file: after a compaction it starts with `context_synthetic` messages
        # of its own (the handoff), then the stored messages from file index `context_first` on.
        self.context_first = 0
        self.context_synthetic = 0
        # The system prompt as the session's first request sent it (None before): never rewritten after, so the
        # provider's cached prefix stays valid (agent/prompt.py). `told` is the setting (mode, directories) the
        # model was last told of, by that prompt or a reminder message.
        self.frozen_prompt: str | None = None
        self.told: Setting | None = None
        self.todos: list[dict[str, str]] = []
        self.slash_commands: list[str] = []  # those the person ran in this process (compacting.py `_history`)
        self.title: str | None = None
        self._sent_title: str | None = None
        self.writer: SessionWriter | None = None
        self.mcp: SessionMcp | None = None  # the editor's MCP servers for this session (session/mcp.py)
        self.approver = Approver(self)
        self._provider: pb.Provider | None = None
        self._provider_for: str | None = None
        # The model the request in flight was built for: its reply is billed and measured as that model's, even
        # when the person switches models while it streams (docs/context.md "A switch while a reply streams").
        self.serving: str | None = None
        self.wire_ids = WireIds()  # every toolCallId the session has used, restored on load
        self._provider_ids: dict[str, str] = {}  # wire id → provider id
        self._calls: dict[str, dict[str, Any]] = {}  # wire id → what replay needs
        self._hidden_calls: set[str] = set()  # todo calls: the person sees the plan, not a tool call as well
        self._turn_scope: anyio.CancelScope | None = None
        # Client calls that must not be abandoned at once on cancel (permission, terminal/create): each is
        # shielded, and a cancel shortens its deadline to its grace period (see `graceful`).
        self._graceful: dict[anyio.CancelScope, float] = {}
        self._unsaved: str | None = None  # why the session file cannot be written, until the person is told
        self._told_unsaved = False
        self._idle: anyio.Event | None = None  # set once the running turn's response is out
        self.cancelled = False
        # What made the last turn fail, as (kind, message): a provider Failure's kind, or "internal" for ama's own
        # error. None while the turn succeeds; `ama -p` exits non-zero on it (the ACP answer is still end_turn).
        self.turn_error: tuple[str, str] | None = None
        self.closed = False
        self.max_turn_requests = runtime.config.max_turn_requests
        stream = runtime.config.stream
        self.chunks = ChunkCoalescer(
            self._send_now, window=stream.coalesce_window_ms / 1000, max_chars=stream.coalesce_max_chars
        )
        self.ctx = SessionContext(runtime, self)  # meter, billing, reporter and their ACP reports
        self.tool_ctx = tool_context(runtime, self)

    # --- plumbing -----------------------------------------------------------------------------------------

    async def send(self, update: w.SessionUpdate) -> None:
        """Every update of the session goes out through here: during a turn, text deltas are merged at the
        editor's frame rate (session/coalesce.py), everything else after what is pending."""
        await self.chunks.send(update)

    async def _send_now(self, update: w.SessionUpdate) -> None:
        await self.warn_unsaved()
        await self.rt.send_update(self.id, update)

    def persist(self, entry: en.Entry) -> None:
        if isinstance(entry, en.CommandEntry):  # for the inventory of a session with no file to read them from
            self.slash_commands.append(entry.text)
        if self.writer is None:
            return
        try:
            self.writer.append(entry)
        except OSError as exc:  # a full disk must not end the conversation (store's SessionWriteError is one)
            self.cannot_save(exc)

    def cannot_save(self, exc: OSError) -> None:
        """The session file cannot be written (created, opened or appended to): the session runs on unsaved,
        and the person is told at the next update (warn_unsaved)."""
        reason = getattr(exc, "reason", None)  # SessionWriteError: the why, without the sentence around it
        if reason is not None:  # its str() is already the whole sentence
            log.error("session %s: %s", self.id, exc)
        else:
            log.error("session %s: cannot write the session file (%s); it will not survive a restart", self.id, exc)
        writer, self.writer = self.writer, None
        if writer is not None:  # its descriptor and lock go now, not when the process ends
            try:
                writer.close()
            except OSError as close_exc:  # its fsync, on the disk that just failed: nothing more to lose
                log.info("session %s: closing the session file after the failure: %s", self.id, close_exc)
        self._unsaved = str(reason or exc.strerror or exc) or type(exc).__name__

    async def warn_unsaved(self) -> None:
        """Tell the person, once and at the first chance, that the session file can no longer be written."""
        if self._unsaved is None or self._told_unsaved:
            return
        self._told_unsaved = True  # first: the warning itself goes through send()
        reason = self._unsaved
        caps = self.rt.client_caps.session
        if caps is not None and caps.notices is not None:
            update: w.SessionUpdate = w.Notice(
                severity="warning",
                title="This session can no longer be saved",
                description=f"{reason}. It will not survive a restart.",
            )
        else:
            text = f"\n\n⚠ This session can no longer be saved: {reason}. It will not survive a restart.\n\n"
            update = w.AgentMessageChunk(content=w.TextContent(text=text))
        with anyio.CancelScope(shield=True):  # a cancel must not swallow the one warning
            await self.rt.send_update(self.id, update)

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

    def adopt_restored(self, wire_ids: WireIds) -> None:
        """After a load (session/restore.py): the wire ids the file already used, so new ones stay unique, and
        the title, which the client already has."""
        self.wire_ids = wire_ids
        self._sent_title = self.title

    @property
    def busy(self) -> bool:
        return self._turn_scope is not None

    def system_prompt(self) -> str:
        if self.frozen_prompt is not None:
            return self.frozen_prompt
        return system_prompt(self.cwd, self.additional_directories, self.mode)

    def _setting(self) -> Setting:
        return Setting(self.mode, tuple(self.additional_directories))

    def _freeze_prompt(self) -> None:
        """The first request fixes the system prompt for the rest of the session (and its reloads)."""
        self.frozen_prompt = self.system_prompt()
        self.told = self._setting()
        self.persist(
            en.PromptEntry(
                mode_id=self.mode,
                additional_directories=list(self.additional_directories),
                system=self.frozen_prompt,
            )
        )

    async def tell_setting(self) -> bool:
        """Append a reminder when the mode or directories changed since the model was last told; True if one
        was appended. Only where the conversation is whole (no tool call waiting for its result)."""
        now = self._setting()
        if self.frozen_prompt is None or self.told is None or self.told == now:
            return False
        await self.append(UserMessage(content=[TextPart(setting_reminder(self.told, now))], origin="ama"))
        self.told = now
        self.persist(en.PromptEntry(mode_id=now.mode, additional_directories=list(now.additional_directories)))
        return True

    def tool_specs(self) -> list[ToolSpec]:
        specs = list(self.rt.tool_specs())
        if self.mcp is not None:
            specs += self.mcp.tool_specs()
        return specs

    def mcp_declarations(self) -> dict[str, list[ToolSpec]]:
        return self.mcp.by_server() if self.mcp is not None else {}

    def tools_version(self) -> int:
        """Changes whenever `tool_specs()` does (an MCP server became ready, failed, or changed its tools)."""
        return self.mcp.version if self.mcp is not None else 0

    def tool(self, name: str) -> Tool | None:
        """ama's own tool of that name, or an MCP server's (`mcp__server__tool`)."""
        if self.mcp is not None:
            found = self.mcp.tool(name)
            if found is not None:
                return found
        return self.rt.tool(name)

    # --- TurnHost -----------------------------------------------------------------------------------------

    def provider(self) -> pb.Provider:
        if self._provider is None or self._provider_for != self.model_id:
            self._provider = self.rt.make_provider(self.model_id)
            self._provider_for = self.model_id
        return self._provider

    def build_request(self) -> pb.ModelRequest:
        if self.frozen_prompt is None:
            self._freeze_prompt()
        info = self.rt.model_info(self.model_id)
        _, _, name = self.model_id.partition("/")
        self.serving = self.model_id
        return pb.ModelRequest(
            model=info.model if info else name,
            system=self.system_prompt(),
            messages=list(self.messages),
            tools=self.tool_specs(),
            max_output=info.max_output if info else None,
            thought_level=self.thought_level,
        )

    async def append(self, message: Message) -> None:
        self.messages.append(message)
        self.message_total += 1
        self.persist(en.MessageEntry(message=message))
        # A reply of the model that was current when its request was built, unless the person switched since.
        measured = not isinstance(message, AssistantMessage) or self.serving in (None, self.model_id)
        self.ctx.append(message, measured)

    def file_index(self, position: int) -> int:
        """The MessageEntry index in the session file of the context message at `position`."""
        return self.context_first + position - self.context_synthetic

    def replace_context(self, messages: list[Message]) -> None:
        """Compaction or pruning rebuilt the context; the meter estimates it until new usage (U9)."""
        self.messages = list(messages)
        self.ctx.replace(self.messages)

    async def emit(self, event: ev.AgentEvent) -> None:
        # The hot path first: a text delta is all most events of a turn are (thousands a reply).
        if type(event) is ev.TextChunk:
            await self.chunks.text(w.AgentMessageChunk, event.text, event.message_id)
            return
        if type(event) is ev.ThoughtChunk:
            await self.chunks.text(w.AgentThoughtChunk, event.text, event.message_id)
            return
        if isinstance(event, ev.ToolCallRequested):
            if event.name in _SHOWN_AS_PLAN:
                self._hidden_calls.add(event.wire_id)
            else:
                self._calls[event.wire_id] = {
                    "name": event.name,
                    "title": event.title,
                    "kind": event.kind,
                    "locations": event.locations,
                    "raw_input": event.raw_input,
                }
        hidden = isinstance(event, ev.ToolCallRequested | ev.ToolCallStarted | ev.ToolCallFinished) and (
            event.wire_id in self._hidden_calls
        )
        if isinstance(event, ev.ToolCallFinished):
            self._hidden_calls.discard(event.wire_id)
            if hidden:
                self._provider_ids.pop(event.wire_id, None)
            else:
                self._record_call(event.wire_id, event.result, event.shown)
        update = None if hidden else to_update(event)
        if update is not None:
            await self.send(update)
        if isinstance(event, ev.ToolCallFinished) and event.result.plan is not None:
            self.todos = list(event.result.plan)
            self.persist(en.PlanEntry(entries=self.todos))
            await self.send(plan_update(self.todos))

    def _record_call(self, wire_id: str, result: ToolResult, shown: str | None = None) -> None:
        call = self._calls.pop(wire_id, None)
        if call is None:
            return
        provider_id = self._provider_ids.pop(wire_id, wire_id)
        self.persist(
            en.ToolCallEntry(
                wire_id=wire_id,
                provider_id=provider_id,
                name=call["name"],
                title=call["title"],
                kind=call["kind"],
                status="failed" if result.is_error else "completed",
                locations=list(result.locations or call["locations"]),
                raw_input=call["raw_input"] if isinstance(call["raw_input"], dict) else None,
                content_text=en.clip_replay_text(result.text if shown is None else shown),
                diff_paths=[d.path for d in result.diffs],
            )
        )

    def wire_id(self, provider_id: str) -> str:
        """Unique across the session's history: a provider id used before gets the first free `#n`
        (session/wire_ids.py; docs/tools.md "Tool call ids")."""
        wid = self.wire_ids.allocate(provider_id)
        self._provider_ids[wid] = provider_id
        return wid

    def describe_tool(self, name: str, args: dict[str, Any]) -> ev.ToolCallRequested | None:
        tool = self.tool(name)
        if tool is None:
            return None
        try:
            title = tool.title(args)
            locs = tool.locations(args, self.cwd)
        except Exception:  # bad arguments: the tool will say so when run; a plain title will do
            title, locs = name, []
        return ev.ToolCallRequested("", name, title, tool.kind, locs, args)

    async def approve(self, call: ev.ToolCallRequested, args: dict[str, Any]) -> Refusal | None:
        return await self.approver.approve(call, args)

    async def run_tool(self, name: str, args: dict[str, Any], wire_id: str) -> ToolResult:
        tool = self.tool(name)
        if tool is None:
            raise ToolError(f"There is no tool named {name!r}.")
        budget, window = self._result_budget()
        token = current_tool_call.set(wire_id)
        room = result_chars.set(tool_chars(budget))
        try:
            result = await run_with_deadline(tool, args, self.tool_ctx)
        finally:
            result_chars.reset(room)
            current_tool_call.reset(token)
        if window is None:
            return result
        return fit_result(result, budget, self.ctx.meter.estimator.text, window)

    def _result_budget(self) -> tuple[int | None, int | None]:
        """(tokens the next tool result may take, the window) — see agent/result_fit.py."""
        f = self.ctx.figures()
        auto, _ = self.ctx.meter.thresholds()  # held or not: a compaction may still have to keep the result
        unseen = 0
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage):
                break
            unseen += self.ctx.meter.estimator.message(message)
        return result_budget(f.window, auto, f.used, unseen), f.window

    async def after_assistant_message(self, message: AssistantMessage) -> None:
        # Every completed response was billed by the provider, reported or not: one without usage counts as an
        # unreported request and makes the cost unknown (U17), instead of passing for a free one.
        served_by = self.serving or self.model_id  # priced as the model that served it (a switch may be newer)
        self.ctx.bill(served_by, message.usage, enters_context=True)
        self._persist_usage(served_by, message.usage)
        await self.report_usage(message_end=True)  # E1

    async def request_lost(self) -> None:
        served_by = self.serving or self.model_id
        self.ctx.bill(served_by, None, enters_context=True, interrupted=True)
        self._persist_usage(served_by, None)  # a load must know the cost became unknown

    def _persist_usage(self, model_id: str, usage: Usage | None) -> None:
        self.persist(
            en.UsageEntry(
                model_id=model_id,
                usage=usage or Usage(),  # {}: the provider said nothing; the states below still change
                cost=self.ctx.last_cost,
                purpose="turn",
                meter=self.ctx.meter_state(),
                billing=self.ctx.billing_state(),
            )
        )

    async def before_request(self) -> None:
        if self.mcp is not None:
            await self.mcp.before_first_request()  # the first request waits (bounded) for servers still starting
        await self.tell_setting()  # a mode changed while the turn ran: the model hears of it before its next reply
        await self.rt.before_request(self)

    async def turn_failed(self, text: str) -> None:
        self.turn_error = ("internal", text)
        await self.send(w.AgentMessageChunk(content=w.TextContent(text=f"\n\n⚠ {text}\n")))

    async def provider_failed(self, failure: pb.Failure) -> None:
        self.turn_error = (failure.kind, failure.message)
        text = failure.message
        if failure.kind == "auth":
            text = f"**The model provider refused the credentials.** {failure.message}"
        await self.send(w.AgentMessageChunk(content=w.TextContent(text=f"\n\n⚠ {text}\n")))

    # --- usage --------------------------------------------------------------------------------------------

    async def report_usage(self, force: bool = False, message_end: bool = False) -> None:
        """Every usage_update of the session goes through here (D1–D3 apply in the reporter), and the context
        notices after it (tier rises, a reading over the window): an ACP `notice` when the client advertised
        `session.notices`, else an agent message. That one must not land inside a streamed reply, so it goes
        out only after a complete assistant message (`message_end`, E1) or when no turn is running (E2 and the
        points outside a turn); otherwise it waits for the next such point."""
        update = self.ctx.usage_update(force=force)
        if update is not None:
            await self.send(update)
        caps = self.rt.client_caps.session
        as_notice = caps is not None and caps.notices is not None
        for n in self.ctx.context_notices(deliver=as_notice or message_end or self._turn_scope is None):
            if as_notice:
                await self.send(w.Notice(severity=n.severity, title=n.title, description=n.text))
            else:
                mark = "⚠" if n.severity == "warning" else "ℹ"
                text = f"\n\n{mark} {n.title}: {n.text}\n\n"
                await self.send(w.AgentMessageChunk(content=w.TextContent(text=text)))

    # --- prompt turn --------------------------------------------------------------------------------------

    async def prompt(self, blocks: list[w.ContentBlock]) -> w.PromptResponse:
        if self.busy:
            raise AcpError.session_busy(self.id)
        user = self._user_message(blocks)
        command = self.rt.commands.match(user)
        self.cancelled = False
        self.turn_error = None
        self.turn_compactions = 0
        idle = self._idle = anyio.Event()
        billed_before = self.ctx.billing.totals()
        stop = "end_turn"
        with anyio.CancelScope() as scope:
            self._turn_scope = scope
            try:
                if command is not None:
                    stop = await command(self)
                else:
                    if self.title is None:
                        self.title = _title_from(user)
                        self.persist(en.TitleEntry(title=self.title))
                    async with self.chunks.turn():  # what is pending goes out when the turn ends, however it ends
                        stop = await run_turn(self, user)
            finally:
                self._turn_scope = None
        if scope.cancelled_caught or self.cancelled:
            stop = "cancelled"
        with anyio.CancelScope(shield=True):
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

    async def _turn_end(self, stop: str) -> None:
        self.updated_at = en.utc_now()
        try:
            await self.tell_setting()  # a change during the turn's last reply: in the context, and in the figure
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

    def _user_message(self, blocks: list[w.ContentBlock]) -> UserMessage:
        parts: list[TextPart | ImagePart] = []
        for block in blocks:
            if isinstance(block, w.TextContent):
                parts.append(TextPart(block.text))
            elif isinstance(block, w.ImageContent):
                parts.append(ImagePart(block.data, block.mime_type))
            elif isinstance(block, w.ResourceLink):
                parts.append(TextPart(f"[@{block.name}]({block.uri})"))
            elif isinstance(block, w.EmbeddedResource):
                res = block.resource
                if "text" in res:
                    parts.append(TextPart(f'<context uri="{res.get("uri", "")}">\n{res["text"]}\n</context>'))
                else:
                    parts.append(TextPart(f"[attached binary resource {res.get('uri', '')}]"))
            else:
                raise AcpError.invalid_params("prompt: audio content is not supported (promptCapabilities.audio)")
        if not parts:
            raise AcpError.invalid_params("prompt: at least one content block is required")
        return UserMessage(content=parts)

    # --- options ------------------------------------------------------------------------------------------

    def config_options(self) -> list[w.SessionConfigOption]:
        return options.config_options(
            self.mode, self.model_id, self.rt.model_choices(self.model_id), self.thought_level
        )

    def mode_state(self) -> w.SessionModeState:
        return options.mode_state(self.mode)

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
            await self.tell_setting()
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

    # --- opening ------------------------------------------------------------------------------------------

    async def announce_open(self) -> None:
        """E4: after the opening response is written: commands, options, then the meter (D2: always)."""
        await self.send(w.AvailableCommandsUpdate(available_commands=self.rt.commands.available()))
        await self.send(w.ConfigOptionUpdate(config_options=self.config_options()))
        await self.report_usage(force=True)

    def stats(self) -> dict[str, Any]:
        return self.ctx.stats()


# Tools whose calls the person sees only as the plan they produce (the model still gets the tool result).
_SHOWN_AS_PLAN = frozenset({"todo_write"})


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
