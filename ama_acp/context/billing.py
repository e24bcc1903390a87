"""Billed tokens and cost of one session (docs/rules.md U16, U17).

Billed totals are not context: they sum every billed request, including those whose output never enters the
context (titles, compaction summaries). Each request is priced when it is billed, with the price of the model
that served it, so a model switch never re-prices the past. One unpriced request makes the session's cost
unknown for good: a partial sum is never presented as the total.

`Usage.input` is the uncached input (Anthropic's convention, and what U7's sum assumes): cached reads and
writes are priced at their own rates and must not also be inside `input`.
"""

from __future__ import annotations

import logging

import msgspec

from ama_acp.config import Price
from ama_acp.context.meter import reported
from ama_acp.conversation.messages import Usage

log = logging.getLogger(__name__)

_PER = 1_000_000  # prices are USD per million tokens


class BilledTotals(msgspec.Struct, frozen=True, omit_defaults=True):
    """Sums over billed requests. A cache or reasoning figure stays None until some request reported it."""

    requests: int = 0
    side_requests: int = 0  # billed requests that never enter the context (titles, compaction)
    unreported: int = 0  # billed requests whose usage was missing or untrustworthy
    # Of those, requests the provider accepted whose usage never came: cancelled, cut off or retried mid-reply.
    interrupted: int = 0
    input: int = 0
    output: int = 0
    cache_read: int | None = None
    cache_write: int | None = None
    reasoning: int | None = None
    total: int = 0

    def minus(self, before: BilledTotals) -> BilledTotals:
        """What was billed since `before` was taken (e.g. one prompt turn, for S1)."""

        def sub(a: int | None, b: int | None) -> int | None:
            return None if a is None else a - (b or 0)

        return BilledTotals(
            requests=self.requests - before.requests,
            side_requests=self.side_requests - before.side_requests,
            unreported=self.unreported - before.unreported,
            interrupted=self.interrupted - before.interrupted,
            input=self.input - before.input,
            output=self.output - before.output,
            cache_read=sub(self.cache_read, before.cache_read),
            cache_write=sub(self.cache_write, before.cache_write),
            reasoning=sub(self.reasoning, before.reasoning),
            total=self.total - before.total,
        )

    @property
    def reported(self) -> int:
        """Requests whose usage is in the sums."""
        return self.requests - self.unreported

    def cache_read_share(self) -> float | None:
        """cacheRead / (input + cacheRead + cacheWrite) over the reported requests, 0–1 with 4 decimals; None
        when no request reported a cache figure or nothing was billed (unknown, not 0)."""
        if self.cache_read is None:
            return None
        denominator = self.input + self.cache_read + (self.cache_write or 0)
        if denominator <= 0:
            return None
        return round(self.cache_read / denominator, 4)

    def prompt_usage(self) -> dict[str, int]:
        """The camelCase shape of `PromptResponse.usage` (S1); optional figures only where known."""
        out = {"inputTokens": self.input, "outputTokens": self.output, "totalTokens": self.total}
        if self.cache_read is not None:
            out["cachedReadTokens"] = self.cache_read
        if self.cache_write is not None:
            out["cachedWriteTokens"] = self.cache_write
        if self.reasoning is not None:
            out["thoughtTokens"] = self.reasoning
        return out


class BillingState(msgspec.Struct, frozen=True):
    """Stored with the session so a load shows the same cost; `cost` None means unknown (U17). `priced`: the sum
    of every request that could be priced, the lower bound shown while `cost` is unknown; None in files written
    before it was kept (the bound then starts from the known cost, or 0, at the load)."""

    totals: BilledTotals = BilledTotals()
    cost: float | None = 0.0
    priced: float | None = None


def billable(usage: Usage | None) -> bool:
    """Whether a request's usage can be billed: some figure counts tokens, and none is negative.

    Figures that are all absent or 0 are no report: every request carries at least the system prompt, so a
    provider that says 0 did not count (an Anthropic-style stream without usage arrives as zeros). Billing it
    as free would be an invented $0 (U17)."""
    if not reported(usage):
        return False
    assert usage is not None  # reported() says so
    figures = (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total, usage.reasoning)
    return not any(f is not None and f < 0 for f in figures)


def request_cost(usage: Usage | None, price: Price | None) -> float | None:
    """USD for one request, or None when it cannot be priced (no price, no usage, or a rate that is unknown)."""
    if price is None or not billable(usage):
        return None
    assert usage is not None
    if usage.input is None or usage.output is None:
        return None  # a total alone cannot be split between input and output rates
    cost = usage.input * price.input + usage.output * price.output
    for tokens, rate in ((usage.cache_read, price.cache_read), (usage.cache_write, price.cache_write)):
        if tokens:
            if rate is None:
                return None  # cache tokens used at a rate nobody told us
            cost += tokens * rate
    return cost / _PER


def _with_usage(t: BilledTotals, usage: Usage, side: int) -> BilledTotals:
    """`t` with one more billed request that reported `usage` (`side`: 1 for a request outside the context)."""
    inp, out = usage.input or 0, usage.output or 0
    total = usage.total if usage.total is not None else inp + out + (usage.cache_read or 0) + (usage.cache_write or 0)
    return BilledTotals(
        requests=t.requests + 1,
        side_requests=t.side_requests + side,
        unreported=t.unreported,
        interrupted=t.interrupted,
        input=t.input + inp,
        output=t.output + out,
        cache_read=_plus(t.cache_read, usage.cache_read),
        cache_write=_plus(t.cache_write, usage.cache_write),
        reasoning=_plus(t.reasoning, usage.reasoning),
        total=t.total + total,
    )


def _plus(a: int | None, b: int | None) -> int | None:
    """A running total of a figure that stays unknown (None) until some request reports it."""
    return a if b is None else (a or 0) + b


class Billing:
    """One per session: billed totals and cost."""

    def __init__(self, state: BillingState | None = None) -> None:
        state = state or BillingState()
        self._totals = state.totals
        self._cost = state.cost
        # Every priced request's cost, kept on after the total became unknown: what is known to have been spent.
        self._priced = state.priced if state.priced is not None else (state.cost or 0.0)

    def add(
        self, usage: Usage | None, price: Price | None, enters_context: bool = True, interrupted: bool = False
    ) -> float | None:
        """Record one billed request (priced at `price`, the price of the model that served it).

        Returns this request's cost, or None when it cannot be priced — which also makes the session's cost
        unknown from now on. `interrupted`: the provider accepted the request, and it was cancelled, cut off or
        retried before its usage arrived; it was billed all the same, at a price nobody can know (U17).
        """
        t = self._totals
        side = 0 if enters_context else 1
        if interrupted or not billable(usage):
            self._totals = msgspec.structs.replace(
                t,
                requests=t.requests + 1,
                side_requests=t.side_requests + side,
                unreported=t.unreported + 1,
                interrupted=t.interrupted + (1 if interrupted else 0),
            )
            self._unpriced("interrupted before its usage arrived" if interrupted else "no usable usage")
            return None
        assert usage is not None
        self._totals = _with_usage(t, usage, side)
        cost = request_cost(usage, price)
        if cost is None:
            self._unpriced("no price" if price is None else "a rate is unknown")
        else:
            self._priced += cost
            if self._cost is not None:
                self._cost += cost
        return cost

    def add_task_cost(self, cost: float | None) -> None:
        """The cost an external agent reported for a task of this session (session/tasks/external/agent.py): it joins
        this cost, and an agent that reported none makes it unknown, as an unpriced request does. Its tokens are
        not this session's billed figures (the agent reports them its own way, if at all)."""
        if cost is None:
            self._unpriced("a helper agent reported no cost")
        else:
            self._priced += cost
            if self._cost is not None:
                self._cost += cost

    def _unpriced(self, why: str) -> None:
        if self._cost is not None:
            log.info("session cost is now unknown: a billed request could not be priced (%s)", why)
        self._cost = None

    @property
    def cost(self) -> float | None:
        """Cumulative USD, or None when any billed request was unpriced (U17)."""
        return self._cost

    @property
    def lower_bound(self) -> float | None:
        """While the cost is unknown, what is known to have been spent: the sum of the requests that could be
        priced (the unpriced ones cost at least 0). None while the cost is known: the cost itself says it all."""
        return self._priced if self._cost is None else None

    def totals(self) -> BilledTotals:
        return self._totals

    def state(self) -> BillingState:
        return BillingState(totals=self._totals, cost=self._cost, priced=self._priced)
