"""An ACP agent (a stdlib script) that delegates, for the conformance suite's subagents group
(conformance/groups/subagents.py): a prompt holding the `acp-conformance: delegate TEXT` directive runs a "child"
that says TEXT. For a client that advertised `clientCapabilities.subagents` the child is announced on the parent
with a `subagent_update` (state `running`), its reply goes out under its own session id, and a last
`subagent_update` gives it `idle`, all before the prompt response; for any other client the reply is the parent's
own text. Every other prompt gets a short reply.

`--break=NAME` breaks exactly one rule (`BREAKS`):

    early-child     the child's reply goes out before the subagent_update announcing it (R115.1)
    stuck-running   the child is never given a state after `running` (R123.1)
    unasked-child   a client that did not advertise `subagents` is sent the child's announcements anyway (no
                    update under the child's id: R116.1, and R116, which it narrows, as an unstable update kind)
"""

from __future__ import annotations

import itertools
import json
import sys

TYPE_CHECKING = False  # typing is not imported at run time (a start stays cheap)
if TYPE_CHECKING:
    from typing import Any

BREAKS = {"early-child": "R115.1", "stuck-running": "R123.1", "unasked-child": "R116.1"}
DIRECTIVE = "acp-conformance: delegate "

_sessions = itertools.count(1)


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def update(sid: str, body: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": body}})


def say(sid: str, text: str) -> None:
    update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})


def announce(parent: str, child: str, state: dict[str, Any]) -> None:
    update(parent, {"sessionUpdate": "subagent_update", "sessionId": child, "title": "child", "state": state})


def delegate(parent: str, text: str, opted: bool, breaks: set[str]) -> None:
    child = f"child-{next(_sessions)}"
    if not opted:
        if "unasked-child" in breaks:
            announce(parent, child, {"state": "running"})
            announce(parent, child, {"state": "idle", "stopReason": "end_turn"})
        say(parent, text)  # the child's answer, shown as the parent's own text
        return
    if "early-child" in breaks:
        say(child, text)
    announce(parent, child, {"state": "running"})
    if "early-child" not in breaks:
        say(child, text)
    if "stuck-running" not in breaks:
        announce(parent, child, {"state": "idle", "stopReason": "end_turn"})
    say(parent, f"The sub-agent answered: {text}")


def prompt_text(params: dict[str, Any]) -> str:
    blocks = params.get("prompt")
    return "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict)) if isinstance(blocks, list) else ""


def main() -> None:
    breaks = {arg.split("=", 1)[1] for arg in sys.argv[1:] if arg.startswith("--break=")}
    if breaks - set(BREAKS):
        sys.exit(f"subagent_agent: unknown break(s) {sorted(breaks - set(BREAKS))}")
    opted = False
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
            continue
        if not isinstance(msg, dict) or "id" not in msg or not isinstance(msg.get("method"), str):
            continue  # a notification (session/cancel: nothing runs long enough to cancel) or a response
        method, params, rid = msg["method"], msg.get("params") or {}, msg["id"]
        if method == "initialize":
            caps = params.get("clientCapabilities") if isinstance(params, dict) else None
            opted = isinstance(caps, dict) and isinstance(caps.get("subagents"), dict)
            result: dict[str, Any] = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": f"session-{next(_sessions)}"}})
        elif method == "session/prompt" and isinstance(params, dict) and isinstance(params.get("sessionId"), str):
            sid, text = params["sessionId"], prompt_text(params)
            lines = [ln.strip()[len(DIRECTIVE) :] for ln in text.splitlines() if ln.strip().startswith(DIRECTIVE)]
            if lines:
                delegate(sid, lines[-1].strip(), opted, breaks)
            else:
                say(sid, "Conformance reply.")
            send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
