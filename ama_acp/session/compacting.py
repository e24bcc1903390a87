"""Pruning and compaction of a session's context, and what the person and the session file learn of them.

The decisions that need no protocol (which tool results to prune, what the inventory lists, the budgets, how
the handoff is asked for, which recent messages are kept) live in `agent/pruning.py`, `agent/inventory.py` and
`agent/compaction.py`; this module applies them to a session: it saves the full handoff and inventory, persists
the entries a load needs to rebuild the same context, sends the ACP updates (`compaction` updates when the
client shows them, else a short agent message) and reports the new figure (E5).

A compaction that cannot bring the context under its limit is refused before any request; one that fails
replaces nothing. Either holds automatic compaction (persisted, so a load keeps the hold), as does a compaction
that still leaves the context over the threshold: compaction never runs before every request. The hold is
released by a compaction, by /compact and when the context falls under pruneAt.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import anyio

from ama_acp.agent.compaction import (
    CompactionFailed,
    Refused,
    budgets,
    context_message,
    handoff_request,
    keep_budget,
    plan_compaction,
    wrapper_text,
    write_handoff,
)
from ama_acp.agent.inventory import Header, build_inventory
from ama_acp.agent.loop import TurnEnd
from ama_acp.agent.pruning import PLACEHOLDER, candidates, pruned
from ama_acp.context.meter import USAGE
from ama_acp.conversation.messages import Message, ToolResultMessage, Usage
from ama_acp.errors import StoreError
from ama_acp.session import entries as en
from ama_acp.tools.git_state import read_git_state
from ama_acp.wire import types as w

if TYPE_CHECKING:
    from ama_acp.session.runtime import Runtime
    from ama_acp.session.session import Session

log = logging.getLogger(__name__)

HELD = "Automatic compaction is held until the context shrinks or you run /compact."
# Automatic compactions in one prompt turn: each made room and the turn filled it again; past this the turn
# stops and the person decides (a loop of compactions costs a model request each and gets nowhere).
MAX_AUTO_PER_TURN = 3


def thresholds(rt: Runtime, session: Session) -> tuple[int | None, int | None]:
    """(autoCompactAt, pruneAt) of the current window, whether or not compaction is held (the meter's figures
    leave them out while it is: U13)."""
    return session.ctx.meter.thresholds()


async def before_request(rt: Runtime, session: Session) -> None:
    """Prune at pruneAt (the first tier), then compact at autoCompactAt if that is still needed."""
    await _release_if_shrunk(rt, session)
    if await maybe_prune(rt, session):
        await _release_if_shrunk(rt, session)
    await maybe_compact(rt, session)
    await ensure_room(rt, session)


async def maybe_prune(rt: Runtime, session: Session) -> bool:
    """Prune when the fill reached pruneAt (also while compaction is held: pruning asks no model); True when
    the context changed."""
    auto, prune_at = thresholds(rt, session)
    if prune_at is None or session.ctx.figures().used < prune_at:
        return False
    keep = keep_budget(rt.config.compaction.keep_tokens, auto)  # the same bound as compaction's kept tail
    positions = candidates(session.messages, keep, session.ctx.meter.estimator.message)
    positions = [p for p in positions if p >= session.context_synthetic]  # never the handoff itself
    if not positions:
        return False
    context = list(session.messages)
    for p in positions:
        message = context[p]
        assert isinstance(message, ToolResultMessage)  # candidates() returns tool results only
        context[p] = pruned(message)
    session.replace_context(context)
    session.persist(
        en.ContextEditEntry(
            message_indices=[session.file_index(p) for p in positions],
            action="prune",
            placeholder=PLACEHOLDER,
            meter=session.ctx.meter_state(),
        )
    )
    await session.report_usage()  # E5
    return True


async def maybe_compact(rt: Runtime, session: Session) -> None:
    auto, _ = thresholds(rt, session)
    if auto is None or session.ctx.meter.compaction_held or session.ctx.figures().used < auto:
        return
    if session.turn_compactions >= MAX_AUTO_PER_TURN:  # each one made room, and it filled again: a loop
        await _stop_turn(
            session,
            f"ama already compacted the conversation {session.turn_compactions} times in this turn, and the context "
            f"is full again ({session.ctx.figures().used:,} tokens): the work does not fit this model's window. ",
        )
    session.turn_compactions += 1
    await compact(rt, session, manual=False)


async def ensure_room(rt: Runtime, session: Session) -> None:
    """The last check before a request: when compaction is on but could not bring the context under the window
    (refused, failed or held), the request would be rejected by the provider — or, with a result the model never
    saw compacted away, the turn would loop. Stop the turn and say why instead."""
    auto, _ = thresholds(rt, session)
    f = session.ctx.figures()
    if auto is None or f.window is None or f.used < f.window:
        return
    await _stop_turn(
        session,
        f"the context ({f.used:,} tokens{' estimated' if f.source != USAGE else ''}) does not fit the "
        f"{f.window:,}-token window of {session.model_id}, and compaction could not free enough room. ",
    )


async def _stop_turn(session: Session, why: str) -> NoReturn:
    text = (
        f"\n\n⚠ Stopped this turn: {why}Nothing more was sent to the model. Run /compact (with a focus), switch "
        "to a model with a larger window, or start a new session.\n\n"
    )
    log.warning("turn stopped before a request: %s", why.strip())
    await session.send(w.AgentMessageChunk(content=w.TextContent(text=text)))
    raise TurnEnd("end_turn")


@dataclass
class _Attempt:
    """What the person was told of one compaction: an `in_progress` must be followed by completed or failed."""

    cid: str = ""
    visible: bool = False
    started: bool = False
    ended: bool = False


async def compact(rt: Runtime, session: Session, manual: bool, instructions: str = "") -> None:
    """Compact now. Every compaction the person saw start ends, completed or failed: a cancel (or a closed
    session, or the end of stdin) while the handoff streams ends it as failed, replaces nothing and holds
    nothing (the compaction was not shown to be useless)."""
    attempt = _Attempt()
    try:
        await _compact(rt, session, manual, instructions, attempt)
    except anyio.get_cancelled_exc_class():
        if attempt.started and not attempt.ended:
            with anyio.CancelScope(shield=True):
                said = "Compaction cancelled; the conversation is unchanged."
                await _ended(session, attempt, "failed", said, error="cancelled; the conversation is unchanged")
        raise


async def _ended(
    session: Session, attempt: _Attempt, status: Literal["completed", "failed"], said: str, **what: Any
) -> None:
    """The compaction's end: a `compaction_update` when the client shows them, else `said` as an agent message."""
    attempt.ended = True
    if attempt.visible:
        await session.send(w.CompactionUpdate(compaction_id=attempt.cid, status=status, **what))
    else:
        await session.send(w.AgentMessageChunk(content=w.TextContent(text=f"\n\n_{said}_\n\n")))


async def _compact(rt: Runtime, session: Session, manual: bool, instructions: str, attempt: _Attempt) -> None:
    number = session.compactions + 1
    # Unique per attempt (a refused or failed one is its own entity on the client: patch semantics).
    cid = attempt.cid = f"{session.id}-c{number}-{secrets.token_hex(3)}"
    caps = rt.client_caps.session
    visible = attempt.visible = caps is not None and caps.compaction is not None
    served_by = session.model_id  # the handoff is billed as the model asked, even if the person switches meanwhile
    if manual:
        _hold(session, False, "/compact")
    f = session.ctx.figures()
    auto, _ = thresholds(rt, session)
    est = session.ctx.meter.estimator
    breakdown = session.ctx.meter.breakdown()
    prefix = breakdown.system_prompt + breakdown.tool_declarations
    handoff_dir = Path(rt.store.handoff_dir(session.id))
    folder = handoff_dir / f"compaction-{number}"
    handoff_path, inventory_path = folder / "handoff.md", folder / "inventory.md"
    plan = plan_compaction(
        session.messages,
        session.context_synthetic,
        used=f.used,
        prefix_tokens=prefix,
        wrapper_tokens=est.text(wrapper_text(str(handoff_path), str(inventory_path))),
        auto_compact_at=auto,
        keep_tokens=rt.config.compaction.keep_tokens,
        estimate=est.message,
    )
    if isinstance(plan, Refused):
        over = auto is not None and f.used >= auto
        await _refused(session, cid, visible, plan.reason, hold=not manual or over)
        return
    attempt.started = True  # before the send: a cancel during it must still end the compaction
    if visible:
        await session.send(w.CompactionUpdate(compaction_id=cid, status="in_progress"))
    previous = handoff_dir / f"compaction-{number - 1}" if number > 1 else None
    header = Header(
        session_id=session.id,
        cwd=session.cwd,
        model=session.model_id,
        context=f"{f.used:,} / {f.window:,} tokens ({f.source})" if f.window else f"{f.used:,} tokens ({f.source})",
        time=en.utc_now(),
        previous_handoff=str(previous / "handoff.md") if previous else None,
        previous_inventory=str(previous / "inventory.md") if previous else None,
    )
    messages, slash_commands = _history(rt, session)
    inventory = build_inventory(messages, header, slash_commands)
    room = budgets(plan.room_tokens, inventory)
    # Locally, bounded, never raising; None outside a work tree. No git from inside the session's roots.
    git = await read_git_state(session.cwd, workspace_roots=session.additional_directories)
    request = handoff_request(
        session.build_request(),
        inventory,
        room.handoff_chars,
        instructions=instructions,
        window=f.window,
        prefix_tokens=prefix,
        estimate_text=est.text,
        estimate=est.message,
        git_state=git.render() if git is not None else "",
    )

    def bill(usage: Usage | None, interrupted: bool = False) -> None:
        session.ctx.bill(served_by, usage, enters_context=False, interrupted=interrupted)
        # Stored even without usage: the billing state changed (an unreported request), and a load must know.
        session.persist(
            en.UsageEntry(
                model_id=served_by,
                usage=usage or Usage(),
                cost=session.ctx.last_cost,
                purpose="compaction",
                billing=session.ctx.billing_state(),
            )
        )

    try:
        handoff = await write_handoff(session.provider(), request, bill, lambda: bill(None, interrupted=True))
    except CompactionFailed as exc:
        await _failed(session, attempt, str(exc))
        return
    except Exception as exc:  # a bug of ours: the conversation stays as it was, and the log has the traceback
        log.exception("compaction failed unexpectedly")
        await _failed(session, attempt, f"internal error: {type(exc).__name__}")
        return
    if handoff is None:
        await _failed(session, attempt, "the model returned no handoff")
        return
    try:  # the full texts: what goes back to the model is clipped, the files never are
        folder.mkdir(parents=True, exist_ok=True)
        handoff_path.write_text(handoff, encoding="utf-8")
        inventory_path.write_text(inventory, encoding="utf-8")
    except OSError as exc:
        await _failed(session, attempt, f"cannot save the handoff: {exc}")
        return
    rt.store.prune_handoffs(rt.config.compaction.retention_days, except_id=session.id)
    # The kept tail holds stored messages only (never a previous handoff), so this is a valid file index.
    kept_from = max(session.context_first, session.message_total - len(plan.kept))
    message = context_message(
        number,
        handoff,
        inventory,
        handoff_path=str(handoff_path),
        inventory_path=str(inventory_path),
        handoff_chars=room.handoff_chars,
        inventory_chars=room.inventory_chars,
    )
    session.replace_context([message, *plan.kept])
    session.compactions = number
    session.context_first, session.context_synthetic = kept_from, 1
    session.ctx.meter.set_compaction(held=False)  # a CompactionEntry releases the hold on load as well
    session.persist(
        en.CompactionEntry(
            number=number,
            summary_path=f"compaction-{number}/handoff.md",
            inventory_path=f"compaction-{number}/inventory.md",
            kept_from_index=kept_from,
            meter=session.ctx.meter_state(),
            handoff_chars=room.handoff_chars,
            inventory_chars=room.inventory_chars,
        )
    )
    how = "by request" if manual else "automatically"
    summary = (
        f"Compacted the conversation ({how}): a handoff replaces the older messages; {len(plan.kept)} recent "
        "messages kept."
    )
    after = session.ctx.figures().used
    if auto is not None and after >= auto:  # estimates were off: never compact again before the next request
        _hold(session, True, f"the context is still at {after:,} tokens after compaction {number}")
        summary += f" The context is still over {auto:,} tokens. {HELD}"
    with anyio.CancelScope(shield=True):  # the context was replaced: a cancel now must not pass for a failure
        await _ended(session, attempt, "completed", summary, summary=[w.TextContent(text=summary)])
        await session.report_usage()  # E5


def _history(rt: Runtime, session: Session) -> tuple[list[Message], list[str]]:
    """The whole stored conversation and the slash commands the person ran (stored as CommandEntry lines, not
    as messages), so the inventory covers what came before the current context (the first request of a session
    compacted five times is in the fifth inventory). Unsaved session: the context and this process's commands."""
    if session.writer is not None:
        try:
            loaded = rt.store.read(session.id)
            return loaded.messages, [e.text for e in loaded.entries if isinstance(e, en.CommandEntry)]
        except (OSError, StoreError) as exc:
            log.warning("compaction: cannot read the session file for the inventory (%s); using the context", exc)
    return session.messages[session.context_synthetic :], list(session.slash_commands)


def _hold(session: Session, held: bool, reason: str) -> None:
    """Hold or release automatic compaction, persisted (a load applies the last entry)."""
    if session.ctx.meter.compaction_held == held:
        return
    session.ctx.meter.set_compaction(held=held)
    session.persist(en.CompactionHoldEntry(held=held, reason=reason))


async def _release_if_shrunk(rt: Runtime, session: Session) -> None:
    if not session.ctx.meter.compaction_held:
        return
    _, prune_at = thresholds(rt, session)
    used = session.ctx.figures().used
    if prune_at is not None and used < prune_at:
        _hold(session, False, f"the context is under pruneAt ({used:,} < {prune_at:,} tokens)")
        await session.report_usage()


async def _refused(session: Session, cid: str, visible: bool, reason: str, hold: bool) -> None:
    """No request was made: say why, and hold automatic compaction when it would only be refused again."""
    log.info("compaction refused: %s", reason)
    if hold:
        _hold(session, True, reason)
        reason = f"{reason} {HELD}"
    if visible:
        await session.send(w.CompactionUpdate(compaction_id=cid, status="failed", error=reason))
    else:
        await session.send(w.AgentMessageChunk(content=w.TextContent(text=f"\n\n_{reason}_\n\n")))
    await session.report_usage()


async def _failed(session: Session, attempt: _Attempt, error: str) -> None:
    log.warning("compaction failed: %s", error)
    _hold(session, True, f"compaction failed: {error}")  # not retried before every request
    said = f"Compaction failed ({error}); the conversation is unchanged. Run /compact to try again."
    await _ended(session, attempt, "failed", said, error=error)
    await session.report_usage()
