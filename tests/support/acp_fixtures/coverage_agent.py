"""The fixture agent (fixture_agent.py) with what the coverage groups (conformance/groups/coverage_*.py) judge,
and a one-rule break of each, for the tests of those groups.

    python tests/support/acp_fixtures/coverage_agent.py --store DIR [--break NAME]...

On top of the fixture agent it offers: an agent sign-in method and `logout` (sessions need sign-in:
`session/new` answers -32000 until `authenticate`, and again after `logout`); `session/load`, replaying what
DIR holds of the session (each message under a fresh message id); additional roots and a title, kept in DIR and
shown by `session/list` one session a page; message ids on its chunks (a fresh one per
turn); a thought before the reply to a `think` directive, a plan for a `plan` one; a `model` config option (the fixture's `--models
options-first`); line 1 on its read locations; and, at a
`session/cancel`, a `$/cancel_request` for each of its own requests still open. Each `--break NAME` (`BREAKS`)
breaks exactly one coverage rule. Stdlib only, like the fixture agent.
"""

from __future__ import annotations

import json
import os
import sys
import threading

# As cheap to start as the fixture agent (its module says how): no argparse, uuid or typing at start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import types
    from typing import Any

    from ama_conformance.core.directives import Directive

# Imported from the checkout (tests.support.acp_fixtures), or started by launch.py or as a script, where this
# directory comes first on sys.path (not the tests package, whose __init__ imports pathlib).
if __package__:
    from .fixture_agent import INVALID_PARAMS, Agent, RpcError, Session, Turn, log, prompt_text
    from .fixture_ids import new_uuid4
    from .quick_args import MANY, ONE, quick
else:
    from fixture_agent import INVALID_PARAMS, Agent, RpcError, Session, Turn, log, prompt_text
    from fixture_ids import new_uuid4
    from quick_args import MANY, ONE, quick

BREAKS: dict[str, str] = {
    "stringly-id": "answers a request whose id is a digit-only string under the integer (R11)",
    "zero-line": "puts line 0 on its read locations (R30.1)",
    "error-on-client-error": "ends a turn in a -32603 error when the client fails one of its fs requests (R143)",
    "stray-cancel-request": "at a session/cancel, sends $/cancel_request for an id it never used (R24)",
    "auth-sticks": "authenticate answers {} but session/new still wants sign-in (R49)",
    "logout-noop": "logout answers {} but the connection stays signed in (R51)",
    "shared-history": "a session's load replays every session's history (R53.1)",
    "reused-message-id": "every turn's chunks carry the same messageId (R117)",
    "replay-no-tools": "the load replay leaves out the tool calls, thoughts and plans (R66.1)",
    "replay-dup-message-id": "every message of the load replay carries the same messageId (R68)",
    "partial-config-update": "a config_option_update lists only the option that changed (R128)",
    "sticky-roots": "a load without additionalDirectories brings the stored ones back (R64)",
    "loose-roots-on-load": "session/load takes relative and empty additionalDirectories (R65.1)",
    "reordered-roots": "session/list shows a session's additionalDirectories in reverse order (R84)",
    "empty-last-page": "session/list's last page has a nextCursor that leads to an empty page (R82)",
    "stale-title": "session/list shows no title for a session it titled with session_info_update (R85)",
    "stale-mode-option": "the mode config option stays at the first mode whatever set_mode chose (R98)",
}
TITLE = "Coverage fixture session"
AUTH_REQUIRED = -32000
LOGIN = {"id": "fixture-login", "name": "Fixture sign-in", "description": "Signs the connection in."}
HISTORY = frozenset(
    {"user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"}
)
STRAY_ID = 424242


def roots(value: Any) -> list[str]:
    """`additionalDirectories` checked as ACP asks (absent: none; else absolute, non-empty strings), or -32602."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(d, str) and d and os.path.isabs(d) for d in value):
        raise RpcError(INVALID_PARAMS, "additionalDirectories must be a list of absolute paths")
    return list(value)


class CoverageAgent(Agent):
    def __init__(self, breaks: frozenset[str], store: str) -> None:
        super().__init__(frozenset(), sys.stdout.buffer, "options-first")
        self.cover = breaks
        self.store = store
        self.signed_in = False
        self.replaying = threading.local()
        self.message_ids: dict[str, str] = {}
        self.fs_failed = threading.local()
        self.store_lock = threading.Lock()
        self.handlers.update(authenticate=self.authenticate, logout=self.logout)
        self.handlers["session/load"] = self.session_load
        self.handlers["session/list"] = self.session_list
        self.new_roots: dict[Any, list[str]] = {}  # session/new request id -> its additional roots

    # --- the wire -----------------------------------------------------------------------------------

    def _id(self, rid: Any) -> Any:
        if "stringly-id" in self.cover and isinstance(rid, str) and rid.isdigit():
            return int(rid)
        return rid

    def respond(self, rid: Any, result: dict[str, Any]) -> None:
        super().respond(self._id(rid), result)

    def error(self, rid: Any, code: int, message: str) -> None:
        super().error(self._id(rid), code, message)

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        if update.get("sessionUpdate") == "config_option_update" and "partial-config-update" in self.cover:
            update = {**update, "configOptions": [o for o in update["configOptions"] if o.get("id") == "model"]}
        super().update(session_id, update)
        if update.get("sessionUpdate") in HISTORY and not getattr(self.replaying, "on", False):
            self._store(session_id, update)

    def chunk(self, session_id: str, text: str) -> None:
        content = {"type": "text", "text": text}
        update = {"sessionUpdate": "agent_message_chunk", "content": content}
        self.update(session_id, {**update, "messageId": self.message_ids.get(session_id)})

    def call(self, method: str, params: dict[str, Any], turn: Turn, **kw: Any) -> Any:
        reply = super().call(method, params, turn, **kw)
        if method.startswith("fs/") and reply.error is not None:
            self.fs_failed.on = True
        return reply

    def config_options(self, mode: str, model: str | None = None) -> list[dict[str, Any]]:
        return super().config_options("ask" if "stale-mode-option" in self.cover else mode, model)

    def tool_call(self, session: Session, call_id: str, title: str, kind: str, **extra: Any) -> None:
        if kind == "read" and extra.get("locations"):
            line = 0 if "zero-line" in self.cover else 1
            extra["locations"] = [{**loc, "line": line} for loc in extra["locations"]]
        super().tool_call(session, call_id, title, kind, **extra)

    def read(self, session: Session, turn: Turn, raw_path: str) -> None:
        self.fs_failed.on = False
        super().read(session, turn, raw_path)  # a failed read ends its tool call `failed`, as it should
        if "error-on-client-error" in self.cover and self.fs_failed.on:
            raise RuntimeError("the client failed a file request")

    def act(self, session: Session, turn: Turn, directive: Directive | None) -> None:
        if directive is not None and directive.verb == "think":  # a thought, then the reply, as a model would
            thought = {"type": "text", "text": directive.text or "Thinking it over."}
            mid = self.message_ids.get(session.id)
            self.update(session.id, {"sessionUpdate": "agent_thought_chunk", "content": thought, "messageId": mid})
            self.chunk(session.id, "Conformance reply.")
            return
        if directive is not None and directive.verb == "plan":
            entry = {"content": directive.text or "A step", "priority": "medium", "status": "pending"}
            self.update(session.id, {"sessionUpdate": "plan", "entries": [entry]})
            self.chunk(session.id, "Planned.")
            return
        super().act(session, turn, directive)

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "session/cancel":
            with self.client._lock:
                mine = list(self.client._pending)
            for rid in [STRAY_ID] if "stray-cancel-request" in self.cover else mine:
                self.wire.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": rid}})
        super().on_notification(method, params)

    # --- sign-in ------------------------------------------------------------------------------------

    def initialize(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        result = super().initialize(rid, params)
        caps = result["agentCapabilities"]
        caps["loadSession"] = True
        caps["sessionCapabilities"].update(additionalDirectories={}, list={})
        caps["auth"] = {"logout": {}}
        result["authMethods"] = [LOGIN]
        return result

    def authenticate(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("methodId") != LOGIN["id"]:
            raise RpcError(INVALID_PARAMS, "unknown sign-in method")
        self.signed_in = "auth-sticks" not in self.cover
        return {}

    def logout(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        self.signed_in = "logout-noop" in self.cover and self.signed_in
        return {}

    def session_new(self, rid: Any, params: dict[str, Any]) -> None:
        if not self.signed_in:
            raise RpcError(AUTH_REQUIRED, "Sign in first.")
        self.new_roots[rid] = roots(params.get("additionalDirectories"))
        super().session_new(rid, params)

    def _open_session(self, rid: Any, session: Session, specs: list[Any]) -> None:
        self._meta(session.id, session.cwd, self.new_roots.pop(rid, []))
        super()._open_session(rid, session, specs)

    # --- additional roots ---------------------------------------------------------------------------

    def _meta(self, sid: str, cwd: str, dirs: list[str]) -> None:
        title = None if "stale-title" in self.cover else self.title
        with self.store_lock, open(self._path(sid)[: -len(".jsonl")] + ".meta", "w", encoding="utf-8") as f:
            json.dump({"sessionId": sid, "cwd": cwd, "additionalDirectories": dirs, "title": title}, f)

    def _metas(self) -> list[dict[str, Any]]:
        out = []
        for name in sorted(os.listdir(self.store)):
            if name.endswith(".meta"):
                with open(os.path.join(self.store, name), encoding="utf-8") as f:
                    out.append(json.load(f))
        return out

    def session_list(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        """One session a page (so a client meets cursors), in the store's order."""
        sessions = []
        for meta in self._metas():
            dirs = meta.pop("additionalDirectories")
            if dirs:
                meta["additionalDirectories"] = dirs[::-1] if "reordered-roots" in self.cover else dirs
            sessions.append(meta)
        cursor = params.get("cursor")
        if cursor == "end" and "empty-last-page" in self.cover:
            return {"sessions": []}
        at = int(cursor) if isinstance(cursor, str) and cursor.isdigit() else 0
        if cursor is not None and not (isinstance(cursor, str) and cursor.isdigit() and at < len(sessions)):
            raise RpcError(INVALID_PARAMS, "unknown cursor")
        page: dict[str, Any] = {"sessions": sessions[at : at + 1]}
        if at + 1 < len(sessions):
            page["nextCursor"] = str(at + 1)
        elif "empty-last-page" in self.cover:
            page["nextCursor"] = "end"
        return page

    # --- history ------------------------------------------------------------------------------------

    def session_prompt(self, rid: Any, params: dict[str, Any]) -> None:
        sid = params.get("sessionId")
        if isinstance(sid, str) and sid in self.sessions:
            self.message_ids[sid] = "m-1" if "reused-message-id" in self.cover else f"m-{new_uuid4()}"
            try:
                text = prompt_text(params.get("prompt"))
            except RpcError:
                text = None
            if text is not None:
                self._store(sid, {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}})
        super().session_prompt(rid, params)

    def _path(self, sid: str) -> str:
        return os.path.join(self.store, f"{uuid5_url(sid)}.jsonl")

    def _store(self, sid: str, update: dict[str, Any]) -> None:
        with self.store_lock, open(self._path(sid), "a", encoding="utf-8") as f:
            f.write(json.dumps({"sid": sid, "update": update}) + "\n")

    def _history(self, sid: str) -> list[dict[str, Any]]:
        paths = [self._path(sid)]
        if "shared-history" in self.cover:
            paths += sorted(os.path.join(self.store, n) for n in os.listdir(self.store) if n.endswith(".jsonl"))
        out: list[dict[str, Any]] = []
        for path in dict.fromkeys(paths):
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    out += [json.loads(line)["update"] for line in f if line.strip()]
        return out

    def session_load(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        sid, cwd = params.get("sessionId"), params.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise RpcError(INVALID_PARAMS, "cwd must be an absolute path")
        if not isinstance(sid, str) or not os.path.exists(self._path(sid)):
            raise RpcError(INVALID_PARAMS, "unknown session")
        given = params.get("additionalDirectories")
        if "loose-roots-on-load" in self.cover:
            dirs = [d for d in given if isinstance(d, str)] if isinstance(given, list) else []
        else:
            dirs = roots(given)
        stored: list[str] = next((m["additionalDirectories"] for m in self._metas() if m["sessionId"] == sid), [])
        self._meta(sid, cwd, stored if given is None and "sticky-roots" in self.cover else dirs)
        with self.lock:
            self.sessions[sid] = Session(sid, cwd, model="big")
        self.replaying.on = True
        try:
            n = 0
            for update in self._history(sid):
                kind = update.get("sessionUpdate")
                dropped = ("tool_call", "tool_call_update", "agent_thought_chunk", "plan")
                if kind in dropped and "replay-no-tools" in self.cover:
                    continue
                if kind == "user_message_chunk":
                    n += 1
                if kind in ("user_message_chunk", "agent_message_chunk"):
                    mid = f"r-{n}-{'user' if kind == 'user_message_chunk' else 'agent'}"
                    update = {**update, "messageId": "r-1" if "replay-dup-message-id" in self.cover else mid}
                self.update(sid, update)
        finally:
            self.replaying.on = False
        return {}


def uuid5_url(name: str) -> str:
    """`str(uuid.uuid5(uuid.NAMESPACE_URL, name))`, without importing uuid (which imports platform)."""
    import hashlib

    b = bytearray(hashlib.sha1(NAMESPACE_URL + name.encode("utf-8")).digest()[:16])
    b[6] = b[6] & 0x0F | 0x50
    b[8] = b[8] & 0x3F | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


NAMESPACE_URL = bytes.fromhex("6ba7b8119dad11d180b400c04fd430c8")  # uuid.NAMESPACE_URL.bytes
OPTIONS = {"--break": ("breaks", MANY, None, BREAKS), "--store": ("store", ONE, None, None)}


def parse_args(argv: list[str]) -> types.SimpleNamespace:
    """The options, read the quick way (fixture_agent.py's `quick`) where the line is plain and has --store."""
    import types

    values = quick(argv, OPTIONS, {"breaks": [], "store": None})
    if values is not None and values["store"] is not None:
        return types.SimpleNamespace(**values)
    import argparse

    parser = argparse.ArgumentParser(prog="coverage_agent.py", description=__doc__.splitlines()[0])
    parser.add_argument("--break", dest="breaks", action="append", default=[], choices=sorted(BREAKS))
    parser.add_argument("--store", required=True, help="the directory that keeps sessions for session/load")
    return parser.parse_args(argv, namespace=types.SimpleNamespace())


def main() -> None:
    ns = parse_args(sys.argv[1:])
    os.makedirs(ns.store, exist_ok=True)
    stdout = sys.stdout
    agent = CoverageAgent(frozenset(ns.breaks), ns.store)
    agent.title = TITLE  # a session_info_update as each session opens, which session/list then shows
    sys.stdout = sys.stderr  # a stray print() cannot reach the wire
    agent.serve(sys.stdin.buffer)
    agent.shutdown()
    log(f"coverage agent done ({stdout.name})")
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
