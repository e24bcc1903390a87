"""A stdio MCP server for the tests: `python -m tests.support.mcp_servers.stdio_server [--flags]`.

It serves toolset.py's tools with light_server.py (the standard library only: a start costs tens of
milliseconds of CPU, where importing the SDK costs a second); `--sdk` serves them with the official SDK's server
(toolset.py `build_server`) instead, for the tests whose subject is interop with a real SDK server. The two
answer alike on the wire (tests/unit/test_mcp_light_server.py).

Flags make it misbehave the ways real servers do:
  --never-start   reads nothing and answers nothing (hangs before initialize)
  --die-at-start  prints a reason to stderr and exits 3 before reading anything
  --garbage       writes lines that are not JSON-RPC to stdout, then hangs
  --stderr-lines N  writes N numbered lines to stderr before serving (the tail the client keeps)
  --name NAME     the server's name in initialize
  --sdk           the official SDK's server rather than the light one (it needs site-packages: not with -S)
"""

from __future__ import annotations

import os
import sys

SWITCHES = ("--never-start", "--die-at-start", "--garbage", "--sdk")
VALUES = {"--stderr-lines": "0", "--name": "testserver"}


class Flags:
    """The command line, read without argparse (whose imports would be a fifth of a light server's start)."""

    def __init__(self, argv: list[str]) -> None:
        values, switches, rest = dict(VALUES), set(), list(argv)
        while rest:
            arg = rest.pop(0)
            flag, has_value, value = arg.partition("=")
            if flag in VALUES and (has_value or rest):
                values[flag] = value if has_value else rest.pop(0)
            elif arg in SWITCHES:
                switches.add(arg)
            else:
                sys.stderr.write(f"stdio_server: unknown argument {arg!r}\n")
                sys.exit(2)
        self.never_start, self.die_at_start = "--never-start" in switches, "--die-at-start" in switches
        self.garbage, self.sdk = "--garbage" in switches, "--sdk" in switches
        self.stderr_lines, self.name = int(values["--stderr-lines"]), values["--name"]


def main() -> None:
    ns = Flags(sys.argv[1:])
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
    if ns.sdk:
        # Imported late so --die-at-start is instant.
        from tests.support.mcp_servers.toolset import build_server

        build_server(ns.name).run("stdio")
    else:
        # Where PYTHONDONTWRITEBYTECODE is set (this machine) nothing would keep light_server's bytecode, and each
        # start would compile it again: a fifth of a start. Written once, as pytest's own process does.
        sys.dont_write_bytecode = False
        from tests.support.mcp_servers.light_server import serve

        serve(ns.name)


if __name__ == "__main__":
    main()
