"""Pruning and compaction of a session's context, and what the person and the session file learn of them.

The decisions that need no protocol (which tool results to prune, what the inventory lists, the budgets, how
the handoff is asked for, which recent messages are kept) live in `agent/pruning.py`, `agent/inventory.py` and
`agent/compaction.py`; this module applies them to a session: it saves the full handoff and inventory, persists
the entries a load needs to rebuild the same context, sends the ACP updates (`compaction` updates when the
client shows them, else a short agent message) and reports the new figure (E5).

A compaction that cannot bring the context under its limit is refused before any request; one that fails or
is cancelled replaces nothing. Each holds automatic compaction (persisted, so a load keeps the hold), as does a
compaction that still leaves the context over the threshold: compaction never runs before every request. The hold is
released by a compaction, by /compact and when the context falls under pruneAt.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Literal, NoReturn, Protocol

import anyio
import msgspec

from ama_acp import ownfiles
from ama_acp.agent.compaction import (
    CompactionFailed,
    Plan,
    Refused,
    budgets,
    context_message,
    handoff_request,
    keep_budget,
    plan_compaction,
    wrapper_text,
    write_handoff,
)
from ama_acp.agent.inventory import LIST_CAPS, Header, build_inventory
from ama_acp.agent.loop import TurnEnd
from ama_acp.agent.pruning import PLACEHOLDER, candidates
from ama_acp.context.meter import USAGE, ContextFigures
from ama_acp.conversation.messages import Message, Usage
from ama_acp.errors import StoreError
from ama_acp.providers import base as pb
from ama_acp.session.accounting.session_context import DeclaredTools, SessionContext
from ama_acp.session.conversation import Conversation
from ama_acp.session.facets import Identified, Located, Persists, ReportsUsage, UsesModel
from ama_acp.session.runtime import Configured, KnowsClient, Stores
from ama_acp.session.store import entries as en
from ama_acp.wire import types as w

log = logging.getLogger(__name__)

HELD = "Automatic compaction is held until the context shrinks or you run /compact."
# Automatic compactions in one prompt turn: each made room and the turn filled it again; past this the turn
# stops and the person decides (a loop of compactions costs a model request each and gets nowhere).
MAX_AUTO_PER_TURN = 3


class CompactingRuntime(Configured, KnowsClient, Stores, Protocol):
    """What compaction needs from the sessions' shared runtime (session/manager.py `SessionManager`)."""


class Saved(Protocol):
    """session/store/journal.py `Journal`: whether the session file is written, and the commands of this process."""

    @property
    def saving(self) -> bool: ...

    @property
    def commands(self) -> list[str]: ...


class HandoffModel(Protocol):
    """The session's model as its loop asks it (session/turn/host.py `SessionHost`): the handoff is asked of the
    same provider, with the same request the next turn would send."""

    def provider(self) -> pb.Provider: ...

    def build_request(self) -> pb.ModelRequest: ...


class CompactedSession(Identified, Located, UsesModel, Persists, ReportsUsage, Protocol):
    """What compaction reads of its session (session/live.py `Session`) and the parts it works through."""

    @property
    def conversation(self) -> Conversation: ...

    @property
    def ctx(self) -> SessionContext: ...

    @property
    def journal(self) -> Saved: ...

    @property
    def tools(self) -> DeclaredTools: ...  # its MCP servers are named in the handoff request (the environment)


class _Attempt(msgspec.Struct):
    """One compaction: where its files go, and what the person was told of it (an `in_progress` must be
    followed by completed or failed)."""

    number: int
    cid: str  # unique per attempt (a refused or failed one is its own entity on the client: patch semantics)
    visible: bool  # the client shows compaction updates; else the person reads agent messages
    folder: Path  # <handoff dir>/compaction-<number>
    previous: Path | None  # the previous compaction's folder
    started: bool = False
    ended: bool = False

    @property
    def handoff_path(self) -> Path:
        return self.folder / "handoff.md"

    @property
    def inventory_path(self) -> Path:
        return self.folder / "inventory.md"


class Compactor:
    """A session's pruning and compaction. The session owns it; its loop host calls `before_request` before
    every model request (where the context is whole), and /compact calls `compact`."""

    def __init__(self, runtime: CompactingRuntime, session: CompactedSession, model: HandoffModel) -> None:
        self._rt = runtime
        self._s = session
        self._model = model
        self.turn_count = 0  # automatic compactions in the running turn (bounded by MAX_AUTO_PER_TURN)

    def new_turn(self) -> None:
        self.turn_count = 0

    async def before_request(self) -> None:
        """Prune at pruneAt (the first tier), then compact at autoCompactAt if that is still needed."""
        await self._release_if_shrunk()
        if await self._maybe_prune():
            await self._release_if_shrunk()
        await self._maybe_compact()
        await self._ensure_room()

    async def _maybe_prune(self) -> bool:
        """Prune when the fill reached pruneAt (also while compaction is held: pruning asks no model); True when
        the context changed."""
        s, c = self._s, self._s.conversation
        auto, _ = s.ctx.meter.thresholds()
        prune_at = s.ctx.prune_threshold()  # pruneAt, or earlier while the prompt cache is known cold (C4)
        if prune_at is None or s.ctx.figures().used < prune_at:
            return False
        keep = keep_budget(self._rt.config.compaction.keep_tokens, auto)  # the same bound as compaction's tail
        positions = candidates(c.messages, keep, s.ctx.meter.estimator.message)
        positions = [p for p in positions if p >= c.context_synthetic]  # never the handoff itself
        if not positions:
            return False
        c.prune(positions)
        s.ctx.cache.pruned()  # /context tells whether it ran early, for a cold cache (C4)
        s.ctx.replace(c.messages)  # the meter estimates the context until new usage (U9)
        s.persist(
            en.ContextEditEntry(
                message_indices=[c.file_index(p) for p in positions],
                action="prune",
                placeholder=PLACEHOLDER,
                meter=s.ctx.meter_state(),
            )
        )
        await s.report_usage()  # E5
        return True

    async def _maybe_compact(self) -> None:
        s = self._s
        auto, _ = s.ctx.meter.thresholds()
        if auto is None or s.ctx.meter.compaction_held or s.ctx.figures().used < auto:
            return
        if self.turn_count >= MAX_AUTO_PER_TURN:  # each one made room, and it filled again: a loop
            await self._stop_turn(
                f"ama already compacted the conversation {self.turn_count} times in this turn, and the context "
                f"is full again ({s.ctx.figures().used:,} tokens): the work does not fit this model's window. ",
            )
        self.turn_count += 1
        await self.compact(manual=False)

    async def _ensure_room(self) -> None:
        """The last check before a request: when compaction is on but could not bring the context under the
        window (refused, failed or held), the request would be rejected by the provider — or, with a result the
        model never saw compacted away, the turn would loop. Stop the turn and say why instead."""
        s = self._s
        auto, _ = s.ctx.meter.thresholds()
        f = s.ctx.figures()
        if auto is None or f.window is None or f.used < f.window:
            return
        await self._stop_turn(
            f"the context ({f.used:,} tokens{' estimated' if f.source != USAGE else ''}) does not fit the "
            f"{f.window:,}-token window of {s.model_id}, and compaction could not free enough room. ",
        )

    async def _stop_turn(self, why: str) -> NoReturn:
        text = (
            f"\n\n⚠ Stopped this turn: {why}Nothing more was sent to the model. Run /compact (with a focus), switch "
            "to a model with a larger window, or start a new session.\n\n"
        )
        log.warning("turn stopped before a request: %s", why.strip())
        await self._s.send(w.AgentMessageChunk(content=w.TextContent(text=text)))
        raise TurnEnd("end_turn")

    # --- one compaction -----------------------------------------------------------------------------------

    async def compact(self, manual: bool, instructions: str = "") -> None:
        """Compact now. Every compaction the person saw start ends, completed or failed: a cancel (or a closed
        session, or the end of stdin) while the handoff streams ends it as failed, replaces nothing and holds
        automatic compaction, as a failure does (docs/context.md "Compaction", step 5: "Failure is safe"), so
        the next request does not start the compaction the person just stopped."""
        attempt = self._attempt()
        try:
            await self._compact(attempt, manual, instructions)
        except anyio.get_cancelled_exc_class():
            if attempt.started and not attempt.ended:
                with anyio.CancelScope(shield=True):
                    self.hold(True, "compaction cancelled")
                    said = f"Compaction cancelled; the conversation is unchanged. {HELD}"
                    await self._ended(attempt, "failed", said, error="cancelled; the conversation is unchanged")
            raise

    def _attempt(self) -> _Attempt:
        s = self._s
        number = s.conversation.compactions + 1
        caps = self._rt.client_caps.session
        handoff_dir = Path(self._rt.store.handoff_dir(s.id))
        return _Attempt(
            number=number,
            cid=f"{s.id}-c{number}-{os.urandom(3).hex()}",
            visible=caps is not None and caps.compaction is not None,
            folder=handoff_dir / f"compaction-{number}",
            previous=handoff_dir / f"compaction-{number - 1}" if number > 1 else None,
        )

    async def _compact(self, attempt: _Attempt, manual: bool, instructions: str) -> None:
        s = self._s
        served_by = s.model_id  # the handoff is billed as the model asked, even if the person switches meanwhile
        if manual:
            self.hold(False, "/compact")
        f = s.ctx.figures()
        auto, _ = s.ctx.meter.thresholds()
        breakdown = s.ctx.meter.breakdown()
        prefix = breakdown.system_prompt + breakdown.tool_declarations
        plan = self._plan(attempt, f.used, auto, prefix)
        if isinstance(plan, Refused):
            over = auto is not None and f.used >= auto
            await self._refused(attempt, plan.reason, hold=not manual or over)
            return
        attempt.started = True  # before the send: a cancel during it must still end the compaction
        if attempt.visible:
            await s.send(w.CompactionUpdate(compaction_id=attempt.cid, status="in_progress"))
        inventory = self._inventory(attempt, f)
        room = budgets(plan.room_tokens, inventory)
        request = await self._request(attempt, inventory, room.handoff_chars, instructions, f.window, prefix)
        handoff = await self._write_handoff(attempt, request, served_by)
        if handoff is None or not await self._save(attempt, handoff, inventory):
            return
        message = context_message(
            attempt.number,
            handoff,
            inventory,
            handoff_path=str(attempt.handoff_path),
            inventory_path=str(attempt.inventory_path),
            handoff_chars=room.handoff_chars,
            inventory_chars=room.inventory_chars,
        )
        self._replace(attempt, message, plan.kept, room.handoff_chars, room.inventory_chars)
        await self._completed(attempt, manual, len(plan.kept), auto)

    def _plan(self, attempt: _Attempt, used: int, auto: int | None, prefix: int) -> Plan | Refused:
        est = self._s.ctx.meter.estimator
        return plan_compaction(
            self._s.conversation.messages,
            self._s.conversation.context_synthetic,
            used=used,
            prefix_tokens=prefix,
            wrapper_tokens=est.text(wrapper_text(str(attempt.handoff_path), str(attempt.inventory_path))),
            auto_compact_at=auto,
            keep_tokens=self._rt.config.compaction.keep_tokens,
            estimate=est.message,
        )

    def _inventory(self, attempt: _Attempt, f: ContextFigures) -> str:
        s, previous = self._s, attempt.previous
        header = Header(
            session_id=s.id,
            cwd=s.cwd,
            model=s.model_id,
            context=f"{f.used:,} / {f.window:,} tokens ({f.source})" if f.window else f"{f.used:,} tokens ({f.source})",
            time=en.utc_now(),
            previous_handoff=str(previous / "handoff.md") if previous else None,
            previous_inventory=str(previous / "inventory.md") if previous else None,
        )
        messages, slash_commands = self._history()
        return build_inventory(messages, header, slash_commands)

    def _history(self) -> tuple[list[Message], list[str]]:
        """The whole stored conversation and the slash commands the person ran (stored as CommandEntry lines,
        not as messages), so the inventory covers what came before the current context (the first request of a
        session compacted five times is in the fifth inventory). Unsaved session: the context and this
        process's commands."""
        s = self._s
        if s.journal.saving:
            try:
                loaded = self._rt.store.read(s.id)
                return loaded.messages, [e.text for e in loaded.entries if isinstance(e, en.CommandEntry)]
            except (OSError, StoreError) as exc:
                log.warning("compaction: cannot read the session file for the inventory (%s); using the context", exc)
        return s.conversation.messages[s.conversation.context_synthetic :], list(s.journal.commands)

    async def _request(
        self, attempt: _Attempt, inventory: str, handoff_chars: int, instructions: str, window: int | None, prefix: int
    ) -> pb.ModelRequest:
        s = self._s
        previous = attempt.previous
        est = s.ctx.meter.estimator
        from ama_acp.tools.git_state import read_git_state  # at a compaction only (issue 41: not at the start)

        # Locally, bounded, never raising; None outside a work tree. No git from inside the session's roots.
        git = await read_git_state(s.cwd, workspace_roots=s.additional_directories)
        return handoff_request(
            self._model.build_request(),
            inventory,
            handoff_chars,
            instructions=instructions,
            window=window,
            prefix_tokens=prefix,
            estimate_text=est.text,
            estimate=est.message,
            git_state=git.render() if git is not None else "",
            # The previous handoff opens the context: the model carries it over, and it outlives a trim.
            previous=str(previous / "handoff.md") if previous is not None else None,
            carried=s.conversation.context_synthetic,
            mcp_servers=list(s.tools.mcp_declarations()),
        )

    async def _write_handoff(self, attempt: _Attempt, request: pb.ModelRequest, served_by: str) -> str | None:
        """The handoff the model wrote, or None when it failed (the person was told; nothing was replaced)."""
        s = self._s

        def bill(usage: Usage | None, interrupted: bool = False) -> None:
            s.ctx.bill(served_by, usage, enters_context=False, interrupted=interrupted)
            # Stored even without usage: the billing state changed (an unreported request), and a load must know.
            s.persist(
                en.UsageEntry(
                    model_id=served_by,
                    usage=usage or Usage(),
                    cost=s.ctx.last_cost,
                    purpose="compaction",
                    billing=s.ctx.billing_state(),
                )
            )

        try:
            handoff = await write_handoff(self._model.provider(), request, bill, lambda: bill(None, interrupted=True))
        except CompactionFailed as exc:
            await self._failed(attempt, str(exc))
            return None
        except Exception as exc:  # a bug of ours: the conversation stays as it was, and the log has the traceback
            log.exception("compaction failed unexpectedly")
            await self._failed(attempt, f"internal error: {type(exc).__name__}")
            return None
        if handoff is None:
            await self._failed(attempt, "the model returned no handoff")
        return handoff

    async def _save(self, attempt: _Attempt, handoff: str, inventory: str) -> bool:
        """The full texts on disk (what goes back to the model is clipped, the files never are)."""
        # Through the one opener of ama's folders: a link planted as the file or a folder on the way is replaced
        # or refused, never written through; a FIFO cannot freeze /compact (issue 39 point 11).
        root = self._rt.store.sessions_dir.parent
        try:
            ownfiles.write_file(attempt.handoff_path, root, handoff.encode("utf-8", "replace"))
            ownfiles.write_file(attempt.inventory_path, root, inventory.encode("utf-8", "replace"))
        except OSError as exc:
            await self._failed(attempt, f"cannot save the handoff: {exc}")
            return False
        self._rt.store.prune_handoffs(self._rt.config.compaction.retention_days, except_id=self._s.id)
        return True

    def _replace(
        self, attempt: _Attempt, message: Message, kept: list[Message], handoff_chars: int, inventory_chars: int
    ) -> None:
        """The context replaced, and the entry a load needs to rebuild the same one."""
        s, number = self._s, attempt.number
        kept_from = s.conversation.apply_compaction(number, message, kept)
        s.ctx.replace(s.conversation.messages)  # the meter estimates the context until new usage (U9)
        s.ctx.compacted(number)  # every later readout names it; the tier is stale until measured
        s.ctx.meter.set_compaction(held=False)  # a CompactionEntry releases the hold on load as well
        s.persist(
            en.CompactionEntry(
                number=number,
                summary_path=f"compaction-{number}/handoff.md",
                inventory_path=f"compaction-{number}/inventory.md",
                kept_from_index=kept_from,
                meter=s.ctx.meter_state(),
                handoff_chars=handoff_chars,
                inventory_chars=inventory_chars,
                list_caps=dict(LIST_CAPS),  # so a load rebuilds the same copy, whatever later caps say
            )
        )

    async def _completed(self, attempt: _Attempt, manual: bool, kept: int, auto: int | None) -> None:
        how = "by request" if manual else "automatically"
        summary = (
            f"Compacted the conversation ({how}): a handoff replaces the older messages; {kept} recent messages kept."
        )
        after = self._s.ctx.figures().used
        if auto is not None and after >= auto:  # estimates were off: never compact again before the next request
            self.hold(True, f"the context is still at {after:,} tokens after compaction {attempt.number}")
            summary += f" The context is still over {auto:,} tokens. {HELD}"
        with anyio.CancelScope(shield=True):  # the context was replaced: a cancel now must not pass for a failure
            await self._ended(attempt, "completed", summary, summary=[w.TextContent(text=summary)])
            await self._s.report_usage()  # E5

    # --- holds and ends -----------------------------------------------------------------------------------

    def hold(self, held: bool, reason: str) -> None:
        """Hold or release automatic compaction, persisted (a load applies the last entry)."""
        meter = self._s.ctx.meter
        if meter.compaction_held == held:
            return
        meter.set_compaction(held=held)
        self._s.persist(en.CompactionHoldEntry(held=held, reason=reason))

    async def _release_if_shrunk(self) -> None:
        s = self._s
        if not s.ctx.meter.compaction_held:
            return
        _, prune_at = s.ctx.meter.thresholds()
        used = s.ctx.figures().used
        if prune_at is not None and used < prune_at:
            self.hold(False, f"the context is under pruneAt ({used:,} < {prune_at:,} tokens)")
            await s.report_usage()

    async def _refused(self, attempt: _Attempt, reason: str, hold: bool) -> None:
        """No request was made: say why, and hold automatic compaction when it would only be refused again."""
        log.info("compaction refused: %s", reason)
        if hold:
            self.hold(True, reason)
            reason = f"{reason} {HELD}"
        if attempt.visible:
            await self._s.send(w.CompactionUpdate(compaction_id=attempt.cid, status="failed", error=reason))
        else:
            await self._s.send(w.AgentMessageChunk(content=w.TextContent(text=f"\n\n_{reason}_\n\n")))
        await self._s.report_usage()

    async def _failed(self, attempt: _Attempt, error: str) -> None:
        log.warning("compaction failed: %s", error)
        self.hold(True, f"compaction failed: {error}")  # not retried before every request
        said = f"Compaction failed ({error}); the conversation is unchanged. Run /compact to try again."
        await self._ended(attempt, "failed", said, error=error)
        await self._s.report_usage()

    async def _ended(
        self,
        attempt: _Attempt,
        status: Literal["completed", "failed"],
        said: str,
        *,
        error: str | None = None,
        summary: list[w.ContentBlock] | None = None,
    ) -> None:
        """The compaction's end: a `compaction_update` when the client shows them, else `said` as an agent
        message."""
        attempt.ended = True
        if attempt.visible:
            await self._s.send(
                w.CompactionUpdate(compaction_id=attempt.cid, status=status, summary=summary, error=error)
            )
        else:
            await self._s.send(w.AgentMessageChunk(content=w.TextContent(text=f"\n\n_{said}_\n\n")))
