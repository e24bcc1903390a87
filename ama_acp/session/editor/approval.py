"""Whether a tool call may run: the mode's policy (permissions.py), what the person said "always" to, and
`session/request_permission` for the rest.

The request shows the person what they are judging: the whole command, the diff an edit would apply, the
real path behind a symlink outside the project. The answer is decoded where it arrives (session/editor/client.py);
a malformed one is a rejection with its reason. The mode is checked again once the person answers: a switch
to Read only while the dialog was open wins over a later "Allow".
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Protocol

from ama_acp.agent import events as ev
from ama_acp.agent.loop import CANCELLED_FOR_MODEL, CANCELLED_FOR_PERSON, Refusal
from ama_acp.permissions import Approvals, decide, deny_reason, path_problem
from ama_acp.rpc.errors import ClientError
from ama_acp.session.editor import unconfined
from ama_acp.session.editor.client import ClientRequests, EditorClient, MalformedAnswer, PeerEditor, clip
from ama_acp.session.editor.updates import locations
from ama_acp.session.facets import Cancellable, Identified, ToolGuard
from ama_acp.session.rules.book import RuleBook
from ama_acp.tools.base import FileDiff, Location, Tool, ToolError
from ama_acp.tools.common import diff_too_big
from ama_acp.tools.context import ToolContext
from ama_acp.wire import types as w

log = logging.getLogger(__name__)

# After session/cancel the client must answer a pending permission request `cancelled`; this long we wait
# for that answer (so the dialog is closed by the book) before withdrawing the request ourselves.
CANCEL_GRACE = 1.0
PERMISSION_TIMEOUT = float("inf")  # a person decides; there is no deadline on that

REJECTED_FOR_MODEL = "The user rejected this tool call. Do not retry it; ask them what to do instead."
REJECTED_FOR_PERSON = "You rejected this call."
ALWAYS_REJECTED = Refusal(
    "The user rejected this kind of call for this session.",
    "Rejected: you chose to always reject this kind of call in this session.",
)


# A tool call's arguments, as the model wrote them (a JSON object): read here only after a type check.
Args = Mapping[str, object]


class ApprovalSession(Identified, ToolGuard, Cancellable, Protocol):
    """What the approver needs of its session: the mode is read again once the person answers; the tool
    context is where the call's paths resolve, and the workspace an edit's preview reads."""

    @property
    def rt(self) -> ClientRequests:
        """The way to the client (the approver asks it through a `PeerEditor` over it)."""
        ...

    def tool(self, name: str) -> Tool | None: ...

    def cancel(self) -> None: ...


class Approver:
    def __init__(self, session: ApprovalSession) -> None:
        self.s = session
        self.editor: EditorClient = PeerEditor(session.rt.client_request)
        self.memory = Approvals()
        self.rules = RuleBook.empty()  # the session's (session/rules/book.py); a task shares its parent's

    async def approve(self, call: ev.ToolCallRequested, args: Args) -> Refusal | None:
        tool = self.s.tool(call.name)
        kind = tool.kind if tool else "other"
        memory_kind = _memory_kind(call.name, kind, args)
        if (bad := _bad_path(call, args)) is not None:
            return bad
        ruled = self.rules.judge(call.name, args, [loc.path for loc in call.locations], self.s.tool_ctx.resolve)
        if ruled is not None and ruled[0] == "deny":  # in every mode, Full access too
            why = f"A permission rule denies this call: `{ruled[1].shown}` ({ruled[1].origin})."
            return Refusal(why + " Do not retry it; tell the user what you wanted to do.", "Not run: " + why)
        outside = self._outside_paths(call.locations, kind, args)
        refusal = self._by_policy(kind, outside)  # a mode's refusal stays one, whatever a rule allows
        try:
            run_outside = refusal is None and unconfined.wanted(call.name, args, self.s.tool_ctx)
        except ToolError as exc:
            return Refusal(str(exc), f"Not run: {exc}")
        if run_outside:  # the person's full rights: asked in every mode, over any allow rule or "always"
            return await self._ask_unconfined(call, kind, outside, args)
        if refusal is not None or ruled is not None and ruled[0] == "ask":
            return refusal or await self._ask(call, kind, outside, args, memory_kind)
        # An allow rule skips the question, but not for a command run outside the project (its cwd).
        if self._allowed_by_policy(kind, outside) or (ruled is not None and not (kind == "execute" and outside)):
            return None
        remembered = self.memory.remembered(memory_kind, outside)
        if remembered is not None:
            return None if remembered else ALWAYS_REJECTED
        return await self._ask(call, kind, outside, args, memory_kind)

    def _by_policy(self, kind: str, outside: list[str]) -> Refusal | None:
        if decide(self.s.mode, kind, not outside) == "deny":
            reason = deny_reason(self.s.mode, kind)
            return Refusal(reason, reason)
        return None

    def _allowed_by_policy(self, kind: str, outside: list[str]) -> bool:
        return decide(self.s.mode, kind, not outside) == "allow"

    def _outside_paths(self, locs: list[Location], kind: str, args: Args) -> list[str]:
        paths = [loc.path for loc in locs]
        cwd = args.get("cwd")
        if kind == "execute" and isinstance(cwd, str):
            paths.append(cwd)
        out = []
        for p in paths:
            resolved = self.s.tool_ctx.resolve(p)
            if not resolved.inside:
                out.append(resolved.path)
        return out

    async def _ask(
        self, call: ev.ToolCallRequested, kind: str, outside: list[str], args: Args, memory_kind: str
    ) -> Refusal | None:
        where = f" (outside the project: {', '.join(_shown_path(p) for p in outside)})" if outside else ""
        if kind == "execute" and self.s.tool_ctx.unsandboxed:
            where += " (not sandboxed)"  # no Landlock here: nothing confines the command (sandbox/)
        proposal = None if outside else self.rules.proposal(call.name, args)
        covers = _covers(call.title, kind, outside, memory_kind)
        opts = _options(covers, _rule_covers(proposal) if proposal else covers)
        answer = await self._put(call, kind, call.title + where, await self._content(call, kind, args), opts)
        if isinstance(answer, Refusal):
            return answer
        return self._judge(answer, kind, outside, {o.option_id for o in opts}, memory_kind, proposal)

    async def _put(
        self,
        call: ev.ToolCallRequested,
        kind: str,
        title: str,
        content: list[w.ToolCallContent],
        opts: list[w.PermissionOption],
    ) -> w.RequestPermissionResponse | Refusal:
        """The question about `call` put to the person: their answer, or the Refusal that stands for none (the
        turn cancelled while it was open, the client unable to ask)."""
        from ama_acp.mcp.shown import shown_input  # with the secret patterns: off a first text answer's path

        request = w.RequestPermissionRequest(
            session_id=self.s.id,
            tool_call=w.ToolCallFields(
                tool_call_id=call.wire_id,
                title=title,
                kind=kind,
                status="pending",
                content=content or None,
                locations=locations(call.locations),
                raw_input=shown_input(call.name, call.raw_input),
            ),
            options=opts,
        )
        answer = await self._answer(request)
        if answer is None or self.s.cancelled:
            self.s.cancel()
            return Refusal(CANCELLED_FOR_MODEL, CANCELLED_FOR_PERSON)
        return answer

    async def _ask_unconfined(
        self, call: ev.ToolCallRequested, kind: str, outside: list[str], args: Args
    ) -> Refusal | None:
        """A command to run once outside the sandbox (session/editor/unconfined.py): allow once or reject. An
        "always allow" does not cover it; an "always reject" of commands refuses it."""
        if self.memory.remembered(kind, outside) is False:
            return ALWAYS_REJECTED
        where = f" (outside the project: {', '.join(_shown_path(p) for p in outside)})" if outside else ""
        warning = w.Content(content=w.TextContent(text=unconfined.WARNING))
        content = [warning, *await self._content(call, kind, args)]
        answer = await self._put(call, kind, unconfined.title(call.title) + where, content, unconfined.OPTIONS)
        if isinstance(answer, Refusal):
            return answer
        if unconfined.declined(answer):
            return unconfined.DECLINED
        return self._judge(answer, kind, outside, {o.option_id for o in unconfined.OPTIONS}, kind)

    async def ask(self, request: w.RequestPermissionRequest) -> w.RequestPermissionResponse | Refusal | None:
        """A question of the session's own (session/plan_mode.py), asked as a tool call's is: the client's answer
        decoded, a Refusal saying why there is none, or None when the turn's cancel ended the wait."""
        return await self._answer(request)

    async def _answer(self, request: w.RequestPermissionRequest) -> w.RequestPermissionResponse | Refusal | None:
        """The client's answer; one that cannot be had is a rejection with its reason. None when the turn's
        cancel ended the wait."""
        answer: w.RequestPermissionResponse | Refusal | None = None
        # Shielded from the turn's cancel: on session/cancel the wait shrinks to CANCEL_GRACE, so the client's
        # `cancelled` answer closes the dialog instead of a withdrawn request leaving it open.
        with self.s.graceful(PERMISSION_TIMEOUT, CANCEL_GRACE) as scope:
            try:
                answer = await self.editor.request_permission(request)
            except MalformedAnswer as exc:  # logged where it arrived, with the answer
                answer = _malformed(exc.reason)
            except ClientError as exc:
                answer = _failed(exc.message or str(exc))
            except Exception as exc:  # a client that cannot ask counts as a rejection, with the reason
                answer = _failed(str(exc) or type(exc).__name__)
        return None if scope.cancelled_caught else answer

    def _judge(
        self,
        answer: w.RequestPermissionResponse,
        kind: str,
        outside: list[str],
        offered: set[str],
        memory_kind: str,
        proposal: str | None = None,
    ) -> Refusal | None:
        outcome = answer.outcome
        if isinstance(outcome, w.CancelledPermissionOutcome):
            self.s.cancel()  # the client cancelled the turn while asking (R113); the turn scope ends it
            return Refusal(CANCELLED_FOR_MODEL, CANCELLED_FOR_PERSON)
        chosen = outcome.option_id
        if chosen not in offered:
            log.warning("permission answer chose an option never offered: %r", clip(chosen))
            return _malformed(f"it chose {clip(chosen)!r}, which was not one of the options")
        if chosen == "allow_always" and proposal is not None:
            self._write_rule(proposal)
        elif chosen in ("allow_always", "reject_always"):
            self.memory.remember(memory_kind, outside, chosen == "allow_always")
        if chosen not in ("allow_once", "allow_always"):
            return Refusal(REJECTED_FOR_MODEL, REJECTED_FOR_PERSON)
        # The person answered the question asked under the mode of that moment; the current mode decides.
        return self._by_policy(kind, outside)

    def _write_rule(self, rule: str) -> None:
        try:
            self.rules.add("allow", rule)
        except OSError as exc:  # the call still runs: the person allowed it; only the rule is not kept
            log.warning("permission rule %s not written: %s", rule, exc)

    async def _content(self, call: ev.ToolCallRequested, kind: str, args: Args) -> list[w.ToolCallContent]:
        """What the person needs to judge the call: the full command, the diff an edit would apply, an MCP tool's
        arguments."""
        content: list[w.ToolCallContent] = []
        if call.name.startswith("mcp__"):  # its effect is in its arguments: shown without secrets, clipped
            from ama_acp.mcp.shown import shown_arguments

            text = "```json\n" + shown_arguments(args) + "\n```"
            return [w.Content(content=w.TextContent(text=text))]
        command = args.get("command")
        if kind == "execute" and isinstance(command, str):
            cwd = args.get("cwd")
            text = command if not isinstance(cwd, str) else f"{command}\n\n(in {cwd})"
            content.append(w.Content(content=w.TextContent(text=text)))
        try:
            diffs = await self._preview(call.name, args)
        except Exception as exc:  # the tool will report the problem when it runs; ask without a diff
            log.info("no preview for %s: %s", call.name, exc)
            diffs = None
        for d in diffs or []:
            if diff_too_big(d.old_text, d.new_text):
                continue  # the same limit as a finished call's diff
            content.append(w.Diff(path=d.path, old_text=d.old_text, new_text=d.new_text))
        return content

    async def _preview(self, name: str, args: Args) -> list[FileDiff] | None:
        return await _preview_file_change(name, args, self.s.tool_ctx)


async def _preview_file_change(name: str, args: Args, ctx: ToolContext) -> list[FileDiff] | None:
    """edit_file and write_file computed in memory the way they will run (until the tools offer `preview`).
    None when there is nothing to show: bad arguments, a missing or binary file (the tool will say so)."""
    from ama_acp.tools.common import validate
    from ama_acp.tools.edit import EditArgs, EditTool, apply_edits
    from ama_acp.tools.workspace import BinaryFileError

    path_arg = args.get("path")
    if name not in ("edit_file", "write_file") or not isinstance(path_arg, str):
        return None
    path = ctx.resolve(path_arg).path
    old: str | None
    try:
        old = await ctx.workspace.read_text(path)
    except FileNotFoundError:
        old = None
    except (BinaryFileError, IsADirectoryError):
        return None
    if name == "write_file":
        content = args.get("content")
        return [FileDiff(path, old, content)] if isinstance(content, str) else None
    if old is None:
        return None
    try:
        # The arguments checked as the tool will check them: the preview shows the edit that will run (a
        # `replace_all` of "false" is false here too, not a truthy string).
        checked = validate(EditTool.parameters, args, EditArgs)
        new, _ = apply_edits(old, checked["edits"], path)
    except ToolError:
        return None
    return [FileDiff(path, old, new)]


# What an "always" answer covers, named on the option (permissions.Approvals keeps it): every later call of the
# tool's kind in the project (or in the outside directory asked about), or, for an MCP tool, that one tool.
_KIND_NOUNS = {
    "execute": "commands",
    "edit": "file edits",
    "delete": "deletions",
    "move": "moves and renames",
    "read": "file reads",
    "search": "searches",
    "fetch": "fetches",
}


def _bad_path(call: ev.ToolCallRequested, args: Args) -> Refusal | None:
    """A refusal when a path of the call (a location, a command's cwd) is one no file name can hold: the OS calls
    behind the policy would refuse it anyway."""
    cwd = args.get("cwd")
    for path in [loc.path for loc in call.locations] + ([cwd] if isinstance(cwd, str) else []):
        problem = path_problem(path)
        if problem is not None:
            return Refusal(
                f"A path in this call {problem}, which no file name can hold. Fix the path.",
                f"Not run: a path in this call {problem}.",
            )
    return None


def _memory_kind(name: str, kind: str, args: Args) -> str:
    """What an "always" answer is remembered under: the tool's kind, except that for an MCP tool it is that one
    tool of that server, and for a fetch the URL's origin, its host and port (tools/web/origin.py) — one click
    must not open every address on the web to the model (a URL can carry out whatever it has read)."""
    if name.startswith("mcp__"):
        return f"{kind}:{name}"
    if kind == "fetch":
        from ama_acp.tools.web.origin import url_origin  # with the first fetch: ipaddress and socket (start-up time)

        url = args.get("url")
        origin = url_origin(url) if isinstance(url, str) else None
        return f"fetch:{origin.shown if origin else ''}"  # a malformed URL (refused by the tool too): no origin
    return kind


def _covers(title: str, kind: str, outside: list[str], memory_kind: str) -> str:
    """What an "always" answer covers, as its option names it: a fetch's site, else the kind's scope (a tool
    remembered on its own, an MCP tool's, by the call's title)."""
    if memory_kind.startswith("fetch:"):
        return f"fetches from {_short(memory_kind.removeprefix('fetch:') or 'this address')} in this session"
    return always_scope(kind, outside, title if memory_kind != kind else None)


def _options(covers: str, allow_covers: str) -> list[w.PermissionOption]:
    return [
        w.PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
        w.PermissionOption(option_id="allow_always", name=f"Always allow {allow_covers}", kind="allow_always"),
        w.PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
        w.PermissionOption(option_id="reject_always", name=f"Always reject {covers}", kind="reject_always"),
    ]


def always_scope(kind: str, outside: list[str], mcp_title: str | None = None) -> str:
    """The words after "Always allow" / "Always reject": what the answer covers for the rest of the session."""
    if mcp_title is not None:
        return f"{_short(mcp_title)} in this session"
    noun = _KIND_NOUNS.get(kind, f"{kind} calls")
    if not outside:
        return f"{noun} in this project"
    return f"{noun} in {_short(Approvals.scope(outside))}"


def _rule_covers(rule: str) -> str:
    """`run_command(npm test *)` as an option names it: "`npm test …` in this project"."""
    pattern = rule.removeprefix("run_command(").removesuffix(")")
    shown = pattern[:-2] + " …" if pattern.endswith(" *") else pattern
    return f"`{_short(shown, 60)}` in this project"


def _short(text: str, limit: int = 120) -> str:
    """An option's name stays a line: a long directory or tool title keeps its start and end, and says how much
    of its middle is left out."""
    if len(text) <= limit:
        return text
    side = max(1, (limit - len(f"…[+{len(text):,} chars]…")) // 2)
    return f"{text[:side]}…[+{len(text) - 2 * side:,} chars]…{text[-side:]}"


def _failed(reason: str) -> Refusal:
    log.warning("permission request failed: %s", reason)
    return Refusal(
        f"Permission could not be asked ({reason}); the call did not run.",
        f"Not run: the permission request failed ({reason}).",
    )


def _malformed(reason: str) -> Refusal:
    return Refusal(
        f"The editor's answer to the permission request was not understood ({reason}); the call did not run. "
        "Ask the user whether to try again.",
        f"Not run: the editor's answer to the permission request was not understood ({reason}).",
    )


def _shown_path(path: str) -> str:
    real = os.path.realpath(path)
    return path if real == path else f"{path} → {real}"
