"""A session's context accounting, and its reports on the ACP wire.

The context package (estimator, meter, billing, reporter, tiers) is pure and knows no protocol; this module
wires it to one session and maps its figures to ACP (`usage_update`, notices, `_ama/session_stats`,
`/context`). Prices reach the billing by injection: the runtime answers `price(model_id, usage)` from its
catalog.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal, Protocol

import msgspec

from ama_acp.agent.instruction_files import nested_section
from ama_acp.agent.instructions import SessionInstructions
from ama_acp.config import Price
from ama_acp.context.billing import BilledTotals, Billing, BillingState
from ama_acp.context.estimate import Estimator, make_estimator
from ama_acp.context.meter import ESTIMATE, USAGE, ContextFigures, ContextMeter, MeterState, reported
from ama_acp.context.reporter import UsageReporter
from ama_acp.context.request_size import tools_json
from ama_acp.context.tiers import (
    DANGER,
    HIGH,
    MID,
    WARNING,
    PrefixPart,
    Readout,
    TierWatch,
    boot_cost,
    boot_text,
    caps_meta,
    caps_text,
    notice_text,
    rank,
)
from ama_acp.conversation.messages import AssistantMessage, Message, Usage
from ama_acp.conversation.tools import ToolSpec
from ama_acp.session.accounting.budget import Budget
from ama_acp.session.accounting.held_figure import PendingPrefix, mcp_digests, stored_digests
from ama_acp.session.accounting.prompt_cache import SessionCache
from ama_acp.session.conversation import StoredFigures
from ama_acp.session.facets import Identified, UsesModel
from ama_acp.session.runtime import Configured
from ama_acp.shaping.skills import Found
from ama_acp.wire import types as w

log = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def shared_estimator(name: str) -> Estimator:
    return make_estimator(name)


class AccountingRuntime(Configured, Protocol):
    """What the accounting needs from the sessions' shared runtime."""

    def context_window(self, model_id: str) -> int | None:
        """The model's window in tokens; None when the catalog does not know it."""
        ...

    def price(self, model_id: str, usage: Usage | None) -> Price | None:
        """The price of one request of this model with this usage; None when it is not known."""
        ...


class DeclaredTools(Protocol):
    """The tools a session declares to the model (session/turn/toolset.py `SessionTools`)."""

    def tool_specs(self) -> Sequence[ToolSpec]:
        """Every tool the next request declares: ama's own and the MCP servers'."""
        ...

    def tools_version(self) -> int:
        """Changes whenever `tool_specs()` does."""
        ...

    def mcp_declarations(self) -> dict[str, list[ToolSpec]]:
        """The MCP servers' declarations, by server (empty without servers)."""
        ...


class AccountedSession(Identified, UsesModel, Protocol):
    """What the accounting reads from its session."""

    @property
    def tools(self) -> DeclaredTools: ...

    @property
    def instructions(self) -> SessionInstructions: ...

    @property
    def skills(self) -> Found: ...

    def system_prompt(self) -> str: ...


class ContextNotice(msgspec.Struct, frozen=True):
    """Something the person is told about the context, in either form: an ACP `notice` when the client
    advertised `session.notices`, else an agent message (the session picks the form and the moment)."""

    severity: Literal["info", "warning"]
    title: str
    text: str
    meta: dict[str, object] | None = None  # the notice's `_meta` (`{"ama": {...}}`: the tier caps, for a program)


_TIER_SEVERITY: dict[str, Literal["info", "warning"]] = {
    MID: "info",
    HIGH: "info",
    WARNING: "warning",
    DANGER: "warning",
}


def billed_stats(t: BilledTotals) -> dict[str, int | float]:
    """S2 `billed`: the request counts always; token sums only when some request reported usage (with every
    request unreported a sum would be an invented 0, U15); cache figures only where some request reported
    them; `cacheReadShare` = cacheRead / (input + cacheRead + cacheWrite), 0–1, where known."""
    out: dict[str, int | float] = {"requests": t.requests, "sideRequests": t.side_requests, "unreported": t.unreported}
    if t.interrupted:
        out["interrupted"] = t.interrupted
    if t.requests == 0 or t.reported > 0:
        out.update(input=t.input, output=t.output, total=t.total)
        for key, value in (("cacheRead", t.cache_read), ("cacheWrite", t.cache_write), ("reasoning", t.reasoning)):
            if value is not None:
                out[key] = value
    share = t.cache_read_share()
    if share is not None:
        out["cacheReadShare"] = share
    return out


def wire_usage(payload: Mapping[str, Any]) -> w.UsageUpdate:
    """A meter's payload (context/reporter.py `usage_payload`) as the wire struct: a null `cost` stays null, the
    cost is unknown (docs/rules.md P1)."""
    cost = payload["cost"]
    return w.UsageUpdate(
        used=payload["used"],
        size=payload["size"],
        cost=w.Cost(amount=cost["amount"], currency=cost["currency"]) if cost is not None else None,
        meta=payload["_meta"],
    )


class SessionContext:
    # A loaded session's stored anchor waiting for the load's MCP servers (session/accounting/held_figure.py); None otherwise.
    reopen: PendingPrefix | None = None

    def __init__(self, runtime: AccountingRuntime, session: AccountedSession) -> None:
        self._rt = runtime
        self._session = session
        cfg = runtime.config
        self.meter = ContextMeter(
            shared_estimator(cfg.context.estimator),
            window=runtime.context_window(session.model_id),
            reserve_tokens=cfg.compaction.reserve_tokens,
            compaction_enabled=cfg.compaction.enabled,
            caps=cfg.tiers.caps,
        )
        self.billing = Billing()
        self.cache = SessionCache(runtime, session)  # the prompt cache: saved cost, warm or cold (C1–C4)
        self.reporter = UsageReporter(cfg.tiers.caps)  # the caps ride in every usage_update (`tierCaps`)
        self.tiers = TierWatch()
        self.budget = Budget(cfg.budget.session_usd)  # what the session may spend (session/accounting/budget.py)
        self.last_cost: float | None = None
        self._tools_json: str | None = None
        self._tools_for = -1  # the session's tools_version() the JSON was built from
        # Notices waiting for a moment when the agent-message form may be sent (never inside a streamed reply).
        self._pending_tier: str | None = None
        self._pending_over: ContextNotice | None = None
        self._told_over: set[tuple[str, int]] = set()  # (model, window): an over-window reading is told once
        self.compactions = 0  # the number of the session's last compaction, named in every readout (seed 002)
        self._stale: str | None = None  # what left the figure an estimate: a switch, a compaction (tier `stale`)
        self._held_boot: int | None = None  # the boot cost a loaded session's stored state had (see `readout`)

    # --- inputs -------------------------------------------------------------------------------------------

    def refresh_prefix(self) -> None:
        version = self._session.tools.tools_version()
        if self._tools_json is None or version != self._tools_for:  # an MCP server's tools came or went
            self._tools_json = tools_json(self._session.tools.tool_specs())
            self._tools_for = version
        final = True
        pending = self.reopen
        if pending is not None:
            # After a load, servers still starting are not a changed tool set: the stored anchor waits for them.
            if self.meter.anchor_unverified and not pending.final(self._mcp_digests):
                final = False
            else:
                self.reopen = None  # confirmed or voided just below, or a response has measured anew
        self.meter.set_prefix(self._session.system_prompt(), self._tools_json, final=final)

    def _mcp_digests(self) -> dict[str, str]:
        return mcp_digests(self._session.tools.mcp_declarations())

    def mcp_breakdown(self) -> list[tuple[str, int, int]]:
        """(server, tokens of its declarations, number of tools) for each MCP server of the session."""
        est = self.meter.estimator
        return [
            (name, est.text(tools_json(specs)) if specs else 0, len(specs))
            for name, specs in self._session.tools.mcp_declarations().items()
        ]

    def prefix_parts(self) -> list[PrefixPart]:
        """The prefix every request carries, part by part; the boot cost is their sum (`tiers.boot_cost`). The
        system prompt and the tool declarations as the meter counts them, the declarations split into each MCP
        server's (estimated alone) and ama's own (the rest), so the parts add up to the meter's prefix. Each
        project instruction file is a part of its own (its section of the system prompt, estimated alone; the
        system prompt part is the rest)."""
        self.refresh_prefix()
        b = self.meter.breakdown()
        servers = self.mcp_breakdown()
        own = max(0, b.tool_declarations - sum(tokens for _, tokens, _ in servers))
        files = self.instruction_breakdown()
        skills = self.skills_tokens()
        prompt = max(0, b.system_prompt - sum(tokens for _, _, tokens in files) - skills)
        parts = [PrefixPart("system prompt", prompt)]
        parts += [PrefixPart("skills", skills)] if skills else []
        parts += [PrefixPart(f"instructions {' '.join(shown.split())}", tokens) for shown, _, tokens in files]
        parts.append(PrefixPart("ama's tools", own))
        return parts + [PrefixPart(f"MCP {' '.join(name.split())}", tokens) for name, tokens, _ in servers]

    def skills_tokens(self) -> int:
        """The skills' part of the system prompt (their names and descriptions), estimated alone; 0 without any."""
        block = self._session.skills.block
        return self.meter.estimator.text(block) if block else 0

    def instruction_breakdown(self) -> list[tuple[str, str, int]]:
        """(file as shown, scope, tokens) of each project instruction file in the system prompt (estimated alone)."""
        est = self.meter.estimator
        return [(f.shown, f.scope, est.text(text)) for f, text in self._session.instructions.sections()]

    def instruction_stats(self) -> list[dict[str, object]]:
        """S2 `instructions`: each file in the system prompt, then each nested one announced in the context."""
        est = self.meter.estimator
        out: list[dict[str, object]] = []
        ins = self._session.instructions
        for f, text in [*ins.sections(), *((f, nested_section(f, False)) for f in ins.announced.values())]:
            entry: dict[str, object] = {"path": f.shown, "scope": f.scope, "tokens": est.text(text), "bytes": f.size}
            if f.cut:
                entry["cut"] = True
            out.append(entry)
        return out

    def append(self, message: Message, measured: bool = True) -> None:
        """`measured=False`: an assistant reply of another model than the current one (see ContextMeter.append)."""
        self.meter.append(message, measured)
        if self.meter.source == USAGE:
            self._stale = None  # a response measured the context: the tier is fresh again

    def compacted(self, number: int) -> None:
        """Compaction `number` replaced the context: readouts name it, and the tier is stale until measured."""
        self.compactions, self._stale = number, f"compaction #{number}"

    def readout(self, f: ContextFigures, boot: int | None = None) -> Readout:
        """What every readout carries beside the figure (`tiers.Readout`); `boot`: the boot cost, when the caller
        summed its parts (the same figure as the meter's prefix)."""
        stale = self._stale if f.source == ESTIMATE else None
        if boot is None:  # a restored anchor not yet verified keeps the boot cost it was stored with (see restore)
            held = self._held_boot if self.meter.anchor_unverified else None
            boot = self.meter.prefix_tokens if held is None else held
        return Readout(boot, self.compactions, stale)

    def bill(self, model_id: str, usage: Usage | None, enters_context: bool, interrupted: bool = False) -> float | None:
        """One billed request, priced as `model_id` — the model that served it, whatever is current now. The price
        depends on the usage: long-context tiers (e.g. [1m] models above 200K) price the whole request higher."""
        price = self._rt.price(model_id, usage)
        self.last_cost = self.billing.add(usage, price, enters_context, interrupted)
        self.cache.record(model_id, usage, price, interrupted)
        return self.last_cost

    def model_changed(self, old: str, new: str) -> None:
        self.meter.set_window(self._rt.context_window(new))
        if old != new:
            # U9: any other model, even of the same provider, may count with another tokenizer and shape the
            # request differently; the old usage under the new window would pass for a measurement.
            self.meter.invalidate()
            self._stale = "a model switch"

    def prune_threshold(self) -> int | None:
        """The fill at which pruning runs now: pruneAt, or earlier while the prompt cache is known to be cold (C4);
        None when pruning is off (no window, or automatic compaction disabled)."""
        return self.cache.prune_threshold(self.meter.thresholds(), self.figures().used)

    def replace(self, messages: list[Message]) -> None:
        self.meter.replace(messages)

    def reload(self, messages: list[Message], stored: StoredFigures, compactions: int = 0) -> None:
        """A load: the window of the session's model, the stored figures (`restore`), an anchor voided by a model
        switch after it was stored, and automatic compaction held or not as the file left it. `compactions`: the
        number of the file's last compaction; the tier is stale after it until a response in the context
        measured, as it was live."""
        model = self._session.model_id
        self.model_changed(model, model)
        self._stale, self.compactions = None, compactions
        if compactions and not any(isinstance(m, AssistantMessage) and reported(m.usage) for m in messages):
            self._stale = f"compaction #{compactions}"
        self.restore(messages, stored.meter, stored.billing)
        if stored.switched:
            self.meter.invalidate()
            self._stale = "a model switch"
        self.meter.set_compaction(held=stored.held)

    def restore(
        self, messages: list[Message], meter: Mapping[str, object] | None, billing: Mapping[str, object] | None
    ) -> None:
        """A load: the stored figures. The prefix is not final yet — the load's MCP servers are connected after
        this and start after the response — so a stored usage anchor is kept unverified until `reopen` says
        the declarations are final (`reopen.servers_known` first; docs/context.md "Session load")."""
        self.reopen = None
        self.refresh_prefix()
        state = msgspec.convert(meter, MeterState) if meter else None
        self.meter.restore(messages, state, verify_prefix=False)
        if self.meter.anchor_unverified:
            self.reopen = PendingPrefix(stored_digests(meter.get("mcp")) if meter else None)
        held = meter.get("bootTokens") if meter else None  # while the load's MCP servers start, the stored one
        self._held_boot = held if type(held) is int and held >= 0 else None
        measured_by = meter.get("model") if meter else None
        if isinstance(measured_by, str) and measured_by != self._session.model_id:
            # The model was switched after the state was stored (no response of the new one since): its usage
            # is not carried under the new model as if measured, on load as live (U9).
            self.meter.invalidate()
            self._stale = "a model switch"
        if billing:
            self.billing = Billing(msgspec.convert(billing, BillingState))
        # No billing stored: nothing was billed, so the ledger is complete; billing without it: an older ama.
        self.cache.restore(billing.get("cache") if billing else {})

    def meter_state(self) -> dict[str, object]:
        self.refresh_prefix()  # the prefix of now, so the digests below are those of the key the anchor holds
        state: dict[str, object] = msgspec.to_builtins(self.meter.state())  # a Struct encodes as an object
        # The model whose responses the figures came from; MeterState itself knows no models (and ignores it).
        state["model"] = self._session.model_id
        state["bootTokens"] = self.readout(self.meter.figures()).boot_tokens  # the readouts' while a load verifies
        if self.meter.source == USAGE:
            # Each MCP server's declarations under that key, so a load can tell early whether they are the same
            # (session/accounting/held_figure.py). A restored anchor not yet verified keeps the digests it was measured with.
            pending = self.reopen
            digests = pending.expected if pending is not None and self.meter.anchor_unverified else self._mcp_digests()
            if digests is not None:
                state["mcp"] = digests
        return state

    def billing_state(self) -> dict[str, object]:
        state: dict[str, object] = msgspec.to_builtins(self.billing.state())
        state["cache"] = self.cache.state_for_storage()  # BillingState ignores it; restore() reads it
        return state

    # --- outputs ------------------------------------------------------------------------------------------

    def figures(self) -> ContextFigures:
        self.refresh_prefix()
        return self.meter.figures()

    def usage_update(self, force: bool = False) -> w.UsageUpdate | None:
        figures = self.figures()
        readout = self.readout(figures).meta()
        payload = self.reporter.update(
            figures, self.billing.cost, force=force, bound=self.billing.lower_bound, readout=readout
        )
        return wire_usage(payload) if payload is not None else None

    def context_notices(self, deliver: bool) -> list[ContextNotice]:
        """The notices due about the current figures (docs/context.md "Load tiers", "Readings over the window"),
        and the budget's (session/accounting/budget.py: 80 % used, or a cost too unknown to hold to it).

        Rises are recorded whenever this is called; with `deliver=False` (the caller may not speak now) they
        wait, and the next delivering call returns them. A tier notice that is no longer true by then (the fill
        fell) is dropped; its text is worded from the figures of the moment it goes out.
        """
        f = self.figures()
        risen = self.tiers.update(f.tier)
        if risen is not None and (self._pending_tier is None or rank(risen) > rank(self._pending_tier)):
            self._pending_tier = risen
        self._note_over_window(f)
        if not deliver:
            return []
        out: list[ContextNotice] = []
        if self._pending_over is not None:
            out.append(self._pending_over)
        tier = self._pending_tier
        if tier is not None and rank(f.tier) >= rank(tier):
            out.append(self._tier_notice(tier, f))
        self._pending_tier, self._pending_over = None, None
        meta: dict[str, object] = {"ama": {"budget": self.budget.limit}}
        out += [ContextNotice(sev, title, text, meta) for sev, title, text in self.budget.notes(self.billing.cost)]
        return out

    def describe_budget(self) -> str:
        """/budget: the budget, where it comes from, and the cost so far."""
        return self.budget.describe(self.billing.cost)

    def set_budget(self, usd: float) -> None:
        self.budget.set(usd)

    def budget_stop(self) -> str | None:
        """Why no request may reach the provider now (the session's cost reached its budget), or None."""
        cost = self.billing.cost
        if cost is None or not self.budget.reached(cost):
            return None
        return self.budget.stop_reason(cost)

    def _note_over_window(self, f: ContextFigures) -> None:
        """A provider's reading over the window the catalog knows: the notice waits for delivery, once per model
        and window."""
        if f.source != USAGE or f.window is None or f.usage_tokens <= f.window:
            return
        model = self._session.model_id
        if (model, f.window) in self._told_over:
            return
        self._told_over.add((model, f.window))
        self._pending_over = ContextNotice(
            severity="warning",
            title="Usage above the known window",
            text=(
                f"The provider reported {f.usage_tokens:,} tokens for the last request, more tokens than the "
                f"{f.window:,}-token window ama knows for {model}: the window in the catalog or the config "
                "(context_window) is likely wrong. The meter shows the reading as a lower bound (100 %)."
            ),
            meta={"ama": {"tierCaps": caps_meta(self._rt.config.tiers.caps)}},
        )

    def _tier_notice(self, tier: str, f: ContextFigures) -> ContextNotice:
        """A tier notice worded from the figures of now, with what every readout carries (seed 002's strain): the
        caps in force, the boot cost — what every request carries before the person writes a word — and, after a
        compaction, its number; a tier worked out from an estimate since a switch or a compaction is `stale`."""
        caps = self._rt.config.tiers.caps
        boot = self.prefix_parts()
        readout = self.readout(f, boot_cost(boot))
        meta: dict[str, object] = {"tier": tier, "tierCaps": caps_meta(caps), **readout.meta()}
        from ama_acp.session.accounting.context_lines import estimated  # with figure_lines: a notice's, /context's

        words = notice_text(tier, f.used, f.window, f.percent, f.auto_compact_at, estimated(f), caps=caps, boot=boot)
        return ContextNotice(
            severity=_TIER_SEVERITY.get(tier, "warning"),
            title=f"Context {readout.tier_words(tier)}",
            text=" ".join(part for part in (words, readout.words()) if part),
            meta={"ama": meta},
        )

    def stats(self) -> dict[str, object]:
        """S2: the full stats object; unknown figures are left out (U15)."""
        f = self.figures()
        context: dict[str, object] = {
            "source": f.source,
            "tier": f.tier,
            "usageTokens": f.usage_tokens,
            "trailingTokens": f.trailing_tokens,
        }
        for key, value in (("autoCompactAt", f.auto_compact_at), ("pruneAt", f.prune_at)):
            if value is not None:
                context[key] = value
        if f.over_window:
            context["overWindow"] = True
        context["tierCaps"] = caps_meta(self._rt.config.tiers.caps)
        context.update(self.readout(f).meta())
        out: dict[str, object] = {
            "sessionId": self._session.id,
            "model": self._session.model_id,
            "billed": billed_stats(self.billing.totals()),
            "cache": self.cache.stats(self.billing.totals()),
            "contextTokens": f.used,
            "context": context,
        }
        if self.billing.cost is not None:
            out["cost"] = {"amount": round(self.billing.cost, 6), "currency": "USD"}
        elif (bound := self.billing.lower_bound) is not None:  # unknown: what was spent at least, as usage_update
            out["costLowerBound"] = {"amount": round(bound, 6), "currency": "USD"}
        if (rate := self.billing.totals().cache_read_share()) is not None:
            out["cacheHitRate"] = rate  # seed 001_ reads it at the top level; `cache` has it too
        if f.window is not None:
            out["contextWindow"] = f.window
        if f.percent is not None:
            out["contextPercent"] = f.percent
        servers = self.mcp_breakdown()
        if servers:  # which server's declarations cost what (part of the prefix, estimated)
            out["mcpServers"] = [{"name": n, "tools": count, "tokens": tokens} for n, tokens, count in servers]
        if files := self.instruction_stats():  # project instructions: which files the model reads, and their cost
            out["instructions"] = files
        return out

    def describe(self) -> str:
        """S3: the figures for a person, and what fills the window."""
        f = self.figures()
        parts = self.prefix_parts()
        readout = self.readout(f, boot_cost(parts))
        from ama_acp.session.accounting.context_lines import figure_lines

        lines = [*figure_lines(f, self.meter.messages, boot_text(parts), readout)]
        lines.append(f"Tiers: {caps_text(self._rt.config.tiers.caps)}.")
        if f.auto_compact_at is not None:
            lines.append(f"Automatic compaction at {f.auto_compact_at:,} tokens; pruning at {f.prune_at:,}.")
        elif f.window is None:
            lines.append("The model's context window is unknown, so no fill is reported (set context_window).")
        lines += _cost_lines(self.billing.cost, self.billing.totals(), self.billing.lower_bound)
        lines += self.cache.lines(self.billing.totals(), self.meter.thresholds())
        b = self.meter.breakdown()
        lines += ["", "| what | tokens (estimate) |", "|---|---:|"]
        for label, value in (
            ("system prompt", b.system_prompt),
            ("tool declarations", b.tool_declarations),
            ("user messages", b.user_messages),
            ("assistant messages", b.assistant_messages),
            ("tool results", b.tool_results),
            ("images", b.images),
        ):
            lines.append(f"| {label} | {value:,} |")
        lines.append(f"| **total** ({b.messages} messages) | **{b.total:,}** |")
        if found := self._session.skills.skills:  # part of the system prompt above; a loaded skill: a tool result
            names = ", ".join(_cell(s.name) for s in found)
            lines += [
                "",
                f"Skills: {len(found)}, {self.skills_tokens():,} tokens of the system prompt above ({names}).",
            ]
        servers = self.mcp_breakdown()
        if servers:
            lines += ["", "MCP servers (their tool declarations are part of the tool declarations above):", ""]
            lines += ["| server | tools | tokens (estimate) |", "|---|---:|---:|"]
            lines += [f"| {_cell(name)} | {count} | {tokens:,} |" for name, tokens, count in servers]
        lines += _instruction_lines(self._session.instructions, self.instruction_stats())
        return "\n".join(lines) + "\n"


def _cost_lines(cost: float | None, totals: BilledTotals, bound: float | None = None) -> list[str]:
    """/context's cost so far (or `$?`, at least `bound`, and why it is unknown) and the prompt cache's share."""
    if cost is not None:
        lines = [f"**Cost so far:** ${cost:.4f}"]
    else:
        if totals.interrupted:
            why = "a request was cancelled or cut off after the provider accepted it, before its usage arrived"
        elif totals.unreported:
            why = "a request reported no usage"
        else:
            why = "a request had no known price"
        at_least = f" (≥ ${bound:.4f})" if bound is not None else ""
        lines = [f"**Cost so far:** $?{at_least}, unknown: {why}"]
    share = totals.cache_read_share()
    if share is not None:
        lines.append(f"**Prompt cache:** {share * 100:.1f} % of the billed input tokens were cache reads.")
    return lines


def _instruction_lines(ins: SessionInstructions, files: list[dict[str, object]]) -> list[str]:
    """/context's project instructions: each file, where it counts, its tokens; or which names were looked for."""
    if not ins.enabled:
        return ["", "Project instructions: off (`[instructions] enabled = false`)."]
    if not files:
        return ["", f"Project instructions: none found ({', '.join(ins.names)})."]
    where = {"global": "system prompt (yours)", "workspace": "system prompt", "nested": "note in the conversation"}
    lines = ["", "Project instructions (counted in the system prompt above, notes in the user messages):", ""]
    lines += ["| file | where | tokens (estimate) |", "|---|---|---:|"]
    for f in files:
        cut = " (cut)" if f.get("cut") else ""
        lines.append(f"| {_cell(str(f['path']))}{cut} | {where.get(str(f['scope']), '')} | {f['tokens']:,} |")
    return lines


def _cell(text: str) -> str:
    """A name the editor chose, safe inside one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")
