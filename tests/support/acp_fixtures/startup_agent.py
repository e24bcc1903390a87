"""An agent that fails at start, for the conformance suite's fail-fast and clean-up tests (a stdlib script).

    startup_agent.py [--env-dump PATH] [--grandchild MARKER] [--answer-once FLAG] [--banner TEXT]
                     (--silent | --die CODE | --refuse)

--env-dump PATH   write the environment it was started with to PATH (JSON) first
--grandchild M    start a child that sleeps for minutes with M on its command line, in the agent's own process
                  group, with none of the agent's pipes: a process that would outlive the agent
--answer-once F   the first process (the one that creates the file F) answers initialize; every later one
                  behaves as the mode says: an agent that starts once and then no more
--banner TEXT     write TEXT and a second plain line on stdout first, as an agent's start-up banner (or its error
                  said on stdout)
--silent          read stdin and never answer; exit when stdin closes
--refuse          answer every request with an error (-32603), initialize included
--die CODE        write 30 lines to stderr (with terminal control sequences in them) and exit CODE at once
"""

import json
import os
import sys
import types

if __package__:  # imported from the checkout (tests.support.acp_fixtures), as the type checker reads it
    from .quick_args import FLAG, ONE, quick
else:  # run as a script: this directory is first on sys.path
    from quick_args import FLAG, ONE, quick

# Read the quick way where the line is plain and names one mode; anything else is argparse's (its errors).
OPTIONS = {
    "--env-dump": ("env_dump", ONE, None, None),
    "--grandchild": ("grandchild", ONE, None, None),
    "--answer-once": ("answer_once", ONE, None, None),
    "--silent": ("silent", FLAG, None, None),
    "--die": ("die", ONE, int, None),
    "--refuse": ("refuse", FLAG, None, None),
    "--banner": ("banner", ONE, None, None),
}
DEFAULTS: dict[str, object] = dict.fromkeys(["env_dump", "grandchild", "answer_once", "die", "banner"]) | {
    "silent": False,
    "refuse": False,
}
values = quick(sys.argv[1:], OPTIONS, DEFAULTS)
if values is not None and [values["silent"], values["die"] is not None, values["refuse"]].count(True) == 1:
    args = types.SimpleNamespace(**values)
else:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--env-dump")
    parser.add_argument("--grandchild")
    parser.add_argument("--answer-once")
    parser.add_argument("--banner")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--silent", action="store_true")
    mode.add_argument("--die", type=int)
    mode.add_argument("--refuse", action="store_true")
    args = parser.parse_args(namespace=types.SimpleNamespace())

if args.env_dump:
    with open(args.env_dump, "w", encoding="utf-8") as fh:
        json.dump(dict(os.environ), fh)
if args.grandchild:
    import subprocess

    subprocess.Popen(
        [sys.executable, "-c", "import time, sys; time.sleep(300)", args.grandchild],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
if args.banner:
    sys.stdout.write(f"{args.banner}\nsee --help for the options\n")
    sys.stdout.flush()
if args.answer_once:
    try:
        open(args.answer_once, "x").close()
    except FileExistsError:
        pass
    else:
        for line in sys.stdin:
            message = json.loads(line)
            if message.get("method") == "initialize":
                result = {"protocolVersion": 1, "agentCapabilities": {}}
                sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
                sys.stdout.flush()
        sys.exit(0)
if args.die is not None:
    for n in range(1, 31):
        sys.stderr.write(f"startup-agent: line {n} \x1b[31mred\x1b[0m\x07\n")
    sys.stderr.write("startup-agent: fatal: no config file (the last line)\n")
    sys.stderr.flush()
    sys.exit(args.die)
for line in sys.stdin.buffer:
    if args.refuse:
        message = json.loads(line)
        if "id" in message:
            error = {"code": -32603, "message": "Internal error: not configured"}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}) + "\n")
            sys.stdout.flush()
    # --silent: reads everything, answers nothing
