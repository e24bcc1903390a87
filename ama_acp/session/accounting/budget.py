"""A session's budget: what it may spend in USD (`[budget] session_usd`, `/budget N`; docs/configuration.md
"Budget").

It reads the session's cost (context/billing.py: every billed request of the session and of its tasks, and the
cost external agents reported) and says three things: whether the budget is reached (then no request may reach
the provider), what the person is told as the cost nears it (once, at 80 %), and that a cost nobody knows cannot
be held to a budget (once a session). It never changes the cost nor the meter's reports.
"""

from __future__ import annotations

from typing import Literal

from ama_acp.config import budget_usd

WARN_AT = 0.8  # the share of the budget at which the person hears of it
# A billionth of a dollar: the cost is a sum of floats, so $0.0105 + $0.0001 may fall short of a $0.0106 budget by
# a rounding error the person never sees.
_ROUNDING = 1e-9

Severity = Literal["info", "warning"]
Note = tuple[Severity, str, str]  # severity, title, text: a notice (session_context.py `ContextNotice`)

HOW_TO_RAISE = "`/budget N` sets N dollars for this session, `[budget] session_usd` in the config for every session"


def usd(amount: float) -> str:
    """Dollars for a person: cents from one dollar up, else four decimals (a test session costs fractions)."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


def parse_budget(text: str) -> float | None:
    """`/budget N`'s N in dollars (`5`, `2.50`, `$5`), or None when it is not a positive number."""
    text = text.strip().removeprefix("$").replace("_", "")
    try:
        value = float(text) if len(text) <= 40 else None
    except ValueError:
        return None
    return budget_usd(value)


class Budget:
    """One per session: its limit (None: no budget) and what the person was told of it."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.from_command = False  # set by /budget (stored with the session), not by the config
        self._warned = False  # the 80 % notice was given (for this limit)
        self._told_unknown = False  # the cost is unknown and the person heard so (once a session)

    def set(self, limit: float) -> None:
        """`/budget N`: the new limit holds from now on; nearing it is told again."""
        self.limit = limit
        self.from_command = True
        self._warned = False

    def reached(self, cost: float | None) -> bool:
        """No request may reach the provider: the known cost is at or past the limit. An unknown cost never
        blocks (it cannot be held to a budget; `notes` says so)."""
        return self.limit is not None and cost is not None and cost + _ROUNDING >= self.limit

    def notes(self, cost: float | None) -> list[Note]:
        """The notices due now, each given once: the cost passed 80 % of the budget (not when it is already at the
        budget: the stop says it), or the cost is unknown with a budget set."""
        limit = self.limit
        if limit is None:
            return []
        if cost is None:
            if self._told_unknown:
                return []
            self._told_unknown = True
            text = (
                f"This session's cost is unknown (a request had no known price or reported no usage), so its "
                f"{usd(limit)} budget cannot be enforced: ama will not stop at it."
            )
            return [("warning", "Budget not enforced", text)]
        if self._warned or cost + _ROUNDING < WARN_AT * limit:
            return []
        self._warned = True
        if self.reached(cost):
            return []
        text = (
            f"This session has cost {usd(cost)}, {cost / limit * 100:.0f} % of its {usd(limit)} budget. At the "
            f"budget ama sends no more requests; {HOW_TO_RAISE}."
        )
        return [("warning", "Budget nearly spent", text)]

    def stop_reason(self, cost: float) -> str:
        """Why no request was sent: one sentence for the person (the turn's agent message, a task's failure)."""
        assert self.limit is not None
        return (
            f"this session has cost {usd(cost)}, which reached its budget of {usd(self.limit)}, so nothing more "
            f"was sent to the model. To go on, raise the budget: {HOW_TO_RAISE}."
        )

    def describe(self, cost: float | None) -> str:
        """/budget: the budget, where it comes from, and the cost so far."""
        spent = f"{usd(cost)}" if cost is not None else "unknown"
        if self.limit is None:
            return (
                f"**Budget:** none. **Cost so far:** {spent}.\n\nSet one with `/budget N` (N dollars, this session) "
                "or `[budget] session_usd` in the config.\n"
            )
        source = "set with /budget" if self.from_command else "from the config"
        lines = [f"**Budget:** {usd(self.limit)} ({source}). **Cost so far:** {spent}"]
        if cost is None:
            lines[0] += ": the cost is unknown (a request had no known price), so the budget cannot be enforced."
        elif self.reached(cost):
            lines[0] += f" — reached: no request is sent until it is raised ({HOW_TO_RAISE})."
        else:
            lines[0] += f" ({cost / self.limit * 100:.0f} %)."
        return "\n".join(lines) + "\n"
