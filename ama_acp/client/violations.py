"""What the agent did that a strict editor would reject, recorded instead of raised: the test or the
conformance suite asserts on it while the conversation carries on.

Bounded whatever the agent sends: the first `VIOLATIONS_KEPT` of each kind are kept, then one more that
counts the others, and each keeps at most `RAW_KEPT` characters of the line it is about.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

VIOLATIONS_KEPT = 100  # violations of one kind kept; the rest are counted in one more
RAW_KEPT = 2000  # characters of a violation's line kept

# How a part of the client records one: (kind, detail, the line it is about or None).
Record = Callable[[str, str, str | None], None]


@dataclass
class Violation:
    """Something the agent did that breaks the protocol (or a test's `on_line` check)."""

    kind: str  # non_json_stdout, not_jsonrpc, invalid_utf8, unterminated_line, unadvertised_method, ...
    detail: str
    raw: str | None = None


class Violations:
    """The violations seen, in order (`items`), each kind bounded."""

    def __init__(self) -> None:
        self.items: list[Violation] = []
        self._counts: dict[str, int] = {}

    def record(self, kind: str, detail: str, raw: str | None = None) -> None:
        count = self._counts[kind] = self._counts.get(kind, 0) + 1
        if count > VIOLATIONS_KEPT:
            # One more violation stands for all the others of its kind, its count kept current.
            if count == VIOLATIONS_KEPT + 1:
                self.items.append(Violation(kind, ""))
            summary = next(v for v in reversed(self.items) if v.kind == kind)
            summary.detail = f"{count - VIOLATIONS_KEPT} more like the above (not kept)"
            return
        if raw is not None and len(raw) > RAW_KEPT:
            raw = raw[:RAW_KEPT] + f"… ({len(raw)} chars)"
        self.items.append(Violation(kind, detail, raw))

    def of(self, kind: str) -> list[Violation]:
        return [v for v in self.items if v.kind == kind]
