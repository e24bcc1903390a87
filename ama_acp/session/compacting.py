"""Pruning and compaction of a session's context, and what the person and the session file learn of them.

The decisions that need no protocol (which tool results to prune, what the inventory lists, how the handoff
is asked for, which recent messages are kept) live in `agent/pruning.py` and `agent/compaction.py`; this
module applies them to a session: it stores the handoff, persists the entries a load needs to rebuild the
same context, sends the ACP updates (`compaction` updates when the client shows them, else a short agent
message) and reports the new figure (E5). A failed compaction replaces nothing and holds automatic
compaction, so it is not retried before every request.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ama_acp.agent.compaction import (
    HANDOFF_BUDGET,
    INVENTORY_BUDGET,
    CompactionFailed,
    handoff_message,
    handoff_prompt,
    recent_messages,
    write_handoff,
)
from ama_acp.agent.pruning import PLACEHOLDER, candidates, pruned
from ama_acp.conversation.messages import ToolResultMessage, Usage
from ama_acp.session import entries as en
from ama_acp.wire import types as w

if TYPE_CHECKING:
    from ama_acp.session.runtime import Runtime
    from ama_acp.session.session import Session

log = logging.getLogger(__name__)


async def before_request(rt: Runtime, session: Session) -> None:
    """Prune at pruneAt (the first tier), then compact at autoCompactAt if that is still needed."""
    await maybe_prune(rt, session)
    await maybe_compact(rt, session)


async def maybe_prune(rt: Runtime, session: Session) -> bool:
    """Prune when the fill reached pruneAt; True when the context changed."""
    f = session.ctx.figures()
    if f.prune_at is None or f.used < f.prune_at:
        return False
    positions = candidates(session.messages, rt.config.compaction.keep_tokens, session.ctx.meter.estimator.message)
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
    f = session.ctx.figures()
    if f.auto_compact_at is not None and f.used >= f.auto_compact_at:
        await compact(rt, session, manual=False)


async def compact(rt: Runtime, session: Session, manual: bool, instructions: str = "") -> None:
    number = session.compactions + 1
    cid = f"{session.id}-c{number}"
    caps = rt.client_caps.session
    visible = caps is not None and caps.compaction is not None
    if visible:
        await session.send(w.CompactionUpdate(compaction_id=cid, status="in_progress"))
    prompt, inventory = handoff_prompt(session.messages, instructions)

    def bill(usage: Usage | None) -> None:
        session.ctx.bill(session.model_id, usage, enters_context=False)
        if usage is not None:
            session.persist(
                en.UsageEntry(
                    model_id=session.model_id,
                    usage=usage,
                    cost=session.ctx.last_cost,
                    purpose="compaction",
                    billing=session.ctx.billing_state(),
                )
            )

    try:
        handoff = await write_handoff(session.provider(), session.build_request(), prompt, bill)
    except CompactionFailed as exc:
        await _failed(session, cid, visible, str(exc))
        return
    except Exception as exc:  # a bug of ours: the conversation stays as it was, and the log has the traceback
        log.exception("compaction failed unexpectedly")
        await _failed(session, cid, visible, f"internal error: {type(exc).__name__}")
        return
    if handoff is None:
        await _failed(session, cid, visible, "the model returned no handoff")
        return
    handoff = handoff[:HANDOFF_BUDGET]
    inv = inventory[:INVENTORY_BUDGET]
    kept = recent_messages(session.messages, rt.config.compaction.keep_tokens, session.ctx.meter.estimator.message)
    folder = Path(rt.store.handoff_dir(session.id)) / f"compaction-{number}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "handoff.md").write_text(handoff, encoding="utf-8")
        (folder / "inventory.md").write_text(inv, encoding="utf-8")
    except OSError as exc:
        await _failed(session, cid, visible, f"cannot save the handoff: {exc}")
        return
    rt.store.prune_handoffs(except_id=session.id)
    kept_from = session.message_total - len(kept)
    session.replace_context([handoff_message(handoff, inv), *kept])
    session.compactions = number
    session.context_first, session.context_synthetic = kept_from, 1
    session.ctx.meter.set_compaction(held=False)
    session.persist(
        en.CompactionEntry(
            number=number,
            summary_path=f"compaction-{number}/handoff.md",
            inventory_path=f"compaction-{number}/inventory.md",
            kept_from_index=kept_from,
            meter=session.ctx.meter_state(),
        )
    )
    how = "by request" if manual else "automatically"
    summary = (
        f"Compacted the conversation ({how}): a handoff replaces the older messages; {len(kept)} recent messages kept."
    )
    if visible:
        await session.send(
            w.CompactionUpdate(compaction_id=cid, status="completed", summary=[w.TextContent(text=summary)])
        )
    else:
        await session.send(w.AgentMessageChunk(content=w.TextContent(text=f"\n\n_{summary}_\n\n")))
    await session.report_usage()  # E5


async def _failed(session: Session, cid: str, visible: bool, error: str) -> None:
    log.warning("compaction failed: %s", error)
    session.ctx.meter.set_compaction(held=True)  # not retried before every request
    if visible:
        await session.send(w.CompactionUpdate(compaction_id=cid, status="failed", error=error))
    else:
        text = f"\n\n_Compaction failed ({error}); the conversation is unchanged. Run /compact to try again._\n\n"
        await session.send(w.AgentMessageChunk(content=w.TextContent(text=text)))
    await session.report_usage()
