"""Whether a tool call may run: the mode's policy (permissions.py), what the person said "always" to, and
`session/request_permission` for the rest."""

from __future__ import annotations

import logging
from typing import Any

import anyio

from ama_acp.agent import events as ev
from ama_acp.permissions import Approvals, decide, deny_reason
from ama_acp.tools.base import Location
from ama_acp.wire import types as w

log = logging.getLogger(__name__)


class Approver:
    def __init__(self, session: Any) -> None:
        self.s = session
        self.memory = Approvals()

    async def approve(self, call: ev.ToolCallRequested, args: dict[str, Any]) -> str | None:
        tool = self.s.rt.tool(call.name)
        kind = tool.kind if tool else "other"
        outside = self._outside_paths(call.locations, kind, args)
        decision = decide(self.s.mode, kind, not outside)
        if decision == "allow":
            return None
        if decision == "deny":
            return deny_reason(self.s.mode, kind)
        remembered = self.memory.remembered(kind, outside)
        if remembered is not None:
            return None if remembered else "The user rejected this kind of call for this session."
        return await self._ask(call, kind, outside)

    def _outside_paths(self, locs: list[Location], kind: str, args: dict[str, Any]) -> list[str]:
        paths = [loc.path for loc in locs]
        if kind == "execute" and "cwd" in args and isinstance(args["cwd"], str):
            paths.append(args["cwd"])
        out = []
        for p in paths:
            resolved = self.s.tool_ctx.resolve(p)
            if not resolved.inside:
                out.append(resolved.path)
        return out

    async def _ask(self, call: ev.ToolCallRequested, kind: str, outside: list[str]) -> str | None:
        where = f" (outside the project: {', '.join(outside)})" if outside else ""
        opts = [
            w.PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
            w.PermissionOption(
                option_id="allow_always", name="Always allow" + ("" if not outside else " here"), kind="allow_always"
            ),
            w.PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
            w.PermissionOption(option_id="reject_always", name="Always reject", kind="reject_always"),
        ]
        request = w.RequestPermissionRequest(
            session_id=self.s.id,
            tool_call=w.ToolCallFields(
                tool_call_id=call.wire_id,
                title=call.title + where,
                kind=kind,
                status="pending",
                locations=[w.ToolCallLocation(path=loc.path, line=loc.line) for loc in call.locations],
                raw_input=call.raw_input,
            ),
            options=opts,
        )
        try:
            answer = await self.s.rt.client_request("session/request_permission", request)
        except Exception as exc:  # a client that cannot ask counts as a rejection, with the reason
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                raise
            log.warning("permission request failed: %s", exc)
            return f"Permission could not be asked ({exc}); the call did not run."
        outcome = (answer or {}).get("outcome") or {}
        if outcome.get("outcome") == "cancelled":
            self.s.cancel()  # the client cancelled the turn while asking (R113)
            raise anyio.get_cancelled_exc_class()()
        chosen = outcome.get("optionId")
        if chosen in ("allow_always", "reject_always"):
            self.memory.remember(kind, outside, chosen == "allow_always")
        if chosen in ("allow_once", "allow_always"):
            return None
        return "The user rejected this tool call. Do not retry it; ask them what to do instead."
