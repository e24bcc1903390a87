"""Checks over a whole transcript: every line the agent wrote, read in order against what the client sent.

These run after every group, on that group's transcript, so a rule is checked wherever the agent had the chance
to break it: the framing and schema of every message (R1, R3, R4, R6), the JSON-RPC pairing (R11, R12, R13, R18),
no invented root fields (R26), absolute paths (R30), the ordering of updates around responses (R105, R115),
calls the client never offered (R131, R132, R138), terminals left unreleased (R133, R134), and how the process
ended (R7). A finding names the message it is about.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ama_acp.client.connection import TranscriptEntry, Violation
from ama_conformance.core.agent import TURN_KINDS
from ama_conformance.core.outcome import Checks
from ama_conformance.core.values import arr, obj
from ama_conformance.schema.published import published_in
from ama_conformance.schema.shapes import unknown_fields
from ama_conformance.schema.validate import WireValidator


def outlived_stdin(ended_by: str | None, note: str = "") -> str:
    """R7's failure: how the agent was ended after it outlived its stdin, and how the grace was cut, if it was."""
    return f"still running when the exit grace ran out after stdin closed: {ended_by}{note}"


TRANSCRIPT_IDS = (
    "R1",
    "R3",
    "R4",
    "R5",
    "R6",
    "R7",
    "R11",
    "R12",
    "R13",
    "R14",
    "R18",
    "R26",
    "R26.1",
    "R30",
    "R96",
    "R105",
    "R115",
    "R116",
    "R120",
    "R122",
    "R123",
    "R131",
    "R132",
    "R133",
    "R134",
    "R136",
    "R138",
    "H1",
)
_FS = ("fs/read_text_file", "fs/write_text_file")
_OPTIONAL_KINDS = {"notice": "notices", "compaction_update": "compaction", "compaction_summary_chunk": "compaction"}
_SHOWN = 300


def update_kinds(schema: Mapping[str, Any]) -> frozenset[str]:
    """The `sessionUpdate` tags a schema's SessionUpdate union defines."""
    found = set()
    for branch in obj(obj(schema.get("$defs")).get("SessionUpdate")).get("oneOf") or ():
        tag = obj(obj(obj(branch).get("properties")).get("sessionUpdate")).get("const")
        if isinstance(tag, str):
            found.add(tag)
    return frozenset(found)


def _defines(validator: WireValidator, method: str, *, result: bool) -> bool:
    """Whether the schema defines `method` for the agent's side: as a result it returns, or as a request or
    notification it sends."""
    t = validator.tables
    return method in t.agent_results if result else (method in t.agent_requests or method in t.agent_notifications)


def _key(request_id: Any) -> str:
    return json.dumps(request_id, sort_keys=True)


def _short(raw: str) -> str:
    return raw if len(raw) <= _SHOWN else raw[:_SHOWN] + "…"


def _relative(path: Any) -> bool:
    """Whether `path` is a path that R30 refuses: a string, not absolute."""
    return isinstance(path, str) and not path.startswith("/")


@dataclass
class ClientView:
    """What the client of this group advertised."""

    fs: bool
    terminal: bool
    session_caps: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class _Turn:
    tools: dict[str, str] = field(default_factory=dict)  # toolCallId -> last status
    cancelled: bool = False

    def track(self, kind: str, tid: str, status: Any) -> None:
        """The last status of a tool call; one announced without a status is pending."""
        if kind == "tool_call":
            self.tools[tid] = status if isinstance(status, str) else "pending"
        elif isinstance(status, str):
            self.tools[tid] = status


class TranscriptAnalyzer:
    def __init__(self, stable: WireValidator, unstable: WireValidator, client: ClientView, checks: Checks) -> None:
        self.stable, self.unstable, self.client, self.checks = stable, unstable, client, checks
        self._grace_note = ""
        self.problems: dict[str, list[str]] = {}
        self.notes: dict[str, list[str]] = {}
        self.our_pending: dict[str, tuple[str, Any]] = {}  # id -> (method, params)
        self.answered: set[str] = set()
        self.agent_pending: dict[str, str] = {}
        self.null_errors_expected = 0
        self.notified = False
        self.known: set[str] = set()
        self.replaying: set[str] = set()  # sessions with a load/resume pending
        self.prompting: dict[str, int] = {}
        self.ended: set[str] = set()  # sessions whose last turn has been answered
        self.turns: dict[str, _Turn] = {}
        self.announced: dict[str, set[str]] = {}
        self.terminals: dict[str, str] = {}  # terminalId -> sessionId
        self.released: set[str] = set()
        self.embedded: set[str] = set()
        self.pending_create: dict[str, str] = {}  # agent request id -> sessionId of terminal/create
        self.permissions = 0
        self.lines_in = 0  # lines the agent wrote (blank ones aside)
        self.prompts_answered = 0
        self.stable_kinds = update_kinds(stable.schema)
        self.unstable_kinds = update_kinds(unstable.schema)
        # Sub-agents (unstable `clientCapabilities.subagents`): a child announced by a `subagent_update` on a known
        # session is known too. An update for an id announced only later is the subagents group's (R115.1) to
        # judge, so R115 waits for the end of the transcript before blaming an unknown id on a client that opted in.
        self.subagents = False
        self.children: set[str] = set()
        self.unannounced: list[tuple[str, str]] = []  # (sessionId, kind) of updates for ids unknown when they came

    def problem(self, rid: str, text: str) -> None:
        self.problems.setdefault(rid, []).append(text)

    # --- client -> agent ---------------------------------------------------------------------------------

    def _out(self, raw: str) -> None:
        try:
            msg = json.loads(raw)
        except ValueError:
            self.null_errors_expected += 1
            return
        if isinstance(msg, dict) and isinstance(msg.get("method"), str):
            if "id" in msg:
                self._our_request(msg)
            else:
                self._our_notification(msg)
        elif isinstance(msg, dict) and "id" in msg and ("result" in msg or "error" in msg):
            self._our_response(msg)
        else:
            self._our_invalid(msg)

    def _our_invalid(self, msg: Any) -> None:
        self.null_errors_expected += 1  # a deliberately invalid message: a null-id error may answer it
        if isinstance(msg, dict) and "method" in msg and "id" in msg:
            self.our_pending[_key(msg["id"])] = ("", {})  # an invalid request: it may be answered by its id

    def _our_response(self, msg: dict[str, Any]) -> None:
        """Our answer to an agent request: a terminal it created is known by its id from then on."""
        rid = _key(msg.get("id"))
        sent_for = self.agent_pending.pop(rid, None)
        result = msg.get("result")
        if sent_for == "terminal/create" and isinstance(result, dict) and isinstance(result.get("terminalId"), str):
            self.terminals[result["terminalId"]] = self.pending_create.pop(rid, "")

    def _our_notification(self, msg: dict[str, Any]) -> None:
        self.notified = True
        params = obj(msg.get("params"))
        if msg["method"] == "session/cancel" and isinstance(params.get("sessionId"), str):
            turn = self.turns.get(params["sessionId"])
            if turn is not None:
                turn.cancelled = True

    def _our_request(self, msg: dict[str, Any]) -> None:
        method: str = msg["method"]
        params = obj(msg.get("params"))
        if "jsonrpc" not in msg:
            self.null_errors_expected += 1
        self.our_pending[_key(msg["id"])] = (method, params)
        if method == "initialize":
            self.subagents = isinstance(obj(params.get("clientCapabilities")).get("subagents"), dict)
        sid = params.get("sessionId")
        if not isinstance(sid, str):
            return
        if method == "session/prompt":
            self.prompting[sid] = self.prompting.get(sid, 0) + 1
            self.ended.discard(sid)
            self.turns[sid] = _Turn()
        elif method in ("session/load", "session/resume"):
            self.known.add(sid)
            self.replaying.add(sid)
            self.ended.discard(sid)

    # --- agent -> client ---------------------------------------------------------------------------------

    def _in(self, raw: str) -> None:
        if not raw.strip():
            return
        self.lines_in += 1
        try:
            msg = self.stable.parse_line(raw)
        except AssertionError as exc:
            text = str(exc).replace("ACP violation: ", "")
            self.problem("R3" if "raw newline" in text else "R4", text)
            return
        if msg.get("jsonrpc") != "2.0":
            self.problem("R6", f'no "jsonrpc": "2.0": {_short(raw)}')
            return
        if "method" in msg:
            if "id" in msg:
                self._agent_request(msg, raw)
            else:
                self._agent_notification(msg, raw)
        else:
            self._response(msg, raw)

    def _validate(self, msg: dict[str, Any], methods: dict[Any, str], method: str, *, result: bool) -> None:
        known_stable = _defines(self.stable, method, result=result)
        validator = self.stable
        kind = obj(obj(msg.get("params")).get("update")).get("sessionUpdate")
        if method == "session/update" and isinstance(kind, str) and kind not in self.stable_kinds:
            if kind in self.unstable_kinds:
                validator = self.unstable  # an unstable-only update kind: R116 reports it, R4 checks its shape
        elif not known_stable and not method.startswith("_"):
            if _defines(self.unstable, method, result=result):
                validator = self.unstable
                self.notes.setdefault("R4", []).append(f"{method} exists only in the unstable schema: checked there")
        try:
            validator.validate_outgoing(msg, methods)
        except AssertionError as exc:
            self.problem("R4", str(exc).replace("ACP violation: ", ""))

    def _root_fields(self, definition: str | None, instance: Any, where: str) -> None:
        if definition is None:
            return
        unknown, unstable_only = unknown_fields(self.stable.schema, self.unstable.schema, definition, instance)
        for name in [k for k in unknown if published_in(definition, k)]:
            self.problem("R26.1", f"{where} carries {name}, defined at its root by {published_in(definition, name)}")
        unknown = [k for k in unknown if not published_in(definition, k)]
        if unknown:
            self.problem("R26", f"{where} has fields no ACP schema defines at its root: {', '.join(unknown)}")
        if unstable_only:
            self.notes.setdefault("R26", []).append(
                f"{where} carries {', '.join(unstable_only)}, defined only by the unstable schema"
            )

    def _response(self, msg: dict[str, Any], raw: str) -> None:
        rid = msg.get("id")
        key = _key(rid)
        self._response_envelope(msg, raw)
        if key in self.our_pending:
            self._answer(rid, key, msg)
        elif key in self.answered:
            self.problem("R12", f"a second response to request id {rid!r}: {_short(raw)}")
        elif rid is None and "error" in msg and self.null_errors_expected > 0:
            self.null_errors_expected -= 1
            self._validate(msg, {}, "", result=True)
        elif self.notified:
            self.problem("R13", f"a response the client never asked for (after its notifications): {_short(raw)}")
        else:
            self.problem("R11", f"a response to id {rid!r}, which the client never used: {_short(raw)}")

    def _response_envelope(self, msg: dict[str, Any], raw: str) -> None:
        """R12 and R14, whatever the response answers: one outcome, and an error message of one short sentence."""
        if "result" in msg and "error" in msg:
            self.problem("R12", f"a response with both result and error: {_short(raw)}")
        message = obj(msg.get("error")).get("message")
        if isinstance(message, str) and ("\n" in message or len(message) > 200):
            self.problem("R14", f"error message is not one short sentence: {message[:120]!r}")

    def _answer(self, rid: Any, key: str, msg: dict[str, Any]) -> None:
        """The agent's response to a request of ours."""
        method, params = self.our_pending.pop(key)
        self.answered.add(key)
        if not method:
            return  # the answer to a deliberately invalid request: its code is R17.1's business
        if not isinstance(rid, str | int | None):
            return  # an id of another JSON type can only be the agent's (R11 is judged by the key match)
        self._validate(msg, {rid: method}, method, result=True)
        if "result" in msg and not method.startswith("_"):
            md = self.stable.tables.agent_results.get(method)
            self._root_fields(md.definition if md else None, msg["result"], f"the {method} result")
            self._configs(msg["result"], f"the {method} result")
        self._after_response(method, params, msg.get("result"))

    def _after_response(self, method: str, params: dict[str, Any], result: Any) -> None:
        sid = params.get("sessionId")
        if method == "session/new" and isinstance(result, dict) and isinstance(result.get("sessionId"), str):
            self.known.add(result["sessionId"])
        elif method in ("session/load", "session/resume") and isinstance(sid, str):
            self.replaying.discard(sid)
            self.ended.add(sid)  # no turn is running: nothing of a turn may follow until the next prompt
        elif method == "session/prompt" and isinstance(sid, str):
            self._prompt_answered(sid, result)

    def _prompt_answered(self, sid: str, result: Any) -> None:
        """A turn ends when the last prompt running in its session is answered: R123 on the tool calls it left."""
        self.prompts_answered += 1
        self.prompting[sid] = max(0, self.prompting.get(sid, 0) - 1)
        if self.prompting[sid] != 0:
            return
        self.ended.add(sid)
        turn = self.turns.get(sid)
        stop = result.get("stopReason") if isinstance(result, dict) else None
        if turn is None or stop == "cancelled" or turn.cancelled:
            return
        open_calls = [t for t, s in turn.tools.items() if s in ("pending", "in_progress")]
        if open_calls:
            self.problem("R123", f"the turn ended with tool calls still {turn.tools}: {open_calls}")

    def _agent_request(self, msg: dict[str, Any], raw: str) -> None:
        method = msg["method"]
        key = _key(msg["id"])
        if key in self.agent_pending:
            self.problem(
                "R18", f"request id {msg['id']!r} reused while {self.agent_pending[key]} with it awaits an answer"
            )
        self.agent_pending[key] = method
        self._validate(msg, {}, method, result=False)
        params = obj(msg.get("params"))
        md = self.stable.tables.agent_requests.get(method)
        self._root_fields(md.definition if md else None, params, f"the {method} params")
        self._offered(method, raw)
        self._absolute_paths(method, params)
        if method == "terminal/create":
            self.pending_create[key] = str(params.get("sessionId", ""))
        elif method == "terminal/release":
            self._terminal_released(params.get("terminalId"))
        elif method == "session/request_permission":
            self._permission(params.get("options"))

    def _offered(self, method: str, raw: str) -> None:
        """R131, R132, R138: calls for what the client never offered."""
        if method in _FS and not self.client.fs:
            self.problem("R131", f"{method} called although the client did not offer it: {_short(raw)}")
        if method.startswith("terminal/") and not self.client.terminal:
            self.problem("R132", f"{method} called although the client did not offer terminals: {_short(raw)}")
        if method == "elicitation/create":
            self.problem("R138", f"elicitation/create although the client advertised no elicitation: {_short(raw)}")

    def _absolute_paths(self, method: str, params: dict[str, Any]) -> None:
        if method not in _FS and method != "terminal/create":
            return
        for name in ("path", "cwd"):
            value = params.get(name)
            if _relative(value):
                self.problem("R30", f"{method} {name} is not absolute: {value!r}")

    def _terminal_released(self, tid: Any) -> None:
        if not isinstance(tid, str):
            return
        self.released.add(tid)
        if tid not in self.embedded:
            self.problem("R134", f"terminal {tid!r} released without having been shown in a tool call")

    def _permission(self, options: Any) -> None:
        self.permissions += 1
        ids = [o.get("optionId") for o in arr(options) if isinstance(o, dict)]
        if len(ids) != len(set(ids)):
            self.problem("R136", f"permission option ids repeat: {ids}")

    def _agent_notification(self, msg: dict[str, Any], raw: str) -> None:
        method = msg["method"]
        self._validate(msg, {}, method, result=False)
        params = obj(msg.get("params"))
        md = self.stable.tables.agent_notifications.get(method)
        self._root_fields(md.definition if md else None, params, f"the {method} params")
        sid = params.get("sessionId")
        update = params.get("update")
        if method == "session/update" and isinstance(sid, str) and isinstance(update, dict):
            self._session_update(sid, update, raw)

    def _session_update(self, sid: str, update: dict[str, Any], raw: str) -> None:
        kind = update.get("sessionUpdate")
        self._session_named(sid, kind, update.get("sessionId"))
        self._root_fields("SessionUpdate", update, f"the {kind} update")
        self._kind_offered(kind)
        if kind in TURN_KINDS and sid in self.ended and sid not in self.replaying:
            self.problem("R105", f"a {kind} for session {sid!r} after its turn was answered: {_short(raw)}")
        self._configs(update, f"the {kind} update")
        if kind in ("tool_call", "tool_call_update"):
            self._tool(sid, kind, update)

    def _session_named(self, sid: str, kind: Any, child: Any) -> None:
        """R115: an update names a session some response named, or (with sub-agents) a child announced in one."""
        if kind == "subagent_update" and self.subagents and isinstance(child, str) and sid in self.known:
            self.known.add(child)
            self.children.add(child)
        if sid in self.known:
            return
        if self.subagents:
            self.unannounced.append((sid, str(kind)))
        else:
            self.problem("R115", f"a {kind} update for session {sid!r}, which no response has named yet")

    def _kind_offered(self, kind: Any) -> None:
        """R116: an update kind the client opted in to, or one the stable schema defines."""
        needed = _OPTIONAL_KINDS.get(str(kind))
        if needed is not None and self.client.session_caps.get(needed) is None:
            self.problem("R116", f"a {kind} update although the client did not advertise session.{needed}")
        elif kind == "subagent_update" and self.subagents:
            pass  # the client opted in to it (R116.1 is the subagents group's)
        elif isinstance(kind, str) and kind not in self.stable_kinds and kind in self.unstable_kinds:
            self.problem("R116", f"a {kind} update, a kind only the unstable schema defines")

    def _tool(self, sid: str, kind: str, update: dict[str, Any]) -> None:
        tid = update.get("toolCallId")
        if not isinstance(tid, str):
            return
        replay = sid in self.replaying
        self._tool_announced(sid, kind, tid, replay)
        turn = self.turns.get(sid)
        if turn is not None and not replay:
            turn.track(kind, tid, update.get("status"))
        self._tool_shown(tid, update)

    def _tool_announced(self, sid: str, kind: str, tid: str, replay: bool) -> None:
        """R120 and R122: a tool call is announced once, and updated only once announced (a replay repeats)."""
        seen = self.announced.setdefault(sid, set())
        if kind == "tool_call":
            if tid in seen and not replay:
                self.problem("R120", f"tool call id {tid!r} announced twice in session {sid!r}")
            seen.add(tid)
        elif tid not in seen and not replay:
            self.problem("R122", f"tool_call_update for {tid!r}, never announced in session {sid!r}")

    def _tool_shown(self, tid: str, update: dict[str, Any]) -> None:
        """What a tool call shows: R30 on its locations and diffs, and the terminals it embeds (for R134)."""
        for loc in update.get("locations") or ():
            if isinstance(loc, dict) and _relative(loc.get("path")):
                self.problem("R30", f"tool call {tid!r} location is not absolute: {loc['path']!r}")
        for item in update.get("content") or ():
            if isinstance(item, dict):
                self._tool_content(tid, item)

    def _tool_content(self, tid: str, item: dict[str, Any]) -> None:
        if item.get("type") == "terminal" and isinstance(item.get("terminalId"), str):
            self.embedded.add(item["terminalId"])
        if item.get("type") == "diff" and _relative(item.get("path")):
            self.problem("R30", f"tool call {tid!r} diff path is not absolute: {item['path']!r}")

    def _configs(self, holder: Any, where: str) -> None:
        if not isinstance(holder, dict) or not isinstance(holder.get("configOptions"), list):
            return
        opted = self.client.session_caps.get("configOptions")
        if isinstance(opted, dict) and opted.get("boolean") is not None:
            return  # the client advertised boolean options (this suite never does; kept general)
        booleans = [o.get("id") for o in holder["configOptions"] if isinstance(o, dict) and o.get("type") == "boolean"]
        if booleans:
            self.problem("R96", f"{where} has boolean options {booleans} although the client did not advertise them")

    # --- the whole ---------------------------------------------------------------------------------------

    def feed(self, entry: TranscriptEntry) -> None:
        """Take in one line of the transcript, in order (`run` does this for each)."""
        try:
            if entry.direction == "out":
                self._out(entry.raw)
            else:
                self._in(entry.raw)
        except (RecursionError, TypeError, AttributeError, ValueError, KeyError) as exc:
            # A shape no check expected (an unhashable tag, a list where an object belongs, nesting past what
            # Python can walk): that message is not a valid ACP message, whatever else it is.
            if entry.direction == "in":
                self.problem(
                    "R4", f"a message the suite could not read as ACP ({type(exc).__name__}): {_short(entry.raw)}"
                )

    def run(
        self,
        transcript: list[TranscriptEntry],
        violations: list[Violation],
        ended_by: str | None,
        stderr: str,
        *,
        grace_note: str = "",
    ) -> None:
        """`grace_note`: how the exit grace was cut short, if it was (said with R7's failure)."""
        self._grace_note = grace_note
        for entry in transcript:
            self.feed(entry)
        for v in violations:
            self._violation(v)
        unreleased = sorted(set(self.terminals) - self.released)
        if unreleased:
            self.problem("R133", f"terminals never released: {unreleased}")
        for sid, kind in self.unannounced:
            if sid not in self.children:  # never announced at all: no sub-agent reading excuses it
                self.problem(
                    "R115",
                    f"a {kind} update for session {sid!r}, which neither a response nor a child announcement named",
                )
        self._report(ended_by, stderr)

    def _violation(self, v: Violation) -> None:
        """What the connection saw below the messages: bytes that are not UTF-8, a cut line, a line too long, a
        flood of lines without a message, and an access outside the run's directories."""
        if v.kind == "invalid_utf8":
            self.problem("R1", f"a stdout line is not UTF-8: {_short(v.raw or '')}")
        elif v.kind == "unterminated_line":
            self.problem("R3", "the last stdout line ends without a newline")
        elif v.kind in ("line_too_long", "stdout_flood"):
            self.problem("R4", v.detail)
        elif v.kind == "outside_run":
            self.problem("H1", v.detail)

    def _vacuous(self, rid: str) -> str | None:
        """Why `rid` had nothing to judge in this transcript (then it is NOT_TESTED here, never passed), or None."""
        if rid in ("R1", "R3", "R4", "R6") and not self.lines_in:
            return "the agent wrote nothing on stdout"
        if rid in ("R11", "R12") and not self.answered:
            return "the agent answered no request"
        if rid == "R13" and not self.notified:
            return "the client sent this agent no notification"
        if rid == "R105" and not self.prompts_answered:
            return "no prompt turn was answered"
        return None

    def _report(self, ended_by: str | None, stderr: str) -> None:
        c = self.checks
        for rid in TRANSCRIPT_IDS:
            if rid in self.problems:
                found = list(dict.fromkeys(self.problems[rid]))  # each distinct problem once
                more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
                c.failed(rid, "; ".join(found[:3]) + more)
            elif rid in ("R131", "R132"):
                pass  # a pass needs a tool to have run without the capability: the tools-unoffered group decides
            elif (why := self._vacuous(rid)) is not None:
                c.untested(rid, why)
            else:
                self._clean(rid, ended_by, stderr)

    def _clean(self, rid: str, ended_by: str | None, stderr: str) -> None:
        """`rid` found nothing wrong: a pass, where the transcript gave it something to judge."""
        c = self.checks
        if rid == "R7":
            if ended_by == "eof":
                c.passed(rid, "exited on its own after stdin closed")
            elif ended_by in ("terminated", "killed"):
                c.failed(rid, outlived_stdin(ended_by, self._grace_note))
        elif rid == "R5":
            c.passed(rid, f"{len(stderr.encode())} bytes on stderr (kept in the JSON report)")
        elif rid in ("R133", "R134"):
            if self.terminals:
                c.passed(rid, f"{len(self.terminals)} terminal(s) created, all released")
        elif rid == "R136":
            if self.permissions:
                c.passed(rid, f"{self.permissions} permission request(s), option ids unique")
        else:
            note = "; ".join(list(dict.fromkeys(self.notes.get(rid, [])))[:3])  # each distinct note once
            c.passed(rid, note)
