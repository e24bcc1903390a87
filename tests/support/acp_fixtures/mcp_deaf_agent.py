"""An ACP agent (a stdlib script) that can load and resume sessions but never starts an MCP server: it accepts
`mcpServers` on session/new, load and resume and ignores them. Every prompt ends at once (`end_turn`) after one
chunk. For the conformance suite's R69 / R75.1 checks and their bounded waits."""

import json
import sys

if __package__:  # imported from the checkout (tests.support.acp_fixtures), as the type checker reads it
    from .fixture_ids import new_uuid4
else:  # run as a script: this directory is first on sys.path
    from fixture_ids import new_uuid4


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(rid: object, value: dict[str, object]) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": value})


CAPABILITIES = {"loadSession": True, "sessionCapabilities": {"resume": {}}}
INFO = {"name": "mcp-deaf-agent", "version": "1.0.0"}

for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
        continue
    if not isinstance(m, dict) or "id" not in m:
        continue  # notifications: nothing to do
    method, rid, params = m.get("method"), m["id"], m.get("params") or {}
    if method == "initialize":
        result(rid, {"protocolVersion": 1, "agentCapabilities": CAPABILITIES, "agentInfo": INFO})
    elif method == "session/new":
        result(rid, {"sessionId": new_uuid4()})
    elif method in ("session/load", "session/resume"):
        result(rid, {})  # nothing replayed: no conversation is kept (R66 is not what this fixture is for)
    elif method == "session/prompt":
        chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ok"}}
        send(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": params["sessionId"], "update": chunk},
            }
        )
        result(rid, {"stopReason": "end_turn"})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
