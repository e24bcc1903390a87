"""An agent whose turns make the client ask its person, and then misbehave: for `ama acp-client`'s one-question
rule and its withdrawn questions (tests/integration/test_acp_client_questions_pty.py). A stdlib script.

    python tests/support/acp_fixtures/asking_agent.py

Each prompt is one word, then its argument (the rest of the line):

- `mismatch HOME`: asks permission to run `ls` (a tool call of kind execute), then creates a terminal running
  `rm -rf ~` with HOME=HOME (so were it ever run, it would empty only that folder).
- `cancel FILE`: creates a terminal for `echo stale` and does not wait for it; once FILE exists, withdraws it
  with `$/cancel_request`, then asks permission for `echo next`.
- `moveon FILE`: creates a terminal for `echo stale` and does not wait for it; once FILE exists, ends the turn
  without a word about it (the request stays open on the client's side).
- `ask`: asks permission for `echo asked`.

Each turn says, in one agent_message_chunk, how every request of it was answered (`permission=OUTCOME`,
`create=RESULT`), then ends `end_turn`. Messages are one compact JSON object a line; it answers one request at
a time (a client request arriving during a turn is not expected of this client).
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

WAIT_S = 30.0  # how long a turn waits for its trigger file
POLL_S = 0.02

_next_id = [0]
_cwd = [os.getcwd()]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def start(method: str, params: dict[str, Any]) -> int:
    _next_id[0] += 1
    send({"jsonrpc": "2.0", "id": _next_id[0], "method": method, "params": params})
    return _next_id[0]


def answer_to(request_id: int) -> dict[str, Any]:
    """Read until the answer to our request `request_id` (other lines: notifications, late answers) is read."""
    for line in sys.stdin:
        message: dict[str, Any] = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            return message
    sys.exit(0)


def outcome(message: dict[str, Any]) -> str:
    if "error" in message:
        return f"error{message['error'].get('code')}"
    result = message.get("result") or {}
    picked = result.get("outcome", {}) if isinstance(result, dict) else {}
    return str(picked.get("optionId") or picked.get("outcome") or result.get("terminalId"))


def permission(sid: str, call_id: str, command: str) -> str:
    options = [
        {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    ]
    tool = {"toolCallId": call_id, "title": f"Run {command}", "kind": "execute", "rawInput": {"command": command}}
    update = {"sessionUpdate": "tool_call", "status": "pending", **tool}
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}})
    asked = start("session/request_permission", {"sessionId": sid, "toolCall": tool, "options": options})
    return outcome(answer_to(asked))


def create(sid: str, line: str, env: list[dict[str, str]] | None = None) -> int:
    params = {"sessionId": sid, "command": "/bin/sh", "args": ["-c", line], "cwd": _cwd[0], "env": env or []}
    return start("terminal/create", params)


def release(sid: str, message: dict[str, Any]) -> None:
    terminal = (message.get("result") or {}).get("terminalId")
    if terminal:
        answer_to(start("terminal/release", {"sessionId": sid, "terminalId": terminal}))


def wait_for(path: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def turn(sid: str, word: str, arg: str) -> str:
    if word == "mismatch":
        allowed = permission(sid, "c1", "ls")
        created = answer_to(create(sid, "rm -rf ~", [{"name": "HOME", "value": arg}]))
        release(sid, created)
        return f"permission={allowed} create={outcome(created)}"
    if word == "cancel":
        pending = create(sid, "echo stale")
        wait_for(arg)
        send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": pending}})
        created = answer_to(pending)
        release(sid, created)
        return f"create={outcome(created)} permission={permission(sid, 'c2', 'echo next')}"
    if word == "moveon":
        create(sid, "echo stale")
        wait_for(arg)
        return "moved on"
    return f"permission={permission(sid, 'c3', 'echo asked')}"


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id, params = message.get("method"), message.get("id"), message.get("params") or {}
        if request_id is None or method is None:
            continue  # a notification (session/cancel) or the late answer to a request given up on
        result: dict[str, Any] = {}
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "asking-agent"}}
        elif method == "session/new":
            _cwd[0] = params.get("cwd") or _cwd[0]
            result = {"sessionId": "s1"}
        elif method == "session/prompt":
            text = "".join(b.get("text", "") for b in params.get("prompt", []) if isinstance(b, dict))
            word, _, arg = text.strip().partition(" ")
            said = turn(params.get("sessionId", "s1"), word, arg)
            chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": said}}
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": chunk}})
            result = {"stopReason": "end_turn"}
        else:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
            continue
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
