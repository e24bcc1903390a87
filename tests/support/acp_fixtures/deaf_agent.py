"""An ACP agent (a stdlib script) that answers initialize and session/new, streams one chunk of a prompt and never
ends the turn: for clients' cancel and suspend paths."""

import json
import sys


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif m.get("method") == "session/new":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": "s1"}})
    elif m.get("method") == "session/prompt":
        chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "working on it"}}
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": chunk}})
