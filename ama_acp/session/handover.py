"""What the editors are told when a session moves between ama processes (docs/sessions.md "Sessions open
elsewhere"). The socket and its protocol are session/store/handover.py's; the holder's side is the manager's
(`serve_handover`, `hand_over`), the loader's lifecycle.py's.
"""

from __future__ import annotations

from ama_acp.rpc.errors import RESOURCE_NOT_FOUND, SESSION_BUSY, AcpError
from ama_acp.wire import types as w
from ama_acp.wire.warning import takes_notices, warning


def notice(caps: w.ClientCapabilities, asker: int) -> w.SessionUpdate:
    """What the editor here is told, once, when another ama took the session over."""
    text = f"This session was opened in another window (ama pid {asker}); it is closed here."
    return warning(takes_notices(caps), "Session opened elsewhere", text)


def _error(code: int, message: str, session_id: str, pid: int | None) -> AcpError:
    # `details` repeats the sentence: toad shows a failed request's `data.details`, not its message
    # (docs/editors.md "Known client differences").
    data: dict[str, object] = {"sessionId": session_id, "details": message}
    if pid is not None:
        data["pid"] = pid
    return AcpError(code, message, data)


def handed_over_error(session_id: str, asker: int) -> AcpError:
    """What a request for a session handed over from here answers: where it went, and how to take it back."""
    message = (
        f"Session {session_id} was opened in another window (ama pid {asker}); it is closed here. "
        "Load it again here to take it back"
    )
    return _error(RESOURCE_NOT_FOUND, message, session_id, asker)


def busy_elsewhere(session_id: str, pid: int) -> AcpError:
    """The load of a session whose holder elsewhere is running a turn in it."""
    message = (
        f"Session {session_id} is running a turn in another ama (pid {pid}); wait for it to finish or cancel it "
        "there, then load again"
    )
    return _error(SESSION_BUSY, message, session_id, pid)


def open_elsewhere(session_id: str, pid: int | None) -> AcpError:
    """The load of a session another process holds and did not hand over (an older ama, `ama -p`, no answer)."""
    where = f"another ama process (pid {pid})" if pid is not None else "another ama process"
    return _error(SESSION_BUSY, f"Session {session_id} is open in {where}; close it there first", session_id, pid)
