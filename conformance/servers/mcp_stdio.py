"""The conformance suite's MCP server: `python /abs/path/mcp_stdio.py [--log FILE]`.

The suite hands it to the agent under test as a stdio MCP server (session/new `mcpServers`); the agent runs
it with its own Python and environment, so it imports nothing but the standard library (not even
`conformance`). It speaks newline-delimited JSON-RPC 2.0 on stdin/stdout and offers one tool,
`conformance_echo`, that answers "echo: <text>". With `--log FILE` it appends one JSON line per message it
receives (`{"method": ..., "id": ..., "params": ...}`, flushed at once), so the suite can see that the agent
connected and what it called. It exits 0 when stdin closes. Anything malformed gets a JSON-RPC error, never
a crash.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import IO, Any

TOOL_NAME = "conformance_echo"
DEFAULT_PROTOCOL = "2025-06-18"
MAX_LINE = 16 * 1024 * 1024  # far past any real message; a longer line is refused, not held in memory
TOOL = {
    "name": TOOL_NAME,
    "title": "Conformance echo",
    "description": "Echoes its text argument back, prefixed with 'echo: '.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to echo."}},
        "required": ["text"],
    },
}

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _initialize(params: dict[str, Any]) -> dict[str, Any]:
    version = params.get("protocolVersion")
    return {
        "protocolVersion": version if isinstance(version, str) else DEFAULT_PROTOCOL,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "acp-conformance-mcp", "version": "1.0.0"},
    }


def _call(params: dict[str, Any]) -> dict[str, Any]:
    name = params.get("name")
    if name != TOOL_NAME:
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {str(name)[:200]}")
    arguments = params.get("arguments")
    text = arguments.get("text") if isinstance(arguments, dict) else None
    if not isinstance(text, str):
        raise RpcError(INVALID_PARAMS, f"{TOOL_NAME}: the argument 'text' must be a string")
    return {"content": [{"type": "text", "text": f"echo: {text}"}], "isError": False}


def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The result of a request, or RpcError."""
    if method == "initialize":
        return _initialize(params)
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "tools/call":
        return _call(params)
    raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method[:200]}")


def _error(id_: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def _valid_id(id_: Any) -> bool:
    # JSON-RPC ids are strings or numbers (MCP: never null); a bool is not one, and a float could be NaN,
    # which has no JSON spelling to echo back.
    return isinstance(id_, str) or (isinstance(id_, int) and not isinstance(id_, bool))


Reply = tuple[dict[str, Any] | None, dict[str, Any]]  # the answer to a line (None: none), what to log of it


def handle(line: bytes) -> Reply:
    """The reply to one input line (None for a notification or a response) and what to log about it."""
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):  # also bad UTF-8, and nesting too deep to parse
        return _error(None, PARSE_ERROR, "Parse error"), {"method": None, "error": "parse error"}
    if not isinstance(msg, dict):
        return _error(None, INVALID_REQUEST, "Invalid Request: not an object"), {"method": None, "error": "invalid"}
    method, params = msg.get("method"), msg.get("params")
    entry: dict[str, Any] = {"method": method if isinstance(method, str) else None}
    if "id" in msg:
        entry["id"] = msg.get("id")
    if params is not None:
        entry["params"] = params
    if not isinstance(method, str):
        return _not_a_request(msg, entry)
    if "id" not in msg:
        return None, entry  # a notification (notifications/initialized, cancelled, ...): nothing to answer
    return _request(msg, method, entry)


def _invalid(msg: dict[str, Any], entry: dict[str, Any], message: str) -> Reply:
    id_ = msg.get("id")
    entry["error"] = "invalid"
    return _error(id_ if _valid_id(id_) else None, INVALID_REQUEST, message), entry


def _not_a_request(msg: dict[str, Any], entry: dict[str, Any]) -> Reply:
    """A message without a method: a response (this server never asks, so nothing to match), or invalid."""
    if "id" in msg and ("result" in msg or "error" in msg):
        return None, {**entry, "response": True}
    return _invalid(msg, entry, "Invalid Request: no method")


def _request(msg: dict[str, Any], method: str, entry: dict[str, Any]) -> Reply:
    id_, params = msg.get("id"), msg.get("params")
    if msg.get("jsonrpc") != "2.0" or not _valid_id(id_):
        return _invalid(msg, entry, "Invalid Request")
    if params is not None and not isinstance(params, dict):
        return _error(id_, INVALID_PARAMS, "Invalid params: not an object"), entry
    try:
        return {"jsonrpc": "2.0", "id": id_, "result": answer(method, params or {})}, entry
    except RpcError as exc:
        return _error(id_, exc.code, str(exc)), entry


def _read_line(stream: IO[bytes]) -> bytes | None:
    """The next line (None at EOF); a line longer than MAX_LINE is read to its end and returned as b"\\0"
    (not JSON, so it is answered as a parse error)."""
    line = stream.readline(MAX_LINE)
    if not line:
        return None
    if len(line) >= MAX_LINE and not line.endswith(b"\n"):
        while (more := stream.readline(MAX_LINE)) and not more.endswith(b"\n"):
            pass
        return b"\0"
    return line


def serve(stdin: IO[bytes], stdout: IO[bytes], log: IO[str] | None) -> None:
    while (line := _read_line(stdin)) is not None:
        if not line.strip():
            continue
        try:
            reply, entry = handle(line)
        except Exception as exc:  # a bug here must not end the agent's MCP session
            reply = _error(None, INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")
            entry = {"method": None, "error": "internal"}
        if log is not None:
            try:
                logged = json.dumps(entry, default=repr)
            except (ValueError, RecursionError):
                logged = json.dumps({"method": entry.get("method"), "error": "params not loggable"})
            log.write(logged + "\n")
            log.flush()
        if reply is not None:
            stdout.write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
            stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The ACP conformance suite's stdio MCP server.")
    parser.add_argument("--log", help="append one JSON line per message received to this file")
    ns = parser.parse_args(argv)
    log = open(ns.log, "a", encoding="utf-8") if ns.log else None  # open for the whole run
    try:
        serve(sys.stdin.buffer, sys.stdout.buffer, log)
    except (BrokenPipeError, KeyboardInterrupt):
        pass  # the client went away: the same as EOF
    finally:
        if log is not None:
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
