"""A loaded session's stored figure while its MCP servers start (docs/context.md "Session load").

The stored usage anchor was measured with the MCP servers' tools declared; on load those servers start again,
after the response, so for a while the prefix lacks tools that will be there. That is no change of the context:
the anchor is kept, unverified (`ContextMeter.restore(..., verify_prefix=False)`), until the declarations are
final, and only then compared with the prefix key it was measured under — same key, the figure never moved
(and D1 keeps the wire quiet); another key, an estimate (U9) and one usage_update.

`PendingPrefix` decides when the declarations are final: once no server of the load is still starting (each is
ready or failed: `mcp.start_timeout` bounds that), or earlier when they already differ from the ones the figure
was measured with — a server that measured it is not in this load, or one has settled with other tools (or
none) than it had. The per-server digests stored beside the meter state (`mcp_digests`) tell that; a state
stored without them (an older ama) waits for every server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from ama_acp.context.meter import short_digest
from ama_acp.context.request_size import tools_json
from ama_acp.conversation.tools import ToolSpec

__all__ = ["MAX_STORED_SERVERS", "PendingPrefix", "ServerStatus", "mcp_digests", "stored_digests"]

MAX_STORED_SERVERS = 256  # a session file is not trusted: more than this was not written by ama


class ServerStatus(Protocol):
    """What the check reads of a session's MCP servers (session/mcp.py `SessionMcp`)."""

    def server_names(self) -> list[str]:
        """Every server of this open, ready or not."""
        ...

    def starting(self) -> list[str]:
        """The servers neither ready nor failed yet."""
        ...


def mcp_digests(by_server: Mapping[str, Sequence[ToolSpec]]) -> dict[str, str]:
    """A digest of each server's declarations as the request carries them; servers without tools are left out
    (a server that is not ready, or has no tools, adds nothing to the prefix)."""
    out: dict[str, str] = {}
    for name, specs in by_server.items():
        if specs:
            out[name] = short_digest(tools_json(specs))
    return out


def stored_digests(value: object) -> dict[str, str] | None:
    """The digests a session file stored, if they are digests; anything else is unknown (None), never a
    reason to fail the load."""
    if not isinstance(value, dict) or len(value) > MAX_STORED_SERVERS:
        return None
    out: dict[str, str] = {}
    for name, digest in value.items():
        if not isinstance(name, str) or not isinstance(digest, str) or len(digest) > 128:
            return None
        out[name] = digest
    return out


class PendingPrefix:
    """A restored anchor waiting for the load's MCP servers (one per load; dropped once final)."""

    def __init__(self, expected: dict[str, str] | None) -> None:
        self.expected = expected  # the digests the anchor was measured with; None: not stored
        self._known = False  # the load's servers were connected (until then nothing is final)
        self._servers: ServerStatus | None = None

    def servers_known(self, servers: ServerStatus | None) -> None:
        """The load's servers are connected (None: it has none)."""
        self._known = True
        self._servers = servers

    def final(self, digests: Callable[[], dict[str, str]]) -> bool:
        """Whether the declarations are final for comparing the stored anchor with. `digests` gives the
        current ones (called only when the answer depends on them)."""
        if not self._known:
            return False
        servers = self._servers
        if servers is None:
            return True
        starting = set(servers.starting())
        if not starting:
            return True
        expected = self.expected
        if expected is None:
            return False
        if not set(expected) <= set(servers.server_names()):
            return True  # a server the figure was measured with is not in this load: its tools will not come
        now = digests()
        # A settled server with other tools than it had (or with tools when it had none, or failed when it had
        # some): already different, whatever the others bring.
        return any(now.get(name) != expected.get(name) for name in servers.server_names() if name not in starting)
