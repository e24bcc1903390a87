"""A session's context accounting, and its reports on the ACP wire.

The context package (estimator, meter, billing, reporter, tiers) is pure and knows no protocol; this module
wires it to one session and maps its figures to ACP (`usage_update`, notices, `_ama/session_stats`,
`/context`). Prices reach the billing by injection: the runtime answers `price(model_id, usage)` from its
catalog.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Protocol

import msgspec

from ama_acp.config import Config, Price
from ama_acp.context.billing import Billing, BillingState
from ama_acp.context.estimate import Estimator, make_estimator
from ama_acp.context.meter import ContextFigures, ContextMeter, MeterState
from ama_acp.context.reporter import UsageReporter
from ama_acp.context.request_size import tools_json
from ama_acp.context.tiers import TierWatch, notice_text
from ama_acp.conversation.messages import Message, Usage
from ama_acp.conversation.tools import ToolSpec
from ama_acp.wire import types as w

log = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def shared_estimator(name: str) -> Estimator:
    return make_estimator(name)


class AccountingRuntime(Protocol):
    """What the accounting needs from the sessions' shared runtime."""

    @property
    def config(self) -> Config: ...

    def context_window(self, model_id: str) -> int | None:
        """The model's window in tokens; None when the catalog does not know it."""
        ...

    def price(self, model_id: str, usage: Usage | None) -> Price | None:
        """The price of one request of this model with this usage; None when it is not known."""
        ...

    def tool_specs(self) -> Sequence[ToolSpec]: ...


class AccountedSession(Protocol):
    """What the accounting reads from its session."""

    @property
    def id(self) -> str: ...

    @property
    def model_id(self) -> str: ...

    def system_prompt(self) -> str: ...


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class SessionContext:
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
        self.reporter = UsageReporter()
        self.tiers = TierWatch()
        self.last_cost: float | None = None
        self._tools_json: str | None = None

    # --- inputs -------------------------------------------------------------------------------------------

    def refresh_prefix(self) -> None:
        if self._tools_json is None:
            self._tools_json = tools_json(self._rt.tool_specs())
        self.meter.set_prefix(self._session.system_prompt(), self._tools_json)

    def append(self, message: Message) -> None:
        self.meter.append(message)

    def bill(self, model_id: str, usage: Usage | None, enters_context: bool) -> float | None:
        # The price depends on the usage: long-context tiers (e.g. [1m] models above 200K) price the whole
        # request higher.
        self.last_cost = self.billing.add(usage, self._rt.price(model_id, usage), enters_context)
        return self.last_cost

    def model_changed(self, old: str, new: str) -> None:
        self.meter.set_window(self._rt.context_window(new))
        if old.partition("/")[0] != new.partition("/")[0]:
            self.meter.invalidate()  # another provider: another request shape and tokenizer (U9)

    def replace(self, messages: list[Message]) -> None:
        self.meter.replace(messages)

    def restore(self, messages: list[Message], meter: dict[str, Any] | None, billing: dict[str, Any] | None) -> None:
        self.refresh_prefix()
        state = msgspec.convert(meter, MeterState) if meter else None
        self.meter.restore(messages, state)
        if billing:
            self.billing = Billing(msgspec.convert(billing, BillingState))

    def meter_state(self) -> dict[str, Any]:
        state: dict[str, Any] = msgspec.to_builtins(self.meter.state())  # a Struct encodes as an object
        return state

    def billing_state(self) -> dict[str, Any]:
        state: dict[str, Any] = msgspec.to_builtins(self.billing.state())
        return state

    # --- outputs ------------------------------------------------------------------------------------------

    def figures(self) -> ContextFigures:
        self.refresh_prefix()
        return self.meter.figures()

    def usage_update(self, force: bool = False) -> w.UsageUpdate | None:
        figures = self.figures()
        payload = self.reporter.update(figures, self.billing.cost, force=force)
        if payload is None:
            return None
        cost = payload.get("cost")
        return w.UsageUpdate(
            used=payload["used"],
            size=payload["size"],
            cost=w.Cost(amount=cost["amount"], currency=cost["currency"]) if cost else None,
            meta=payload["_meta"],
        )

    def tier_notice(self) -> w.Notice | None:
        """One notice when the fill rises into warning or danger (docs/context.md "Load tiers")."""
        f = self.figures()
        risen = self.tiers.update(f.tier)
        if risen is None:
            return None
        return w.Notice(
            severity="warning",
            title=f"Context {risen}",
            description=notice_text(risen, f.percent, f.window, f.auto_compact_at),
        )

    def stats(self) -> dict[str, Any]:
        """S2: the full stats object; unknown figures are left out (U15)."""
        f = self.figures()
        t = self.billing.totals()
        billed = {_camel(k): v for k, v in msgspec.to_builtins(t).items() if v is not None}
        context: dict[str, str | int] = {"source": f.source, "tier": f.tier}
        for key, value in (
            ("usageTokens", f.usage_tokens),
            ("trailingTokens", f.trailing_tokens),
            ("autoCompactAt", f.auto_compact_at),
            ("pruneAt", f.prune_at),
        ):
            if value is not None:
                context[key] = value
        out: dict[str, Any] = {
            "sessionId": self._session.id,
            "model": self._session.model_id,
            "billed": billed,
            "contextTokens": f.used,
            "context": context,
        }
        if self.billing.cost is not None:
            out["cost"] = {"amount": round(self.billing.cost, 6), "currency": "USD"}
        if f.window is not None:
            out["contextWindow"] = f.window
        if f.percent is not None:
            out["contextPercent"] = f.percent
        return out

    def describe(self) -> str:
        """S3: the figures for a person, and what fills the window."""
        f = self.figures()
        b = self.meter.breakdown()
        size = f"{f.window:,}" if f.window else "unknown"
        pct = f" ({f.percent:.1f} %)" if f.percent is not None else ""
        lines = [
            f"**Context:** {f.used:,} of {size} tokens{pct} · tier {f.tier} · source {f.source}",
        ]
        if f.source == "usage":
            lines.append(
                f"(last reported usage {f.usage_tokens:,} + estimate of what came after {f.trailing_tokens:,})"
            )
        if f.auto_compact_at is not None:
            lines.append(f"Automatic compaction at {f.auto_compact_at:,} tokens; pruning at {f.prune_at:,}.")
        elif f.window is None:
            lines.append("The model's context window is unknown, so no fill is reported (set context_window).")
        cost = self.billing.cost
        lines.append(
            f"**Cost so far:** ${cost:.4f}"
            if cost is not None
            else "**Cost so far:** unknown (a request had no known price)"
        )
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
        return "\n".join(lines) + "\n"
