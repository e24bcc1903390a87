"""A tiny external ACP agent for the `task` tool's tests (stdlib only): each line of a prompt is one directive.

    say TEXT                  an agent_message_chunk
    usage USED SIZE [COST]    a usage_update (COST in USD; left out: no cost)
    tokens N                  the prompt response's `usage.totalTokens`
    permission KIND TITLE     session/request_permission (allow/reject options); says `permission: <outcome>`
    read PATH                 fs/read_text_file; says `read: <content>` or `read error: <message>`
    write PATH TEXT           fs/write_text_file; says `write: ok` or `write error: <message>`
    env NAME                  says `env NAME=<value>` or `env NAME unset`
    tool TITLE                a tool_call and its completed tool_call_update
    ask KIND TITLE            a tool_call `a<n>`, then session/request_permission about that call; says as `permission`
    raw JSON                  a session/update whose `update` is JSON as written (hostile or malformed on purpose)
    term CWD CMD [ARGS…]      terminal/create (CWD `-`: none given), wait_for_exit, output, release; says
                              `term <id>: <output> exit <code>` or `term error: <message>`
    termopen CMD [ARGS…]      terminal/create in the session's folder, left running and unreleased; says `termopen <id>`
    termout ID                terminal/output of a terminal id it names; says `termout: …` or `termout error: …`
    caps                      says `terminal: <its clientCapabilities.terminal>`
    spawn                     starts a grandchild (`sleep`) in its process group; its pid goes to $TASK_AGENT_PIDS
    daemons                   starts `setsid sleep` and a double-forked daemon (its own session too), out of its
                              process group; their pids go to $TASK_AGENT_PIDS
    flood MB                  MB megabytes of session/updates: 64 KiB text chunks, thoughts, tool calls with 64 KiB
                              titles; then says `flooded`
    permissions N             N session/request_permission at once, then their answers; each refusal is noted
                              (`refused`) in $TASK_AGENT_EVENTS as it comes; says `permissions: <outcomes>`
    mislabeled KIND TITLE     session/request_permission with an allow option named "Reject" and a reject option
                              named "Allow"; says as `permission`
    die CODE                  writes to stderr and exits with CODE
    wait                      waits for session/cancel (the turn then ends `cancelled`) or the end of its stdin
    hang                      never answers, ignores session/cancel and the end of its stdin

`$TASK_AGENT_PIDS` (a file): the agent appends its own pid at start; `$TASK_AGENT_EVENTS` (a file): `session/cancel`
when `wait` got one. A session/cancel during a turn ends the turn
`cancelled` at the next directive.
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False  # typing itself is not imported: a stdlib script, as cheap to start as it can be
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_queue: list[dict[str, Any]] = []
_next_id = 0
_cancelled = False
_caps: dict[str, Any] = {}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def parse(line: str) -> dict[str, Any]:
    """One message of the client's: a JSON object (anything else stops this agent, as a broken client should)."""
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError(f"not a JSON-RPC message: {line!r}")
    return message


def read() -> dict[str, Any] | None:
    if _queue:
        return _queue.pop(0)
    line = sys.stdin.readline()
    if not line:
        return None
    return parse(line)


def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send a request and read until its answer; other messages wait in the queue (a cancel is noted)."""
    global _next_id, _cancelled
    _next_id += 1
    send({"jsonrpc": "2.0", "id": _next_id, "method": method, "params": params})
    held = []
    try:
        while True:
            line = sys.stdin.readline()
            if not line:
                sys.exit(0)
            message = parse(line)
            if message.get("id") == _next_id and "method" not in message:
                return message
            if message.get("method") == "session/cancel":
                _cancelled = True
            else:
                held.append(message)
    finally:
        _queue.extend(held)


def update(sid: str, body: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": body}})


def say(sid: str, text: str) -> None:
    update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})


class Line:
    """One line of a turn's script: `VERB REST`, its number in the prompt, and the turn's result it may add to."""

    def __init__(self, sid: str, n: int, rest: str, result: dict[str, Any]) -> None:
        self.sid, self.n, self.rest, self.result = sid, n, rest, result


def _say(line: Line) -> None:
    say(line.sid, line.rest)


def _usage(line: Line) -> None:
    parts = line.rest.split()
    body: dict[str, Any] = {"sessionUpdate": "usage_update", "used": int(parts[0]), "size": int(parts[1])}
    if len(parts) > 2:
        body["cost"] = {"amount": float(parts[2]), "currency": "USD"}
    update(line.sid, body)


def _tokens(line: Line) -> None:
    line.result["usage"] = {"totalTokens": int(line.rest), "inputTokens": int(line.rest), "outputTokens": 0}


def _permission(line: Line, shown: bool) -> None:
    """`permission KIND TITLE` asks with no tool call shown first; `ask KIND TITLE` shows the call, then asks."""
    sid = line.sid
    kind, _, title = line.rest.partition(" ")
    call_id = f"a{line.n}" if shown else f"p{line.n}"
    if shown:
        update(sid, {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": title, "kind": kind})
    answer = request(
        "session/request_permission",
        {
            "sessionId": sid,
            "toolCall": {"toolCallId": call_id, "title": title, "kind": kind, "status": "pending"},
            "options": [
                {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
                {"optionId": "no", "name": "No", "kind": "reject_once"},
            ],
        },
    )
    outcome = (answer.get("result") or {}).get("outcome") or {}
    say(sid, f"permission: {outcome.get('optionId') or outcome.get('outcome') or answer.get('error')}\n")


def _read(line: Line) -> None:
    answer = request("fs/read_text_file", {"sessionId": line.sid, "path": line.rest})
    if "result" in answer:
        say(line.sid, f"read: {answer['result']['content']}\n")
    else:
        say(line.sid, f"read error: {answer['error']['message']}\n")


def _write(line: Line) -> None:
    path, _, content = line.rest.partition(" ")
    answer = request("fs/write_text_file", {"sessionId": line.sid, "path": path, "content": content})
    say(line.sid, "write: ok\n" if "result" in answer else f"write error: {answer['error']['message']}\n")


def _term(line: Line) -> None:
    sid = line.sid
    cwd, *command = line.rest.split()
    params = {"sessionId": sid, "command": command[0], "args": command[1:]}
    if cwd != "-":
        params["cwd"] = cwd
    made = request("terminal/create", params)
    if "error" in made:
        say(sid, f"term error: {made['error']['message']}\n")
        return
    tid = made["result"]["terminalId"]
    request("terminal/wait_for_exit", {"sessionId": sid, "terminalId": tid})
    out = request("terminal/output", {"sessionId": sid, "terminalId": tid})["result"]
    request("terminal/release", {"sessionId": sid, "terminalId": tid})
    code = (out.get("exitStatus") or {}).get("exitCode")
    say(sid, f"term {tid}: {out['output'].strip()} exit {code}\n")


def _termopen(line: Line) -> None:
    command = line.rest.split()
    made = request("terminal/create", {"sessionId": line.sid, "command": command[0], "args": command[1:]})
    say(line.sid, f"termopen {made.get('result', {}).get('terminalId')}\n")


def _termout(line: Line) -> None:
    out = request("terminal/output", {"sessionId": line.sid, "terminalId": line.rest})
    if "error" in out:
        say(line.sid, f"termout error: {out['error']['message']}\n")
    else:
        say(line.sid, f"termout: {out['result']['output'].strip()}\n")


def _env(line: Line) -> None:
    value = os.environ.get(line.rest)
    say(line.sid, f"env {line.rest}={value}\n" if value is not None else f"env {line.rest} unset\n")


def _tool(line: Line) -> None:
    call = f"t{line.n}"
    update(line.sid, {"sessionUpdate": "tool_call", "toolCallId": call, "title": line.rest, "status": "pending"})
    update(line.sid, {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed"})


def _spawn(line: Line) -> None:
    import subprocess  # here, not at the top: most starts never spawn (a cheaper start)

    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    note_pid(child.pid)


def _daemons(line: Line) -> None:
    import subprocess  # here, not at the top: most starts never spawn (a cheaper start)

    pids = os.environ.get("TASK_AGENT_PIDS", os.devnull)
    # `setsid -f` (util-linux) forks the sleep into a session of its own and returns; it notes its own pid before it
    # becomes sleep.
    subprocess.Popen(
        ["setsid", "-f", "/bin/sh", "-c", f'echo $$ >> "{pids}"; exec sleep 60'],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ).wait()
    child = os.fork()
    if child == 0:  # the classic daemon: a session of its own, then a fork whose parent exits at once
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            note_pid(os.getpid())
            os.execv("/bin/sh", ["/bin/sh", "-c", "exec sleep 60"])
        os._exit(0)
    os.waitpid(child, 0)
    while len(_noted(pids)) < 3:  # the agent, the setsid sleep, the daemon
        time.sleep(0.01)
    say(line.sid, "daemons started\n")


def _flood(line: Line) -> None:
    chunk = "x" * 65536
    sent = 0
    n = 0
    while sent < int(line.rest) * 1024 * 1024:
        n += 1
        if n % 3 == 0:
            body: dict[str, Any] = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": chunk}}
        elif n % 3 == 1:
            body = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": chunk}}
        else:
            body = {"sessionUpdate": "tool_call", "toolCallId": f"c{n}", "title": chunk}
        update(line.sid, body)
        sent += len(chunk)
    say(line.sid, "\nflooded\n")


_OPTIONS = [
    {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
    {"optionId": "no", "name": "No", "kind": "reject_once"},
]


def _permissions(line: Line) -> None:
    """N requests at once (each waits for no answer), then every answer, in whatever order they come."""
    global _next_id
    sid, count = line.sid, int(line.rest)
    ids = set()
    for i in range(count):
        _next_id += 1
        ids.add(_next_id)
        call = {"toolCallId": f"q{i}", "title": f"Question {i}", "kind": "execute", "status": "pending"}
        params = {"sessionId": sid, "toolCall": call, "options": _OPTIONS}
        send({"jsonrpc": "2.0", "id": _next_id, "method": "session/request_permission", "params": params})
    outcomes: dict[str, int] = {}
    while ids:
        raw = sys.stdin.readline()
        if not raw:
            sys.exit(0)
        message = parse(raw)
        if message.get("id") not in ids or "method" in message:
            if message.get("method") != "session/cancel":
                _queue.append(message)
            continue
        ids.discard(message["id"])
        if "error" in message:
            note("refused")
            outcome = f"error {message['error']['code']} {message['error']['message']}"
        else:
            chosen = message["result"]["outcome"]
            outcome = chosen.get("optionId") or chosen.get("outcome")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    say(sid, f"permissions: {json.dumps(outcomes, sort_keys=True)}\n")


def _mislabeled(line: Line) -> None:
    kind, _, title = line.rest.partition(" ")
    options = [
        {"optionId": "go", "name": "Reject", "kind": "allow_once"},
        {"optionId": "stop", "name": "Allow", "kind": "reject_once"},
    ]
    call = {"toolCallId": "m1", "title": title, "kind": kind, "status": "pending"}
    answer = request("session/request_permission", {"sessionId": line.sid, "toolCall": call, "options": options})
    outcome = (answer.get("result") or {}).get("outcome") or {}
    say(line.sid, f"permission: {outcome.get('optionId') or outcome.get('outcome') or answer.get('error')}\n")


def _die(line: Line) -> None:
    sys.stderr.write("task_agent: dying on purpose\n")
    sys.stderr.flush()
    os._exit(int(line.rest or "1"))


def _wait(line: Line) -> dict[str, Any] | None:
    """Reads the client's messages until its session/cancel (the turn ends cancelled); others wait their turn."""
    while True:
        raw = sys.stdin.readline()
        if not raw:
            sys.exit(0)
        message = parse(raw)
        if message.get("method") == "session/cancel":
            note("session/cancel")
            return {"stopReason": "cancelled"}
        _queue.append(message)


def _hang(line: Line) -> None:
    while True:
        time.sleep(3600)


# A verb's handler may return the turn's result, ending the turn there.
VERBS: dict[str, Callable[[Line], dict[str, Any] | None]] = {
    "say": _say,
    "usage": _usage,
    "tokens": _tokens,
    "permission": lambda line: _permission(line, shown=False),
    "ask": lambda line: _permission(line, shown=True),
    "read": _read,
    "write": _write,
    "term": _term,
    "termopen": _termopen,
    "termout": _termout,
    "caps": lambda line: say(line.sid, f"terminal: {_caps.get('terminal')}\n"),
    "raw": lambda line: update(line.sid, json.loads(line.rest)),
    "env": _env,
    "tool": _tool,
    "spawn": _spawn,
    "daemons": _daemons,
    "flood": _flood,
    "permissions": _permissions,
    "mislabeled": _mislabeled,
    "die": _die,
    "wait": _wait,
    "hang": _hang,
}


def turn(sid: str, text: str) -> dict[str, Any]:
    global _cancelled
    _cancelled = False
    result: dict[str, Any] = {"stopReason": "end_turn"}
    for n, script_line in enumerate(text.splitlines()):
        if _cancelled:
            return {"stopReason": "cancelled"}
        word, _, rest = script_line.strip().partition(" ")
        handler = VERBS.get(word)
        ended = handler(Line(sid, n, rest, result)) if handler is not None else None
        if ended is not None:
            return ended
    return result


def note(event: str) -> None:
    path = os.environ.get("TASK_AGENT_EVENTS")
    if path:
        with open(path, "a") as f:
            f.write(f"{event}\n")


def _noted(path: str) -> list[str]:
    with open(path) as f:
        return f.read().split()


def note_pid(pid: int) -> None:
    path = os.environ.get("TASK_AGENT_PIDS")
    if path:
        with open(path, "a") as f:
            f.write(f"{pid}\n")


def main() -> None:
    note_pid(os.getpid())
    while True:
        message = read()
        if message is None:
            return
        method, mid, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method == "initialize":
            _caps.update(params.get("clientCapabilities") or {})
            result: dict[str, Any] = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
        elif method == "session/new":
            result = {"sessionId": "task-session-1"}
        elif method == "session/prompt":
            text = "\n".join(b.get("text", "") for b in params.get("prompt", []) if b.get("type") == "text")
            result = turn(params["sessionId"], text)
        elif method is not None and mid is None:
            continue  # a notification (a cancel outside a turn)
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"Method not found: {method}"}})
            continue
        send({"jsonrpc": "2.0", "id": mid, "result": result})


if __name__ == "__main__":
    main()
