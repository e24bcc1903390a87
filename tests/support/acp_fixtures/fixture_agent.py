"""A small conforming ACP v1 agent for testing the conformance suite, with switchable misbehaviours.

    python tests/support/acp_fixtures/fixture_agent.py [--break NAME]...

It speaks ACP v1 over stdio (one compact JSON object a stdout line, logs on stderr) and does what the
conformance directives in a prompt ask (`acp-conformance: reply|slow|read|write|run|mcp ...`, the format of
`conformance/core/directives.py`, imported from the checkout it lives in): no model, so the suite can be checked against an
agent whose behaviour is known exactly. Each `--break NAME` (see `BREAKS`) breaks exactly one rule and leaves
everything else conforming, so a test can show the suite tells them apart.

    python tests/support/acp_fixtures/fixture_agent.py --models options-first|usage-first

also offers a config option of category `model` (see `MODELS`: `big` with a window and a price, `nowindow` with
neither) and reports a `usage_update` while the model has a window: after the session opens, at the end of each
turn and after a model change. At a model change the `config_option_update` and the `usage_update` go out in the
order named, both before the answer to session/set_config_option (ama's order is options first, rule E3; an
agent may well send them the other way round). Without `--models` nothing of this is offered or sent.

Each `--quirk NAME` (see `QUIRKS`) reproduces what a public agent did that the suite once misjudged or let through
(issue 43): a sign-in that needs a browser and never answers, `models` at the root of a session result, a turn that
answers after a short prompt timeout, a session's title under another session's id.

Stdlib only (plus that one small module, and quick_args.py beside it), on purpose: it may be run with any Python,
and it starts in milliseconds. Threads: the main one reads stdin and dispatches; each prompt turn, each session/new
(its MCP handshakes) and each session/close (waiting for the turn it cancels) runs in its own, so cancel,
set_mode, set_config_option and close are served while a turn runs. Requests to the client wait for their responses matched by id; an error reply or a
malformed one is reported in the turn, never raised.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time

# What a start needs and no more (one suite run starts ~22 agents, the test run ~330): the rest is imported where
# it is used — subprocess (an MCP server, a command), signal (stopping them), traceback (an internal error), the
# directive parser (a prompt; it brings dataclasses and inspect), argparse (a command line the quick reading in
# quick_args.py leaves to it) —, and typing, dataclasses and uuid not at all (plain classes, `new_uuid4`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import subprocess
    import types
    from collections.abc import Callable, Iterator
    from typing import IO, Any

    from ama_conformance.core.directives import Directive

if __package__:  # imported from the checkout (tests.support.acp_fixtures)
    from .fixture_ids import new_uuid4
    from .quick_args import FLAG, MANY, ONE, quick
else:  # started by launch.py, or as a script: this directory comes first on sys.path
    from fixture_ids import new_uuid4
    from quick_args import FLAG, MANY, ONE, quick

# The directive format has one parser, the suite's own (stdlib only, like this script): found as a module of its own
# in the checkout this file lives in (conformance/core/, which installs as ama_conformance.core), so the script
# still runs as a plain path with any interpreter and without the package's other modules.
# Imported in a test process, it is the installed package's module instead.
if not __package__:
    _ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    sys.path.insert(0, os.path.join(_ROOT, "conformance", "core"))

BREAKS: dict[str, str] = {
    "fs-unoffered": "read calls fs/read_text_file although the client did not offer it (falls back on an error)",
    "terminal-unoffered": "run calls terminal/create although the client did not offer terminal (falls back)",
    "reused-id": "read sends two fs/read_text_file requests with the same id, both outstanding",
    "answers-cancel": 'answers each session/cancel notification with {"id":null,"result":{}}',
    "root-field": 'adds "extra": true at the root of the session/new result',
    "early-update": "sends available_commands_update before the session/new response",
    "late-chunk": "sends one more agent_message_chunk after each session/prompt response",
    "relative-path": "read uses a path relative to the session cwd in fs/read_text_file and in locations",
    "no-release": "never calls terminal/release",
    "echo-version": "initialize answers with whatever protocolVersion was requested",
    "stdout-banner": "prints a plain 'fixture agent ready' line on stdout at start",
    "ignore-eof": "keeps running after stdin ends (until SIGTERM)",
    "crash-on-prompt": "writes a fake traceback to stderr and exits 3 on any session/prompt",
    "boolean-option": "offers a boolean config option in session/new to a client that did not advertise them",
}

# --hostile NAME: what an agent that wants to hurt the person does (issue 23), for tests of the clients' limits.
# The fs and terminal ones run at the start of every turn, before its directive; the others once, at start.
HOSTILE: dict[str, str] = {
    "read-passwd": "asks fs/read_text_file for /etc/passwd",
    "write-outside": "asks fs/write_text_file for OUTSIDE/escaped.txt and for CWD/../dotdot-escaped.txt",
    "write-link": "makes CWD/link -> OUTSIDE, then asks fs/write_text_file for CWD/link/via-link.txt",
    "terminal-touch": "asks terminal/create for `touch MARKER` in OUTSIDE (or in CWD without --outside)",
    "flood": "writes 10,000 lines that are not JSON on stdout at start",
    "nested": "writes one line of JSON nested 100,000 deep at start",
    "huge-line": "writes one line of --huge-size bytes (no newline inside) at start",
    "endless-flood": "on each session/prompt, writes lines that are not JSON without end (until stdout breaks)",
}
# --quirk NAME: regression fixtures of the suite's own verdicts (issue 43): each reproduces what a public agent did
# that the suite once judged wrongly, or once let through.
QUIRKS: dict[str, str] = {
    "auth-hangs": "session/new answers auth_required (-32000) until signed in; the one auth method, "
    "`oauth-personal` ('Log in with Google'), never answers authenticate: a browser sign-in nobody completes",
    "models-root": "adds `models` (SDK 0.17.0's unstable SessionModelState) at the root of the session/new result",
    "late-turn": "answers each reply turn LATE_TURN s late: after a short --prompt-timeout, yet it answers",
    "misroute-title": "titles a session after its first prompt, under the id of the session opened before it",
    "key-missing": "session/new answers auth_required (-32000) 'API key is missing' even after authenticate "
    "succeeds (with --auth ok): gemini-cli's API-key method, with no key in its environment",
}
LATE_TURN = 3.0  # seconds a --quirk late-turn reply waits before it answers
PERSON_METHOD = {
    "id": "oauth-personal",
    "name": "Log in with Google",
    "description": "Opens a browser to sign in with your Google account",
}
FLOOD_LINES = 10_000
NESTING = 100_000

# --escapes: terminal control sequences in every string a client shows (issue 23), for the clients' rendering.
OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # the clipboard: `rm -rf ~`
ESCAPES_INFO = {
    "name": "evil\x1b[6n",  # a DSR query: the terminal would type its answer into the shell
    "title": "Fixture \x1b]0;agent-title\x07agent \x1b[6n",  # OSC 0: the window title
    "version": "1.0" + OSC52,
}
ESCAPES_STDERR = f"stderr says {OSC52} \x1b]0;stderr-title\x07 \x1b]7501;state=done\x1b\\ \x1b[6n \x9b6n\n"
ESCAPES_TITLE = "\n  9. Yes, always (allow_always)"  # a forged option line inside the permission prompt
ESCAPES_REPLY = "forged \x1b]7501;state=done\x1b\\ status and " + OSC52 + " clipboard"
ESCAPES_STOP = "end_turn\x1b]0;stop-title\x07"

PROTOCOL_VERSION = 1
MCP_PROTOCOL_VERSION = "2025-06-18"
AGENT_INFO = {"name": "acp-fixture-agent", "title": "ACP conformance fixture agent", "version": "1.0.0"}

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

MODES = {"ask": "Ask", "code": "Code"}
# --models: id -> (name, window, USD per turn). `nowindow` has neither, so no usage_update is sent for it (as ama
# does for a model whose window it does not know, rule D3).
MODELS: dict[str, tuple[str, int | None, float | None]] = {
    "big": ("Big", 100_000, 0.0125),
    "nowindow": ("No window", None, None),
}
MODEL_ORDERS = ("options-first", "usage-first")
AUTH_METHOD = "fixture-login"  # --auth: the one agent auth method
# --persist: the update kinds of a turn that a load replays (the shapes of the live turn, ids included)
REPLAYED = frozenset({"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"})
TOKENS_PER_TURN = 20_000
PERMISSION_OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]
DEFAULT_REPLY = "Conformance reply."

SLOW_TICK = 0.05  # seconds between the chunks of a `slow` turn
SLOW_LIMIT = 60.0  # a `slow` turn nobody cancels ends by itself after this long
POLL = 0.05  # how often a wait for a client reply looks at the turn's cancel flag
CANCEL_GRACE = 10.0  # how long a cancelled turn still waits for a reply it asked for before giving up on it
CLOSE_WAIT = 30.0  # how long session/close waits for the turn it cancelled to answer
CLOSE_FIRST_LEAD = 0.05  # --close-answers-first: how long after the close response the turn is cancelled
EOF_WAIT = 5.0  # at stdin EOF, how long the cancelled turns get to finish
MCP_TIMEOUT = 10.0  # one MCP handshake step or tool call
OUTPUT_CAP = 64 * 1024  # characters of command output put into an update


def log(text: str) -> None:
    # Logs go to stderr only: stdout carries ACP messages and nothing else (R4).
    try:
        sys.stderr.write(f"fixture-agent: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


# --------------------------------------------------------------------------------------------------
# The wire
# --------------------------------------------------------------------------------------------------


class RpcError(Exception):
    """An error response to send: code and a one-sentence message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_request_id(value: object) -> bool:
    # JSON-RPC ids are strings or integers here; null ids and fractions are refused as invalid requests.
    return isinstance(value, str) or is_int(value)


def shown(value: object) -> str:
    """A client's value quoted in an error message: repr, cut short (a message is one short sentence, R14)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Wire:
    """stdout: one compact JSON object a line, written whole under one lock."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._closed = False

    def send(self, message: dict[str, Any], copies: int = 1) -> None:
        try:
            # ensure_ascii: a lone surrogate from the client's JSON cannot make the line unencodable.
            line = json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n"
        except (TypeError, ValueError) as exc:
            log(f"cannot encode a message ({exc}); not sent")
            return
        # The copies go out in one write, so the client reads them together (a pipe write this small is
        # atomic) and has answered neither when it reads the second (two writes let it answer in between).
        self.raw(line * copies)

    def raw(self, line: str) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                self._stream.write(line.encode("utf-8"))
                self._stream.flush()
            except (OSError, ValueError):
                self._closed = True  # the client is gone; nothing more can reach it

    def close(self) -> None:
        with self._lock:
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed


class Reply:
    """A client's answer to one of our requests: its result, or a one-line description of its error."""

    __slots__ = ("result", "error")

    def __init__(self, result: Any = None, error: str | None = None) -> None:
        self.result = result
        self.error = error

    def object(self) -> dict[str, Any] | None:
        return self.result if self.error is None and isinstance(self.result, dict) else None


class Waiter:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply = Reply()

    def resolve(self, reply: Reply) -> None:
        if not self.done.is_set():
            self.reply = reply
            self.done.set()


def describe_error(error: object) -> str:
    if isinstance(error, dict):
        return f"{error.get('message', 'error')} ({error.get('code', '?')})"
    return f"malformed error {error!r}"


class Outbound:
    """Requests we send on one JSON-RPC connection: unique increasing integer ids, replies matched by id."""

    def __init__(self, send: Callable[[dict[str, Any], int], None], what: str) -> None:
        self._send = send
        self._what = what
        self._ids = itertools.count(1)
        self._pending: dict[int, Waiter] = {}
        self._lock = threading.Lock()
        self._closed: str | None = None

    def start(self, method: str, params: dict[str, Any], copies: int = 1) -> tuple[int, Waiter]:
        waiter = Waiter()
        with self._lock:
            rid = next(self._ids)
            if self._closed is not None:
                waiter.resolve(Reply(error=self._closed))
                return rid, waiter
            self._pending[rid] = waiter
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self._send(message, copies)  # copies > 1 only for the reused-id break
        return rid, waiter

    def abandon(self, rid: int) -> None:
        with self._lock:
            self._pending.pop(rid, None)

    def resolve(self, message: dict[str, Any]) -> None:
        rid = message.get("id")
        with self._lock:
            waiter = self._pending.pop(rid, None) if isinstance(rid, int) and not isinstance(rid, bool) else None
        if waiter is None:
            log(f"{self._what}: a response to id {rid!r}, which is not outstanding; ignored")
            return
        if "error" in message:
            waiter.resolve(Reply(error=describe_error(message["error"])))
        else:
            waiter.resolve(Reply(result=message.get("result")))

    def close(self, reason: str) -> None:
        with self._lock:
            self._closed = reason
            pending, self._pending = self._pending, {}
        for waiter in pending.values():
            waiter.resolve(Reply(error=reason))


def wait_reply(
    out: Outbound,
    rid: int,
    waiter: Waiter,
    cancelled: threading.Event | None,
    on_cancel: Callable[[], None] | None = None,
    timeout: float | None = None,
    grace: float = CANCEL_GRACE,
) -> Reply:
    """The reply to request `rid`. Once the turn is cancelled, `on_cancel` runs (once) and the reply is waited
    for `grace` more seconds at most; `timeout` bounds the whole wait. Giving up abandons the id."""
    start = time.monotonic()
    give_up = None if timeout is None else start + timeout
    while not waiter.done.wait(POLL):
        now = time.monotonic()
        if cancelled is not None and cancelled.is_set():
            if on_cancel is not None:
                on_cancel()
                on_cancel = None
            limit = now + grace
            give_up = limit if give_up is None else min(give_up, limit)
            cancelled = None  # the grace is counted from the first time the cancel is seen
        if give_up is not None and now >= give_up:
            out.abandon(rid)
            return Reply(error="no reply in time")
    return waiter.reply


# --------------------------------------------------------------------------------------------------
# MCP servers (stdio), one connection each
# --------------------------------------------------------------------------------------------------


class McpSpec:
    __slots__ = ("name", "command", "args", "env")

    def __init__(self, name: str, command: str, args: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.command = command
        self.args = args
        self.env = env


def parse_mcp_server(server: object) -> McpSpec:
    if not isinstance(server, dict):
        raise RpcError(INVALID_PARAMS, "each entry of mcpServers must be an object")
    name = server.get("name")
    if "type" in server:
        kind = server["type"]
        if kind in ("http", "sse"):
            raise RpcError(
                INVALID_PARAMS,
                f"MCP server {shown(name)} uses the {kind} transport, which this agent does not support "
                f"(mcpCapabilities.{kind} is false)",
            )
        raise RpcError(INVALID_PARAMS, f"MCP server {shown(name)} has an unknown transport type {shown(kind)}")
    command = server.get("command")
    args = server.get("args")
    env = server.get("env")
    if not isinstance(name, str):
        raise RpcError(INVALID_PARAMS, "a stdio MCP server needs a string name")
    if not isinstance(command, str) or not command:
        raise RpcError(INVALID_PARAMS, f"MCP server {shown(name)} needs a command string")
    if args is None:  # the schema reads null as the default, []
        args = []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise RpcError(INVALID_PARAMS, f"the args of MCP server {shown(name)} must be a list of strings")
    if env is None:
        env = []
    if not isinstance(env, list) or not all(
        isinstance(v, dict) and isinstance(v.get("name"), str) and isinstance(v.get("value"), str) for v in env
    ):
        raise RpcError(INVALID_PARAMS, f"the env of MCP server {shown(name)} must be a list of {{name, value}} strings")
    return McpSpec(name, command, list(args), {v["name"]: v["value"] for v in env})


class McpServer:
    """One stdio MCP server this agent started for a session: JSON-RPC lines over its stdin/stdout."""

    def __init__(self, spec: McpSpec, proc: subprocess.Popen[bytes]) -> None:
        self.name = spec.name
        self.proc = proc
        self.tools: list[str] = []
        self._write_lock = threading.Lock()
        self.out = Outbound(self._send, f"MCP server {spec.name!r}")
        threading.Thread(target=self._read_loop, name=f"mcp-{spec.name}", daemon=True).start()

    def _send(self, message: dict[str, Any], copies: int = 1) -> None:
        stdin = self.proc.stdin
        if stdin is None:
            return
        try:
            data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8") * copies
            with self._write_lock:
                stdin.write(data)
                stdin.flush()
        except (OSError, ValueError) as exc:
            log(f"MCP server {self.name!r}: cannot write to it ({exc})")

    def _read_loop(self) -> None:
        stdout = self.proc.stdout
        try:
            for raw in stdout or ():
                self._on_line(raw)
        except (OSError, ValueError):
            pass
        finally:
            self.out.close(f"MCP server {self.name!r} exited")

    def _on_line(self, raw: bytes) -> None:
        try:
            message = json.loads(raw)
        except (ValueError, RecursionError):
            if raw.strip():
                log(f"MCP server {self.name!r} wrote a line that is not JSON; ignored")
            return
        if not isinstance(message, dict):
            return
        if "method" in message:
            if "id" in message:  # a request to us: we only know ping
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
                if message["method"] == "ping":
                    reply["result"] = {}
                else:
                    reply["error"] = {"code": METHOD_NOT_FOUND, "message": f"Method not found: {message['method']}"}
                self._send(reply)
            return
        if "id" in message:
            self.out.resolve(message)

    def request(self, method: str, params: dict[str, Any], cancelled: threading.Event | None = None) -> Reply:
        rid, waiter = self.out.start(method, params)

        def withdraw() -> None:  # MCP's way to give up on a request; no reply is due after it
            self._send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})

        return wait_reply(self.out, rid, waiter, cancelled, withdraw, timeout=MCP_TIMEOUT, grace=0.0)

    def handshake(self) -> bool:
        reply = self.request(
            "initialize",
            {"protocolVersion": MCP_PROTOCOL_VERSION, "capabilities": {}, "clientInfo": AGENT_INFO},
        )
        if reply.object() is None:
            log(f"MCP server {self.name!r}: initialize failed ({reply.error or 'not an object'})")
            return False
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        cursor: str | None = None
        for _ in range(20):  # pages; a server that pages forever is cut off
            reply = self.request("tools/list", {"cursor": cursor} if cursor else {})
            result = reply.object()
            if result is None or not isinstance(result.get("tools"), list):
                log(f"MCP server {self.name!r}: tools/list failed ({reply.error or 'malformed result'})")
                return False
            self.tools += [t["name"] for t in result["tools"] if isinstance(t, dict) and isinstance(t.get("name"), str)]
            cursor = result.get("nextCursor") if isinstance(result.get("nextCursor"), str) else None
            if not cursor:
                break
        return True


# --------------------------------------------------------------------------------------------------
# Sessions and turns
# --------------------------------------------------------------------------------------------------


class Turn:
    __slots__ = ("request_id", "cancelled", "done", "text", "closed")

    def __init__(self, request_id: Any, text: str = "") -> None:
        self.request_id = request_id
        self.cancelled = threading.Event()
        self.done = threading.Event()
        self.text = text  # the prompt's text (kept with --persist)
        self.closed = False  # cancelled by session/close rather than session/cancel


class Session:
    __slots__ = ("id", "cwd", "mode", "model", "turns", "cost", "turn", "mcp", "_calls", "history", "said")

    def __init__(
        self, id: str, cwd: str, mode: str = "ask", model: str | None = None, turns: int = 0, cost: float | None = 0.0
    ) -> None:
        self.id = id
        self.cwd = cwd
        self.mode = mode
        self.model = model  # with --models: one of MODELS
        self.turns = turns  # turns that ended (with --models, the usage grows with them)
        self.cost = cost  # with --models: what the turns cost; None once a turn had no price (unknown)
        self.turn: Turn | None = None
        self.mcp: list[McpServer] = []
        self._calls: Iterator[int] = itertools.count(1)
        # --persist: per finished turn, the user's text and the turn's updates (chunks, tool calls), replayed on load
        self.history: list[dict[str, Any]] = []
        self.said: list[dict[str, Any]] = []  # the updates of the running turn

    def new_call_id(self) -> str:
        return f"call-{next(self._calls)}"


def mode_state(mode: str) -> dict[str, Any]:
    return {"currentModeId": mode, "availableModes": [{"id": k, "name": v} for k, v in MODES.items()]}


def config_options(mode: str) -> list[dict[str, Any]]:
    return [
        {
            "id": "mode",
            "name": "Mode",
            "category": "mode",
            "type": "select",
            "currentValue": mode,
            "options": [{"value": k, "name": v} for k, v in MODES.items()],
        }
    ]


def text_content(text: str) -> list[dict[str, Any]]:
    return [{"type": "content", "content": {"type": "text", "text": text}}]


def prompt_text(prompt: object) -> str:
    """The text of a prompt's text blocks; -32602 for a malformed block or a type this agent did not advertise."""
    if not isinstance(prompt, list):
        raise RpcError(INVALID_PARAMS, "prompt must be an array of content blocks")
    texts: list[str] = []
    for block in prompt:
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(block, dict) or not isinstance(kind, str):
            raise RpcError(INVALID_PARAMS, "each prompt block must be an object with a string type")
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise RpcError(INVALID_PARAMS, "a text block needs a string text")
            texts.append(block["text"])
        elif kind == "resource_link":
            if not isinstance(block.get("uri"), str) or not isinstance(block.get("name"), str):
                raise RpcError(INVALID_PARAMS, "a resource_link block needs string uri and name")
        elif kind == "resource":
            resource = block.get("resource")
            if not isinstance(resource, dict) or not isinstance(resource.get("uri"), str):
                raise RpcError(INVALID_PARAMS, "a resource block needs a resource with a string uri")
            if not isinstance(resource.get("text"), str) and not isinstance(resource.get("blob"), str):
                raise RpcError(INVALID_PARAMS, "an embedded resource needs a string text or blob")
        elif kind in ("image", "audio"):
            raise RpcError(INVALID_PARAMS, f"{kind} blocks are not supported (promptCapabilities.{kind} is false)")
        else:
            raise RpcError(INVALID_PARAMS, f"unknown content block type {shown(kind)}")
    return "\n".join(texts)


def read_local(path: str) -> tuple[str | None, str | None]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read(), None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot read {path}: {exc}"


def write_local(path: str, text: str) -> str | None:
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    except OSError as exc:
        return f"cannot write {path}: {exc}"
    return None


def kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the child's process group (it was started in its own session), so `sh -c` takes its children."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def format_exc() -> str:
    import traceback

    return traceback.format_exc()


FAKE_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "fixture_agent.py", line 1, in handle_prompt\n'
    "    raise RuntimeError(...)\n"
    "RuntimeError: fixture agent crashed on session/prompt (--break crash-on-prompt)\n"
)


# --------------------------------------------------------------------------------------------------
# The agent
# --------------------------------------------------------------------------------------------------


class ClientCaps:
    __slots__ = ("read", "write", "terminal")

    def __init__(self, read: bool = False, write: bool = False, terminal: bool = False) -> None:
        self.read = read
        self.write = write
        self.terminal = terminal


if TYPE_CHECKING:  # only for the checker: evaluated, this line would need Python 3.10
    Handler = Callable[[Any, dict[str, Any]], dict[str, Any] | None]


class Agent:
    def __init__(self, breaks: frozenset[str], stdout: IO[bytes], models: str | None = None) -> None:
        self.breaks = breaks
        self.escapes = False  # --escapes
        self.hostile: frozenset[str] = frozenset()
        self.outside: str | None = None  # --outside DIR: where the hostile requests point
        self.title: str | None = None  # --title TEXT: a session_info_update with it as each session opens
        self.huge_size = 65 * 1024 * 1024
        self.models = models  # None, or the order of a model change's updates (MODEL_ORDERS)
        self.persist: str | None = None  # --persist DIR: sessions kept there, loadSession and resume advertised
        self.load_usage = "after"  # --load-usage: the usage_update after the load/resume response, or "before" it
        self.auth: str | None = None  # --auth ok|error: an agent auth method, and how authenticate answers
        self.close_answers_first = False  # --close-answers-first
        self.close_error = False  # --close-error
        self.late_after_cancel: float | None = None  # --late-after-cancel SECONDS
        self.prompt_error = False  # --prompt-error
        self.quirks: frozenset[str] = frozenset()  # --quirk
        self.signed_in = False  # --quirk auth-hangs: never, as nobody completes the browser sign-in
        self.titled: set[str] = set()  # --quirk misroute-title: the sessions titled so far
        self.wire = Wire(stdout)
        self.client = Outbound(self.wire.send, "client")
        self.caps = ClientCaps()
        self.lock = threading.Lock()  # sessions and their turns; taken before the wire's lock, never after
        self.sessions: dict[str, Session] = {}
        self.children: set[subprocess.Popen[bytes]] = set()  # MCP servers and commands run without a terminal
        self.stopping = False  # stdin ended: a child started from now on is stopped at once
        self.handlers: dict[str, Handler] = {
            "initialize": self.initialize,
            "session/new": self.session_new,
            "session/prompt": self.session_prompt,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
            "session/close": self.session_close,
            "session/load": self.session_load,
            "session/resume": self.session_resume,
            "authenticate": self.authenticate,
        }

    # --- writing ----------------------------------------------------------------------------------

    def respond(self, rid: Any, result: dict[str, Any]) -> None:
        self.wire.send({"jsonrpc": "2.0", "id": rid, "result": result})

    def error(self, rid: Any, code: int, message: str) -> None:
        self.wire.send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        session = self.sessions.get(session_id)
        if session is not None and session.turn is not None and update.get("sessionUpdate") in REPLAYED:
            session.said.append(update)  # kept for a replay (--persist)
        self.wire.send(
            {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}
        )

    def chunk(self, session_id: str, text: str) -> None:
        self.update(session_id, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})

    def call(
        self,
        method: str,
        params: dict[str, Any],
        turn: Turn,
        *,
        copies: int = 1,
        on_cancel: Callable[[], None] | None = None,
    ) -> Reply:
        rid, waiter = self.client.start(method, params, copies)
        return wait_reply(self.client, rid, waiter, turn.cancelled, on_cancel)

    def guarded(self, rid: Any, work: Callable[[], dict[str, Any] | None]) -> None:
        """Run a handler and answer for it: its result, its RpcError, or -32603 for a bug (logged)."""
        try:
            result = work()
        except RpcError as exc:
            self.error(rid, exc.code, exc.message)
        except Exception as exc:
            log(f"internal error: {format_exc()}")
            self.error(rid, INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")
        else:
            if result is not None:
                self.respond(rid, result)

    def spawn(self, target: Callable[[], None], name: str) -> None:
        threading.Thread(target=target, name=name, daemon=True).start()

    # --- reading ----------------------------------------------------------------------------------

    def serve(self, stdin: IO[bytes]) -> None:
        if self.escapes:
            sys.stderr.write(ESCAPES_STDERR)
            sys.stderr.flush()
        if "stdout-banner" in self.breaks:
            self.wire.raw("fixture agent ready\n")
        if "flood" in self.hostile:
            self.wire.raw("not json, line of a flood\n" * FLOOD_LINES)
        if "nested" in self.hostile:
            self.wire.raw("[" * NESTING + "]" * NESTING + "\n")
        if "huge-line" in self.hostile:
            self.wire.raw("x" * self.huge_size + "\n")
        for raw in stdin:
            try:
                self.on_line(raw)
            except Exception:  # never let one line end the agent
                log(f"internal error on a line: {format_exc()}")

    def on_line(self, raw: bytes) -> None:
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if not raw.strip():
            return
        try:
            message = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError too
            self.error(None, PARSE_ERROR, f"Parse error: {type(exc).__name__}")
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.error(None, INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 object")
            return
        if "method" not in message:
            if "id" in message and ("result" in message) != ("error" in message):
                self.client.resolve(message)
            else:
                self.error(None, INVALID_REQUEST, "Invalid request: neither a request, a notification nor a response")
            return
        method = message["method"]
        if not isinstance(method, str):
            self.error(None, INVALID_REQUEST, "Invalid request: method must be a string")
            return
        params = message.get("params", {})
        if "id" not in message:
            self.on_notification(method, params if isinstance(params, dict) else {})
            return
        rid = message["id"]
        if not is_request_id(rid):
            self.error(None, INVALID_REQUEST, "Invalid request: id must be a string or an integer")
            return
        if params is None:
            params = {}
        if not isinstance(params, dict):
            self.error(rid, INVALID_PARAMS, "Invalid params: params must be an object")
            return
        handler = self.handlers.get(method)
        if handler is None:
            self.error(rid, METHOD_NOT_FOUND, f"Method not found: {shown(method)}")
            return
        self.guarded(rid, lambda: handler(rid, params))

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        # Notifications are never answered (R13), whatever they carry; only session/cancel and a
        # $/cancel_request naming a running prompt (which it then cancels, answering `cancelled`) do something.
        if method == "$/cancel_request":
            with self.lock:
                turns = [s.turn for s in self.sessions.values() if s.turn is not None]
            for running in turns:
                wanted = params.get("requestId")
                if running.request_id == wanted and type(running.request_id) is type(wanted):
                    running.cancelled.set()
            return
        if method != "session/cancel":
            return
        if "answers-cancel" in self.breaks:
            self.wire.send({"jsonrpc": "2.0", "id": None, "result": {}})
        sid = params.get("sessionId")
        with self.lock:
            session = self.sessions.get(sid) if isinstance(sid, str) else None
            turn = session.turn if session is not None else None
        if turn is not None:
            turn.cancelled.set()

    # --- methods ----------------------------------------------------------------------------------

    def session_for(self, params: dict[str, Any]) -> Session:
        sid = params.get("sessionId")
        with self.lock:
            session = self.sessions.get(sid) if isinstance(sid, str) else None
        if session is None:
            raise RpcError(INVALID_PARAMS, f"unknown session {shown(sid)}")
        return session

    def initialize(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        version = params.get("protocolVersion")
        if not is_int(version):
            raise RpcError(INVALID_PARAMS, "protocolVersion must be an integer")
        caps = params.get("clientCapabilities")
        if caps is not None and not isinstance(caps, dict):
            raise RpcError(INVALID_PARAMS, "clientCapabilities must be an object")
        caps = caps or {}
        fs: dict[str, Any] = caps["fs"] if isinstance(caps.get("fs"), dict) else {}
        # Absent, null or anything but true: not offered (R31).
        self.caps = ClientCaps(
            read=fs.get("readTextFile") is True,
            write=fs.get("writeTextFile") is True,
            terminal=caps.get("terminal") is True,
        )
        return {
            "protocolVersion": version if "echo-version" in self.breaks else PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": self.persist is not None,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {"close": {}, "resume": {}} if self.persist is not None else {"close": {}},
            },
            "authMethods": [{"id": AUTH_METHOD, "name": "Fixture sign-in"}] if self.auth is not None else [],
            **({"authMethods": [PERSON_METHOD]} if "auth-hangs" in self.quirks else {}),
            "agentInfo": ESCAPES_INFO if self.escapes else AGENT_INFO,
        }

    def session_new(self, rid: Any, params: dict[str, Any]) -> None:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise RpcError(INVALID_PARAMS, "cwd must be an absolute path")
        servers = params.get("mcpServers")
        if not isinstance(servers, list):
            raise RpcError(INVALID_PARAMS, "mcpServers must be an array")
        specs = [parse_mcp_server(s) for s in servers]  # all checked before anything is started
        if "auth-hangs" in self.quirks and not self.signed_in:
            raise RpcError(-32000, "Authentication required")
        if "key-missing" in self.quirks:
            raise RpcError(-32000, "Gemini API key is missing or not configured.")
        session = Session(new_uuid4(), cwd, model="big" if self.models else None)
        # The MCP handshakes wait on other processes: not on the thread that reads stdin.
        self.spawn(lambda: self.guarded(rid, lambda: self._open_session(rid, session, specs)), "session-new")

    def config_options(self, mode: str, model: str | None = None) -> list[dict[str, Any]]:
        options = config_options(mode)
        if model is not None:
            options.append(
                {
                    "id": "model",
                    "name": "Model",
                    "category": "model",
                    "type": "select",
                    "currentValue": model,
                    "options": [{"value": k, "name": v[0]} for k, v in MODELS.items()],
                }
            )
        if "boolean-option" in self.breaks:  # in every payload, so the list stays complete (R94)
            options.append({"id": "verbose", "name": "Verbose", "type": "boolean", "currentValue": False})
        return options

    def report_usage(self, session: Session) -> None:
        """--models: the meter of the session's model, when it has a window (none is invented for one without)."""
        if session.model is None:
            return
        window = MODELS[session.model][1]
        if window is None:
            return
        update: dict[str, Any] = {"sessionUpdate": "usage_update", "used": 1_000 + TOKENS_PER_TURN * session.turns}
        update["size"] = window
        if session.cost is not None:
            update["cost"] = {"amount": round(session.cost, 6), "currency": "USD"}
        self.update(session.id, update)

    def _open_session(self, rid: Any, session: Session, specs: list[McpSpec]) -> None:
        for spec in specs:
            server = self.start_mcp(spec, session.cwd)
            if server is not None:
                session.mcp.append(server)
        with self.lock:
            self.sessions[session.id] = session
        if self.persist is not None:
            self.save(session)
        result: dict[str, Any] = {
            "sessionId": session.id,
            "modes": mode_state(session.mode),
            "configOptions": self.config_options(session.mode, session.model),
        }
        if "root-field" in self.breaks:
            result["extra"] = True
        if "models-root" in self.quirks:
            result["models"] = {"currentModelId": "big", "availableModels": [{"modelId": "big", "name": "Big"}]}

        commands = {"sessionUpdate": "available_commands_update", "availableCommands": []}
        if "early-update" in self.breaks:
            self.update(session.id, commands)
            self.respond(rid, result)
        else:
            self.respond(rid, result)
            self.update(session.id, commands)
        if self.title is not None:  # as an agent that titles a session when it opens (ama on load/resume)
            self.update(session.id, {"sessionUpdate": "session_info_update", "title": self.title})
        self.report_usage(session)

    def start_mcp(self, spec: McpSpec, cwd: str) -> McpServer | None:
        import subprocess

        env = dict(os.environ)
        env.update(spec.env)
        try:
            proc = subprocess.Popen(
                [spec.command, *spec.args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=cwd if os.path.isdir(cwd) else None,
                env=env,
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:
            log(f"MCP server {spec.name!r} did not start: {exc}")
            return None
        with self.lock:
            self.children.add(proc)
            stopping = self.stopping
        if stopping:  # shutdown() has already stopped the children it knew of
            self.stop_children([proc])
            return None
        server = McpServer(spec, proc)
        if server.handshake():
            log(f"MCP server {spec.name!r} ready with tools {server.tools}")
            return server
        self.stop_children([proc])
        return None

    def session_prompt(self, rid: Any, params: dict[str, Any]) -> None:
        if "crash-on-prompt" in self.breaks:
            sys.stderr.write(FAKE_TRACEBACK)
            sys.stderr.flush()
            self.stop_children(list(self.children))
            os._exit(3)
        session = self.session_for(params)
        if self.prompt_error:  # --prompt-error: as an agent whose model cannot be reached
            raise RpcError(INTERNAL_ERROR, "the model at http://127.0.0.1:9/v1 cannot be reached")
        text = prompt_text(params.get("prompt"))
        with self.lock:
            if self.sessions.get(session.id) is not session:  # closed since it was looked up
                raise RpcError(INVALID_PARAMS, f"unknown session {shown(session.id)}")
            if session.turn is not None:
                raise RpcError(
                    INVALID_PARAMS, "a prompt turn is already running in this session; cancel it or wait for its end"
                )
            turn = session.turn = Turn(rid, text=text)
            session.said = []
        if __package__:
            from ama_conformance.core.directives import parse_directive
        else:
            from directives import parse_directive

        directive = parse_directive(text)
        if "misroute-title" in self.quirks:
            self.misrouted_title(session, text)
        self.spawn(lambda: self.run_turn(session, turn, directive), "turn")

    def misrouted_title(self, session: Session, text: str) -> None:
        """--quirk misroute-title: the session's title, from its first prompt, under the id of the session
        opened before it (one public agent sent one session's title under the other's id)."""
        with self.lock:
            if session.id in self.titled:
                return
            self.titled.add(session.id)
            ids = list(self.sessions)
        before = ids[ids.index(session.id) - 1] if len(ids) > 1 else session.id
        self.update(before, {"sessionUpdate": "session_info_update", "title": text.splitlines()[0][:80]})

    def set_mode(self, rid: Any, params: dict[str, Any]) -> None:
        session = self.session_for(params)
        mode = params.get("modeId")
        if not isinstance(mode, str) or mode not in MODES:
            raise RpcError(INVALID_PARAMS, f"unknown mode {shown(mode)}")
        session.mode = mode  # the `mode` config option reads the same field: the two agree
        self.respond(rid, {})
        self.update(session.id, {"sessionUpdate": "current_mode_update", "currentModeId": session.mode})

    def set_config_option(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        session = self.session_for(params)
        config_id = params.get("configId")
        value = params.get("value")
        if config_id == "model" and session.model is not None:
            return self.set_model(session, params)
        if config_id != "mode":
            raise RpcError(INVALID_PARAMS, f"unknown config option {shown(config_id)}")
        if params.get("type") not in (None, "select") or not isinstance(value, str) or value not in MODES:
            raise RpcError(INVALID_PARAMS, f"{shown(value)} is not a value of config option 'mode'")
        session.mode = value
        return {"configOptions": self.config_options(session.mode, session.model)}

    def set_model(self, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        value = params.get("value")
        if params.get("type") not in (None, "select") or not isinstance(value, str) or value not in MODELS:
            raise RpcError(INVALID_PARAMS, f"{shown(value)} is not a value of config option 'model'")
        if value != session.model:
            session.model = value
            options = {
                "sessionUpdate": "config_option_update",
                "configOptions": self.config_options(session.mode, value),
            }
            if self.models == "usage-first":
                self.report_usage(session)
                self.update(session.id, options)
            else:
                self.update(session.id, options)
                self.report_usage(session)
        return {"configOptions": self.config_options(session.mode, session.model)}

    def session_close(self, rid: Any, params: dict[str, Any]) -> None:
        sid = params.get("sessionId")
        with self.lock:
            session = self.sessions.pop(sid, None) if isinstance(sid, str) else None
            turn = session.turn if session is not None else None
        if session is None:
            raise RpcError(INVALID_PARAMS, f"unknown session {shown(sid)}")
        if turn is not None:
            turn.closed = True
            if self.close_answers_first:  # --close-answers-first: {} goes out first, the cancelled turn's answer after
                self.respond(rid, {})

                def later() -> None:
                    time.sleep(CLOSE_FIRST_LEAD)
                    turn.cancelled.set()
                    turn.done.wait(CLOSE_WAIT)
                    self.stop_children([s.proc for s in session.mcp])

                self.spawn(later, "session-close")
                return
            turn.cancelled.set()  # exactly as session/cancel would

        def finish() -> dict[str, Any]:
            # The cancelled prompt's response goes out before this one (R88).
            if turn is not None and not turn.done.wait(CLOSE_WAIT):
                log(f"session {session.id}: the cancelled turn did not end in {CLOSE_WAIT} s")
            self.stop_children([s.proc for s in session.mcp])
            return {}

        self.spawn(lambda: self.guarded(rid, finish), "session-close")

    # --- --auth, --persist ---------------------------------------------------------------------------

    def authenticate(self, rid: Any, params: dict[str, Any]) -> dict[str, Any] | None:
        method = params.get("methodId")
        if "auth-hangs" in self.quirks and method == PERSON_METHOD["id"]:
            log("authenticate: waiting for a browser sign-in that never comes (--quirk auth-hangs)")
            return None  # never answered
        if self.auth is None:  # no sign-in offered: the method is not there, as before --auth existed
            raise RpcError(METHOD_NOT_FOUND, "Method not found: authenticate")
        if method != AUTH_METHOD:
            raise RpcError(INVALID_PARAMS, f"unknown auth method {shown(method)}")
        if self.auth == "error":  # a sign-in that needs what no client of the suite has
            raise RpcError(INTERNAL_ERROR, "Sign-in needs a browser: run `fixture login` first")
        return {}

    def _path(self, sid: str) -> str:
        safe = "".join(ch for ch in sid if ch.isalnum() or ch == "-")
        return os.path.join(self.persist or ".", f"session-{safe}.json")

    def save(self, session: Session) -> None:
        """--persist: the session as a JSON file, for a later process to load or resume."""
        state: dict[str, Any] = {"id": session.id, "history": session.history, "model": session.model}
        state.update(turns=session.turns, cost=session.cost)
        os.makedirs(self.persist or ".", exist_ok=True)
        with open(self._path(session.id), "w", encoding="utf-8") as fh:
            json.dump(state, fh)

    def restore(self, params: dict[str, Any]) -> tuple[Session, list[McpSpec]]:
        if self.persist is None:
            raise RpcError(METHOD_NOT_FOUND, "Method not found: sessions are not kept (no --persist)")
        sid, cwd, servers = params.get("sessionId"), params.get("cwd"), params.get("mcpServers")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise RpcError(INVALID_PARAMS, "cwd must be an absolute path")
        if not isinstance(servers, list):
            raise RpcError(INVALID_PARAMS, "mcpServers must be an array")
        specs = [parse_mcp_server(s) for s in servers]
        try:
            with open(self._path(str(sid)), encoding="utf-8") as fh:
                state = json.load(fh)
        except (OSError, ValueError):
            raise RpcError(INVALID_PARAMS, f"unknown session {shown(sid)}") from None
        if not isinstance(sid, str) or state.get("id") != sid:
            raise RpcError(INVALID_PARAMS, f"unknown session {shown(sid)}")
        session = Session(sid, cwd, model=state.get("model"), turns=state.get("turns", 0), cost=state.get("cost"))
        session.history = state.get("history", [])
        return session, specs

    def session_load(self, rid: Any, params: dict[str, Any]) -> dict[str, Any] | None:
        """None: answered by the task it starts (an agent of its own may answer at once, with the result)."""
        session, specs = self.restore(params)
        self.spawn(lambda: self.guarded(rid, lambda: self._reopen(rid, session, specs, replay=True)), "session-load")
        return None

    def session_resume(self, rid: Any, params: dict[str, Any]) -> None:
        session, specs = self.restore(params)
        self.spawn(lambda: self.guarded(rid, lambda: self._reopen(rid, session, specs, replay=False)), "session-resume")

    def _reopen(self, rid: Any, session: Session, specs: list[McpSpec], *, replay: bool) -> None:
        """Load (the history replayed first) or resume (nothing replayed); the usage after the response, or with
        --load-usage before, between the replay and the response (as some agents do: the spec allows both)."""
        for spec in specs:
            server = self.start_mcp(spec, session.cwd)
            if server is not None:
                session.mcp.append(server)
        with self.lock:
            self.sessions[session.id] = session
        for turn in session.history if replay else ():
            content = {"type": "text", "text": turn["user"]}
            self.update(session.id, {"sessionUpdate": "user_message_chunk", "content": content})
            for update in turn["updates"]:
                self.update(session.id, update)
        result = {"modes": mode_state(session.mode), "configOptions": self.config_options(session.mode, session.model)}
        if self.load_usage == "before":
            self.report_usage(session)
            self.respond(rid, result)
        else:
            self.respond(rid, result)
            self.report_usage(session)

    # --- turns ------------------------------------------------------------------------------------

    def run_turn(self, session: Session, turn: Turn, directive: Directive | None) -> None:
        failure: str | None = None
        try:
            self.act(session, turn, directive)
        except Exception as exc:
            log(f"internal error in a turn: {format_exc()}")
            failure = f"Internal error: {type(exc).__name__}"
        with self.lock:
            # Under the lock: session/close, which also takes it, sees the turn only until its response is out.
            if session.turn is turn:
                session.turn = None
            if turn.cancelled.is_set() and turn.closed and self.close_error:  # --close-error (breaks R88)
                self.error(turn.request_id, INTERNAL_ERROR, "Internal error: the session was closed")
            elif turn.cancelled.is_set():
                self.respond(turn.request_id, {"stopReason": "cancelled"})  # never an error (R111)
            elif failure is not None:
                self.error(turn.request_id, INTERNAL_ERROR, failure)
            else:
                self.end_turn_usage(session)
                if self.escapes:  # a stop reason and usage keys with escapes (not ACP's: a client shows them anyway)
                    self.respond(turn.request_id, {"stopReason": ESCAPES_STOP, "usage": {"\x1b]0;key\x07in": 5}})
                else:
                    self.respond(turn.request_id, {"stopReason": "end_turn"})
                if self.persist is not None:
                    session.history.append({"user": turn.text, "updates": session.said})
                    self.save(session)
        turn.done.set()
        if "late-chunk" in self.breaks:
            self.chunk(session.id, "One more thing.")
        if turn.cancelled.is_set() and self.late_after_cancel is not None:  # --late-after-cancel (breaks R105)
            time.sleep(self.late_after_cancel)
            self.chunk(session.id, "One more thing, after the cancel.")

    def end_turn_usage(self, session: Session) -> None:
        """--models: the turn is counted (and billed, while every turn had a price), then the meter reported."""
        if session.model is None:
            return
        session.turns += 1
        price = MODELS[session.model][2]
        session.cost = session.cost + price if price is not None and session.cost is not None else None
        self.report_usage(session)

    def hostile_requests(self, session: Session, turn: Turn) -> None:
        """--hostile: ask the client for what it must not give; each answer is told in a chunk."""
        asks: list[tuple[str, dict[str, Any]]] = []
        sid = session.id
        if "read-passwd" in self.hostile:
            asks.append(("fs/read_text_file", {"sessionId": sid, "path": "/etc/passwd"}))
        if "write-outside" in self.hostile and self.outside:
            asks.append(
                (
                    "fs/write_text_file",
                    {"sessionId": sid, "path": os.path.join(self.outside, "escaped.txt"), "content": "x"},
                )
            )
            dotdot = session.cwd + "/../dotdot-escaped.txt"
            asks.append(("fs/write_text_file", {"sessionId": sid, "path": dotdot, "content": "x"}))
        if "write-link" in self.hostile and self.outside:
            link = os.path.join(session.cwd, "link")
            if not os.path.islink(link):
                os.symlink(self.outside, link)
            asks.append(
                ("fs/write_text_file", {"sessionId": sid, "path": os.path.join(link, "via-link.txt"), "content": "x"})
            )
        if "endless-flood" in self.hostile:
            while not self.wire.closed:  # a pipe's worth at a time: the client reads as fast as it can
                self.wire.raw("not json, a line of an endless flood\n" * 2000)
        if "terminal-touch" in self.hostile:
            cwd = self.outside or session.cwd
            asks.append(("terminal/create", {"sessionId": sid, "command": "touch", "args": ["MARKER"], "cwd": cwd}))
        for method, params in asks:
            reply = self.call(method, params, turn)
            result = reply.object()
            if method == "terminal/create" and result is not None and isinstance(result.get("terminalId"), str):
                ref = {"sessionId": sid, "terminalId": result["terminalId"]}
                self.call("terminal/wait_for_exit", ref, turn)
                self.call("terminal/release", ref, turn)
            outcome = "served" if result is not None else f"refused: {reply.error}"
            self.chunk(sid, f"hostile {method} {params.get('path') or params.get('cwd')}: {outcome}\n")

    def act(self, session: Session, turn: Turn, directive: Directive | None) -> None:
        if self.hostile:
            self.hostile_requests(session, turn)
        verb = directive.verb if directive is not None else "reply"
        if verb == "slow":
            self.slow(session, turn)
        elif directive is not None and verb == "read":
            self.read(session, turn, directive.path)
        elif directive is not None and verb == "write":
            self.write(session, turn, directive.path, directive.text)
        elif directive is not None and verb == "run":
            self.run(session, turn, directive.text)
        elif directive is not None and verb == "mcp":
            self.mcp(session, turn, directive.text)
        else:
            if "late-turn" in self.quirks:  # an answer that comes, late (cancel still ends the wait)
                turn.cancelled.wait(LATE_TURN)
            text = (directive.text if directive is not None else "") or (
                ESCAPES_REPLY if self.escapes else DEFAULT_REPLY
            )
            head, space, tail = text.partition(" ")
            if space and tail:  # two chunks, so a client has to join them
                self.chunk(session.id, head + space)
                self.chunk(session.id, tail)
            else:
                self.chunk(session.id, text)

    def slow(self, session: Session, turn: Turn) -> None:
        deadline = time.monotonic() + SLOW_LIMIT
        tick = 0
        while not turn.cancelled.is_set() and time.monotonic() < deadline:
            self.chunk(session.id, f"tick {tick} ")
            tick += 1
            turn.cancelled.wait(SLOW_TICK)

    def absolute(self, session: Session, path: str) -> str:
        # A directive's path should be absolute already; a relative one is taken from the session's cwd.
        return path if os.path.isabs(path) else os.path.normpath(os.path.join(session.cwd, path))

    def tool_call(self, session: Session, call_id: str, title: str, kind: str, **extra: Any) -> None:
        update = {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": title, "kind": kind}
        self.update(session.id, {**update, "status": "pending", **extra})

    def tool_update(self, session: Session, call_id: str, status: str, **extra: Any) -> None:
        self.update(session.id, {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status, **extra})

    def fail_tool(self, session: Session, turn: Turn, call_id: str, why: str) -> None:
        self.tool_update(session, call_id, "failed", content=text_content(why))
        if not turn.cancelled.is_set():
            self.chunk(session.id, why)

    def read(self, session: Session, turn: Turn, raw_path: str) -> None:
        path = self.absolute(session, raw_path)
        shown = os.path.relpath(path, session.cwd) if "relative-path" in self.breaks else path
        call_id = session.new_call_id()
        self.tool_call(session, call_id, f"Read {shown}", "read", locations=[{"path": shown}])
        if turn.cancelled.is_set():
            return self.fail_tool(session, turn, call_id, "Cancelled before the file was read.")
        self.tool_update(session, call_id, "in_progress")
        if self.caps.read or "fs-unoffered" in self.breaks:
            copies = 2 if "reused-id" in self.breaks and self.caps.read else 1
            reply = self.call("fs/read_text_file", {"sessionId": session.id, "path": shown}, turn, copies=copies)
            result = reply.object()
            content = result.get("content") if result is not None else None
            error = None if isinstance(content, str) else (reply.error or "the fs/read_text_file result has no content")
            if error is not None and not self.caps.read:  # fs-unoffered: the client said no; read it here
                content, error = read_local(path)
        else:
            content, error = read_local(path)
        if not isinstance(content, str):
            return self.fail_tool(session, turn, call_id, f"Could not read {shown}: {error}")
        self.tool_update(session, call_id, "completed", content=text_content(content))
        self.chunk(session.id, f"Read {len(content)} characters from {shown}.")

    def ask_permission(self, session: Session, turn: Turn, call_id: str, title: str, kind: str) -> str:
        """'allow', 'reject', 'cancelled', or 'error' (an error reply or an answer that is none of ours)."""
        title = title + ESCAPES_TITLE + OSC52 if self.escapes else title
        tool = {"toolCallId": call_id, "title": title, "kind": kind, "status": "pending"}
        reply = self.call(
            "session/request_permission",
            {"sessionId": session.id, "toolCall": tool, "options": PERMISSION_OPTIONS},
            turn,
        )
        result = reply.object()
        outcome = result.get("outcome") if result is not None else None
        if not isinstance(outcome, dict):
            log(f"permission request for {call_id}: {reply.error or 'malformed answer'}")
            return "error"
        if outcome.get("outcome") == "cancelled":
            return "cancelled"
        if outcome.get("outcome") == "selected" and outcome.get("optionId") in ("allow", "reject"):
            return str(outcome["optionId"])
        log(f"permission request for {call_id}: an answer that is none of the options: {outcome!r}")
        return "error"

    def permitted(self, session: Session, turn: Turn, call_id: str, title: str, kind: str) -> bool:
        answer = self.ask_permission(session, turn, call_id, title, kind)
        if answer == "allow":
            return True
        why = {"reject": "rejected", "cancelled": "cancelled"}.get(answer, "not given (the answer was malformed)")
        self.fail_tool(session, turn, call_id, f"Permission was {why}; nothing was done.")
        return False

    def write(self, session: Session, turn: Turn, raw_path: str, text: str) -> None:
        path = self.absolute(session, raw_path)
        call_id = session.new_call_id()
        title = f"Write {path}"
        self.tool_call(session, call_id, title, "edit", locations=[{"path": path}])
        if not self.permitted(session, turn, call_id, title, "edit"):
            return
        if turn.cancelled.is_set():
            return self.fail_tool(session, turn, call_id, "Cancelled before the file was written.")
        self.tool_update(session, call_id, "in_progress")
        if self.caps.write:
            reply = self.call("fs/write_text_file", {"sessionId": session.id, "path": path, "content": text}, turn)
            error = reply.error
        else:
            error = write_local(path, text)
        if error is not None:
            return self.fail_tool(session, turn, call_id, f"Could not write {path}: {error}")
        diff = {"type": "diff", "path": path, "oldText": None, "newText": text}
        self.tool_update(session, call_id, "completed", content=[diff])
        self.chunk(session.id, f"Wrote {len(text)} characters to {path}.")

    def run(self, session: Session, turn: Turn, command: str) -> None:
        call_id = session.new_call_id()
        title = f"Run {command}"
        self.tool_call(session, call_id, title, "execute", rawInput={"command": command})
        if not self.permitted(session, turn, call_id, title, "execute"):
            return
        if turn.cancelled.is_set():
            return self.fail_tool(session, turn, call_id, "Cancelled before the command ran.")
        if self.caps.terminal or "terminal-unoffered" in self.breaks:
            create = {"sessionId": session.id, "command": "sh", "args": ["-c", command], "cwd": session.cwd}
            reply = self.call("terminal/create", create, turn)
            result = reply.object()
            terminal_id = result.get("terminalId") if result is not None else None
            if isinstance(terminal_id, str):
                return self.run_in_terminal(session, turn, call_id, terminal_id)
            error = reply.error or "the terminal/create result has no terminalId"
            if self.caps.terminal:
                return self.fail_tool(session, turn, call_id, f"Could not start the command: {error}")
            # terminal-unoffered: the client refused; run it here instead.
        self.run_here(session, turn, call_id, command)

    def run_in_terminal(self, session: Session, turn: Turn, call_id: str, terminal_id: str) -> None:
        ref = {"sessionId": session.id, "terminalId": terminal_id}
        # Shown before it is released (R134).
        self.tool_update(session, call_id, "in_progress", content=[{"type": "terminal", "terminalId": terminal_id}])

        def kill() -> None:  # a cancelled turn stops its command; wait_for_exit then returns
            self.client.start("terminal/kill", ref)

        exit_reply = self.call("terminal/wait_for_exit", ref, turn, on_cancel=kill)
        exited = exit_reply.object() or {}
        output_result = self.call("terminal/output", ref, turn).object() or {}
        output = output_result.get("output") if isinstance(output_result.get("output"), str) else ""
        if "no-release" not in self.breaks:
            self.call("terminal/release", ref, turn)
        code = exited.get("exitCode")
        raw = {"exitCode": code, "signal": exited.get("signal"), "output": str(output)[-OUTPUT_CAP:]}
        self.tool_update(session, call_id, "completed" if code == 0 else "failed", rawOutput=raw)
        if not turn.cancelled.is_set():
            self.chunk(session.id, f"The command exited with code {code}. Output: {str(output)[-OUTPUT_CAP:]}")

    def run_here(self, session: Session, turn: Turn, call_id: str, command: str) -> None:
        import subprocess

        self.tool_update(session, call_id, "in_progress")
        try:
            proc = subprocess.Popen(
                ["sh", "-c", command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=session.cwd if os.path.isdir(session.cwd) else None,
                start_new_session=True,
            )
        except OSError as exc:
            return self.fail_tool(session, turn, call_id, f"Could not start the command: {exc}")
        with self.lock:
            self.children.add(proc)
        killed = False
        while True:
            try:
                data, _ = proc.communicate(timeout=POLL)  # retried after a timeout without losing output
                break
            except subprocess.TimeoutExpired:
                if turn.cancelled.is_set() and not killed:
                    import signal

                    kill_group(proc, signal.SIGKILL)
                    killed = True
        with self.lock:
            self.children.discard(proc)
        output = data.decode("utf-8", errors="replace")[-OUTPUT_CAP:]
        code = proc.returncode
        status = "completed" if code == 0 else "failed"
        self.tool_update(session, call_id, status, content=text_content(output), rawOutput={"exitCode": code})
        if not turn.cancelled.is_set():
            self.chunk(session.id, f"The command exited with code {code}. Output: {output}")

    def mcp(self, session: Session, turn: Turn, tool: str) -> None:
        server = next((s for s in session.mcp if tool in s.tools), None)
        if server is None:
            self.chunk(session.id, f"No MCP server of this session offers a tool named {tool}.")
            return
        call_id = session.new_call_id()
        arguments = {"text": "conformance"}
        self.tool_call(session, call_id, f"{server.name}: {tool}", "other", rawInput=arguments)
        self.tool_update(session, call_id, "in_progress")
        reply = server.request("tools/call", {"name": tool, "arguments": arguments}, turn.cancelled)
        result = reply.object()
        if result is None:
            return self.fail_tool(session, turn, call_id, f"The MCP tool {tool} failed: {reply.error or 'malformed'}")
        parts: list[Any] = result["content"] if isinstance(result.get("content"), list) else []
        text = "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))
        status = "failed" if result.get("isError") is True else "completed"
        self.tool_update(session, call_id, status, content=text_content(text))
        if not turn.cancelled.is_set():
            self.chunk(session.id, f"The MCP tool {tool} answered: {text}")

    # --- the end ----------------------------------------------------------------------------------

    def stop_children(self, procs: list[subprocess.Popen[bytes]]) -> None:
        """Close their stdin, then SIGTERM their process groups, then SIGKILL what is left after a second."""
        if not procs:
            return
        import signal
        import subprocess

        for proc in procs:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass
            kill_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 1.0
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_group(proc, signal.SIGKILL)
                try:
                    proc.wait(1.0)
                except subprocess.TimeoutExpired:
                    log(f"child {proc.pid} did not die")
        with self.lock:
            self.children.difference_update(procs)

    def shutdown(self) -> None:
        """stdin ended: cancel every turn (their responses still go out), then stop every child."""
        self.client.close("the client closed the connection")
        with self.lock:
            self.stopping = True
            turns = [s.turn for s in self.sessions.values() if s.turn is not None]
        for turn in turns:
            turn.cancelled.set()
        deadline = time.monotonic() + EOF_WAIT
        for turn in turns:
            turn.done.wait(max(0.0, deadline - time.monotonic()))
        with self.lock:
            children = list(self.children)
        self.stop_children(children)
        self.wire.close()


# The command line read the quick way (quick_args.py): option -> (dest, kind, type, choices), as parse_args's parser.
OPTIONS = {
    "--break": ("breaks", MANY, None, BREAKS),
    "--models": ("models", ONE, None, MODEL_ORDERS),
    "--escapes": ("escapes", FLAG, None, None),
    "--hostile": ("hostile", MANY, None, HOSTILE),
    "--outside": ("outside", ONE, None, None),
    "--title": ("title", ONE, None, None),
    "--persist": ("persist", ONE, None, None),
    "--load-usage": ("load_usage", ONE, None, ("after", "before")),
    "--auth": ("auth", ONE, None, ("ok", "error")),
    "--close-answers-first": ("close_answers_first", FLAG, None, None),
    "--close-error": ("close_error", FLAG, None, None),
    "--late-after-cancel": ("late_after_cancel", ONE, float, None),
    "--prompt-error": ("prompt_error", FLAG, None, None),
    "--huge-size": ("huge_size", ONE, int, None),
    "--quirk": ("quirks", MANY, None, QUIRKS),
}
DEFAULTS: dict[str, object] = {
    "breaks": [],
    "models": None,
    "escapes": False,
    "hostile": [],
    "outside": None,
    "title": None,
    "persist": None,
    "load_usage": "after",
    "auth": None,
    "close_answers_first": False,
    "close_error": False,
    "late_after_cancel": None,
    "prompt_error": False,
    "huge_size": 65 * 1024 * 1024,
    "quirks": [],
}


def parse_args(argv: list[str]) -> types.SimpleNamespace:
    """The options, read the quick way where the line is plain (an unknown break is not: argparse's error)."""
    values = quick(argv, OPTIONS, DEFAULTS)
    if values is not None:
        import types

        return types.SimpleNamespace(**values)
    return parse_args_fully(argv)


def parse_args_fully(argv: list[str]) -> types.SimpleNamespace:
    import types

    parser = build_parser()
    ns = parser.parse_args(argv, namespace=types.SimpleNamespace())
    unknown = [b for b in ns.breaks if b not in BREAKS]
    if unknown:
        parser.error(f"unknown break {unknown[0]!r} (known: {', '.join(BREAKS)})")  # exits 2
    return ns


def build_parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(
        prog="fixture_agent.py",
        description="A small ACP v1 agent for testing the conformance suite.",
        epilog="breaks: " + "; ".join(f"{k}: {v}" for k, v in BREAKS.items()),
    )
    parser.add_argument("--break", dest="breaks", action="append", default=[], metavar="NAME")
    parser.add_argument(
        "--models",
        choices=MODEL_ORDERS,
        default=None,
        help="offer a model option and report usage; at a model change, send the options and the usage in this order",
    )
    parser.add_argument("--escapes", action="store_true", help="terminal escapes in every string a client shows")
    parser.add_argument("--hostile", action="append", default=[], choices=sorted(HOSTILE), help="see HOSTILE")
    parser.add_argument("--outside", default=None, metavar="DIR", help="where the --hostile requests point")
    parser.add_argument("--title", default=None, help="send a session_info_update with this title as a session opens")
    # Regression fixtures of the suite's verdicts (issue 26): each changes one thing the spec allows (the first
    # four, and --prompt-error: a model out of reach) or breaks one rule (--close-error, --late-after-cancel).
    parser.add_argument("--persist", metavar="DIR", help="keep sessions in DIR; advertise session/load and resume")
    parser.add_argument(
        "--load-usage", choices=("after", "before"), default="after", help="usage_update after or before the response"
    )
    parser.add_argument("--auth", choices=("ok", "error"), help="advertise an agent auth method; authenticate so")
    parser.add_argument(
        "--close-answers-first", action="store_true", help="session/close answers before the cancelled turn does"
    )
    parser.add_argument("--close-error", action="store_true", help="a turn cancelled by session/close answers -32603")
    parser.add_argument("--late-after-cancel", type=float, metavar="S", help="a chunk S seconds after a cancelled turn")
    parser.add_argument("--prompt-error", action="store_true", help="every session/prompt answers -32603 (no model)")
    parser.add_argument("--huge-size", type=int, default=65 * 1024 * 1024, help="bytes of the huge-line line")
    parser.add_argument(
        "--quirk", dest="quirks", action="append", default=[], choices=sorted(QUIRKS), help="see QUIRKS"
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    ns = parse_args(sys.argv[1:] if argv is None else argv)
    breaks = frozenset(ns.breaks)
    stdout = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print() cannot reach the wire
    agent = Agent(breaks, stdout, ns.models)
    agent.hostile = frozenset(ns.hostile)
    agent.escapes = ns.escapes
    agent.outside = ns.outside
    agent.huge_size = ns.huge_size
    agent.title = ns.title
    agent.persist = ns.persist
    agent.load_usage = ns.load_usage
    agent.auth = ns.auth
    agent.close_answers_first = ns.close_answers_first
    agent.close_error = ns.close_error
    agent.late_after_cancel = ns.late_after_cancel
    agent.prompt_error = ns.prompt_error
    agent.quirks = frozenset(ns.quirks)
    agent.serve(sys.stdin.buffer)
    if "ignore-eof" in breaks:
        log("stdin ended; staying up (--break ignore-eof)")
        threading.Event().wait()  # SIGTERM's default action ends it
    agent.shutdown()
    try:
        sys.stderr.flush()
    finally:
        # Not sys.exit: daemon threads (MCP readers) must not race the interpreter's teardown of stdout.
        os._exit(0)


if __name__ == "__main__":
    main()
