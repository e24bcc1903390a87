"""A warning for the person, as their client shows it: an ACP `notice` where the client said it shows them
(`clientCapabilities.session.notices`), else an agent message of its own, set apart by blank lines."""

from __future__ import annotations

from ama_acp.wire import types as w


def takes_notices(caps: w.ClientCapabilities) -> bool:
    return caps.session is not None and caps.session.notices is not None


def warning(as_notice: bool, title: str, text: str, lead: str = "") -> w.SessionUpdate:
    """`text` under `title` as a notice, or as "⚠ `lead``text`" in an agent message."""
    if as_notice:
        return w.Notice(severity="warning", title=title, description=text)
    return w.AgentMessageChunk(content=w.TextContent(text=f"\n\n⚠ {lead}{text}\n\n"))
