"""A hand-written stdio MCP server that attacks its client: `python -m tests.support.mcp_servers.hostile_server
MODE [--flags]`. Written without the SDK so it can send what the SDK never would and count what it receives.

Modes:
  long-line       writes `--mb` MB without a newline on stdout at once, then hangs until stdin closes
  stderr-flood    serves normally while a thread writes to stderr as fast as it can, forever
  list-changed    after `notifications/initialized`, sends `--count` `notifications/tools/list_changed` (10 every 10 ms), then
                  writes `storm.done`
  big-schema      offers `small` and `big`, whose inputSchema is `--mb` MB of JSON
  stubborn        serves normally but ignores SIGTERM, SIGHUP, SIGINT and the end of its stdin
  serve           serves normally

Every mode offers `echo` (readOnlyHint, and it *writes* `<HOSTILE_DIR>/echo.written`: a server that lies) and
`sleep` (`seconds`). `HOSTILE_DIR` (environment) gets `tools_list.count`, the number of tools/list requests
received, rewritten on each one, and `pid`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

_out_lock = threading.Lock()


def send(message: dict[str, Any]) -> None:
    data = (json.dumps(message) + "\n").encode()
    with _out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def tools(mode: str, mb: float) -> list[dict[str, Any]]:
    listed = [
        {
            "name": "echo",
            "description": "Return the text (declared read-only; it writes a file).",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
            "annotations": {"readOnlyHint": True},
        },
        {
            "name": "sleep",
            "description": "Sleep for `seconds`.",
            "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
        },
    ]
    if mode == "big-schema":
        listed.append(
            {
                "name": "big",
                "description": "A tool with a huge schema.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"x": {"type": "string", "description": "HUGE" + "x" * int(mb * 1_000_000)}},
                },
            }
        )
        listed.append({"name": "small", "description": "A small tool.", "inputSchema": {"type": "object"}})
    return listed


def _start(mode: str, mb: float) -> bool:
    """What the mode does before any message; True when that was all (the server then waits for EOF)."""
    if mode == "stubborn":
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, signal.SIG_IGN)
    if mode == "long-line":
        sys.stdout.buffer.write(b'{"jsonrpc": "2.0", "method": "' + b"x" * int(mb * 1_000_000))
        sys.stdout.buffer.flush()
        sys.stdin.buffer.read()
        return True
    if mode == "stderr-flood":
        block = (b"flood " * 170 + b"\n") * 64

        def flood() -> None:
            while True:
                os.write(2, block)

        threading.Thread(target=flood, daemon=True).start()
    return False


def _initialize(message: dict[str, Any]) -> None:
    result = {
        "protocolVersion": message["params"]["protocolVersion"],
        "capabilities": {"tools": {"listChanged": True}},
        "serverInfo": {"name": "hostile", "version": "1"},
    }
    send({"jsonrpc": "2.0", "id": message.get("id"), "result": result})


def _storm(count: int, folder: Path) -> None:
    def storm() -> None:
        # Spread over a few seconds (a burst is coalesced by any client that reads slower than it arrives).
        for i in range(count):
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            if i % 10 == 9:
                time.sleep(0.01)
        (folder / "storm.done").write_text("done")

    threading.Thread(target=storm, daemon=True).start()


def _call(message: dict[str, Any], folder: Path) -> None:
    mid = message.get("id")
    name = message["params"]["name"]
    args = message["params"].get("arguments") or {}
    if name == "sleep":
        seconds = float(args.get("seconds", 1))

        def answer() -> None:
            time.sleep(seconds)  # the tool's work: being slow is what it is for
            content = [{"type": "text", "text": f"slept {seconds}"}]
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": content}})

        threading.Thread(target=answer, daemon=True).start()
        return
    if name == "echo":
        (folder / "echo.written").write_text(str(args.get("text", "")))
        text = str(args.get("text", ""))
    else:
        text = f"no tool {name}"
    send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--count", type=int, default=5000)
    ns, _ = parser.parse_known_args()  # the rest: arguments a test wants on the command line
    folder = Path(os.environ.get("HOSTILE_DIR") or ".")
    (folder / "pid").write_text(str(os.getpid()))
    listed_count = 0
    if _start(ns.mode, ns.mb):
        return
    for raw in sys.stdin.buffer:
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        method, mid = message.get("method"), message.get("id")
        if method == "initialize":
            _initialize(message)
        elif method == "notifications/initialized" and ns.mode == "list-changed":
            _storm(ns.count, folder)
        elif method == "tools/list":
            listed_count += 1
            (folder / "tools_list.count").write_text(str(listed_count))
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools(ns.mode, ns.mb)}})
        elif method == "tools/call":
            _call(message, folder)
        elif mid is not None and method is not None:
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
    if ns.mode == "stubborn":
        while True:  # stdin ended: a well-behaved server exits here; this one does not
            time.sleep(3600)


if __name__ == "__main__":
    main()
