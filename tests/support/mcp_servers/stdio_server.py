"""A stdio MCP server for the tests: `python -m tests.support.mcp_servers.stdio_server [--flags]`.

Flags make it misbehave the ways real servers do:
  --never-start   reads nothing and answers nothing (hangs before initialize)
  --die-at-start  prints a reason to stderr and exits 3 before reading anything
  --garbage       writes lines that are not JSON-RPC to stdout, then hangs
  --stderr-lines N  writes N numbered lines to stderr before serving (the tail the client keeps)
  --name NAME     the server's name in initialize
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--never-start", action="store_true")
    parser.add_argument("--die-at-start", action="store_true")
    parser.add_argument("--garbage", action="store_true")
    parser.add_argument("--stderr-lines", type=int, default=0)
    parser.add_argument("--name", default="testserver")
    ns = parser.parse_args()
    if pid_file := os.environ.get("MCP_TEST_PID_FILE"):  # so a test can check the process is gone
        with open(pid_file, "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))
    for i in range(ns.stderr_lines):
        sys.stderr.write(f"stderr line {i}\n")
    sys.stderr.flush()
    if ns.die_at_start:
        sys.stderr.write("die-at-start: cannot open the database\n")
        sys.stderr.flush()
        sys.exit(3)
    if ns.never_start or ns.garbage:
        if ns.garbage:
            for i in range(50):
                sys.stdout.write(f"this is not json {i} {{[\n")
            sys.stdout.flush()
        # Hang until the client closes stdin (or kills us): an Event nobody sets would outlive the client.
        for _ in sys.stdin:
            pass
        os._exit(0)
    # Imported late so --die-at-start is instant.
    from tests.support.mcp_servers.toolset import build_server

    build_server(ns.name).run("stdio")


if __name__ == "__main__":
    main()
