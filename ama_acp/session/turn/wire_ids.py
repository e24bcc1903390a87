"""Tool-call ids on the wire, unique across a session's whole history (docs/tools.md "Tool call ids").

Providers do not promise unique ids: some number calls per response (`call_0` in every reply), a scripted
or replayed model may repeat one, and an id may already look like one of ours (`dup#2`). An editor keys its
tool-call cards by `toolCallId`, so a repeat would overwrite an earlier card, live or in a replay. The first
use of a provider id goes out as it is; a later one gets the first free `#n` suffix — free among every wire id
the session has used, including those read back from its file on load.
"""

from __future__ import annotations

from collections.abc import Iterable


class WireIds:
    """The wire ids a session has used, and the next free one for a provider id."""

    def __init__(self, used: Iterable[str] = ()) -> None:
        self._used: set[str] = set(used)
        self._next: dict[str, int] = {}  # provider id → the suffix to try first (keeps allocation O(1) amortised)

    def __contains__(self, wire_id: object) -> bool:
        return wire_id in self._used

    def add(self, wire_id: str) -> None:
        """A wire id already used (read back from the session file)."""
        self._used.add(wire_id)

    def allocate(self, provider_id: str) -> str:
        """A wire id for a new call with this provider id, never used before in the session."""
        if provider_id not in self._used:
            self._used.add(provider_id)
            return provider_id
        n = self._next.get(provider_id, 2)
        while (wid := f"{provider_id}#{n}") in self._used:
            n += 1
        self._next[provider_id] = n + 1
        self._used.add(wid)
        return wid
