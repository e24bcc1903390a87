"""Tool calls as an editor shows them: one line a call with its chain of statuses (rewritten in place on a
terminal), the diffs and texts it carries (each shown once), and the output of a client terminal it embeds,
shown when the call ends (only then is it complete).

Each update is read as a lenient `agent_types.ToolCall` after the renderer made it terminal-safe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ama_acp.client.display import agent_types as agent
from ama_acp.client.display.agent_types import UNSET, lenient
from ama_acp.client.display.ansi import BOLD, CYAN, DIM, GREEN, RED, YELLOW
from ama_acp.client.display.content import block_text, clip_lines, compact_diff, objects
from ama_acp.rpc.dispatch import JSONObject
from ama_acp.textsafe import visible

_STATUS_COLOUR = {"pending": DIM, "in_progress": YELLOW, "completed": GREEN, "failed": RED}


class Screen(Protocol):
    """Where the tool calls are shown (the `Renderer`)."""

    colour: bool
    terminal_output: Callable[[str], str | None] | None

    def line(self, text: str = "", key: object = None) -> None: ...

    def style(self, code: str, text: str) -> str: ...

    def last_line_is(self, key: object) -> bool: ...

    def rewrite_last_line(self) -> None: ...

    def shorten(self, path: str) -> str: ...


class _ToolState:
    def __init__(self, tool_call_id: str) -> None:
        self.id = tool_call_id
        self.title = tool_call_id
        self.kind = "other"
        self.statuses: list[str] = []
        self.shown: set[str] = set()  # content already printed (diffs and texts are not repeated)
        self.terminals: list[str] = []  # client terminals embedded in the call: shown when it ends


class ToolCalls:
    def __init__(self, screen: Screen) -> None:
        self._screen = screen
        self._calls: dict[tuple[str, str], _ToolState] = {}

    def title(self, session_id: str, tool_call_id: str) -> str | None:
        """The title a call was announced with (for a permission request that names only its id)."""
        state = self._calls.get((session_id, tool_call_id))
        return state.title if state else None

    def started(self, sid: str, update: JSONObject) -> None:
        """tool_call: a new call, or one announced again (its members replace those known)."""
        call = lenient(agent.ToolCall, update)
        state = self._state(sid, call)
        state.title = _one_line(str(call.title or state.title))
        state.kind = str(call.kind or state.kind)
        self._show(sid, state, call, self._moved(state, str(call.status or "pending")))

    def updated(self, sid: str, update: JSONObject) -> None:
        """tool_call_update: only the members it carries change."""
        call = lenient(agent.ToolCall, update)
        state = self._state(sid, call)
        if call.title:
            state.title = _one_line(str(call.title))
        if call.kind:
            state.kind = str(call.kind)
        self._show(sid, state, call, isinstance(call.status, str) and self._moved(state, call.status))

    def _state(self, sid: str, call: agent.ToolCall) -> _ToolState:
        tid = str(call.tool_call_id)
        return self._calls.setdefault((sid, tid), _ToolState(tid))

    @staticmethod
    def _moved(state: _ToolState, status: str) -> bool:
        """Whether `status` is a new one for the call (then it joins the chain)."""
        if state.statuses and state.statuses[-1] == status:
            return False
        state.statuses.append(status)
        return True

    def _line(self, state: _ToolState) -> str:
        chain = " → ".join(self._screen.style(_STATUS_COLOUR.get(s, ""), s) for s in state.statuses)
        return f"▸ {state.title} [{state.kind}] {chain}".rstrip()

    def _show(self, sid: str, state: _ToolState, call: agent.ToolCall, new_status: bool) -> None:
        ended = bool(state.statuses) and state.statuses[-1] in ("completed", "failed")
        if new_status:
            self._show_status(sid, state, ended)
        self._show_contents(state, call)
        if ended:
            # A terminal's output is complete only when the call ends.
            for tid in state.terminals:
                self._terminal_output(state, tid)

    def _show_status(self, sid: str, state: _ToolState, ended: bool) -> None:
        screen = self._screen
        key = ("tool", sid, state.id)
        if screen.colour and screen.last_line_is(key):
            # A terminal can show the status change in place instead of a second line.
            screen.rewrite_last_line()
            screen.line(self._line(state), key=key)
        elif len(state.statuses) == 1 or ended or screen.colour:
            screen.line(self._line(state), key=key)

    def _show_contents(self, state: _ToolState, call: agent.ToolCall) -> None:
        """The diffs and texts the update carries; the client terminals it embeds are noted for the end."""
        for item in objects(call.content):
            content = lenient(agent.ToolCallContent, item)
            if content.type == "terminal":
                if str(content.terminal_id) not in state.terminals:
                    state.terminals.append(str(content.terminal_id))
            elif not (state.terminals and self._screen.terminal_output and content.type == "content"):
                # With a live terminal to show, its output replaces the text copy of it.
                self._content(state, content)

    def _terminal_output(self, state: _ToolState, tid: str) -> None:
        if f"terminal:{tid}" in state.shown:
            return
        state.shown.add(f"terminal:{tid}")
        screen = self._screen
        screen.line(screen.style(DIM, f"  [terminal {tid}]"))
        output = screen.terminal_output(tid) if screen.terminal_output else None
        # What the command printed (the agent chose the command): shown, never obeyed.
        for text_line in clip_lines(visible(output or "")):
            screen.line(screen.style(DIM, "  │ " + text_line))

    def _content(self, state: _ToolState, item: agent.ToolCallContent) -> None:
        if item.type == "diff":
            self._diff(state, item)
        elif item.type == "content":
            self._text(state, item)

    def _diff(self, state: _ToolState, item: agent.ToolCallContent) -> None:
        screen = self._screen
        sig_path = None if item.path is UNSET else item.path
        # The text as shown (str() of whatever the agent sent: a list too) is what a repeat is judged by.
        new_text = "" if item.new_text is UNSET else str(item.new_text)
        sig = f"diff:{sig_path}:{hash(new_text)}:{hash(item.old_text)}"
        if sig in state.shown:
            return
        state.shown.add(sig)
        path = screen.shorten("?" if item.path is UNSET else str(item.path))
        header = f"  {path}" + (" (new file)" if item.old_text is None else "")
        screen.line(screen.style(BOLD, header))
        for diff_line in compact_diff(path, item.old_text, new_text):
            code = _diff_colour(diff_line)
            screen.line("    " + (screen.style(code, diff_line) if code else diff_line))

    def _text(self, state: _ToolState, item: agent.ToolCallContent) -> None:
        text = block_text(item.content)
        sig = f"text:{hash(text)}"
        if not text.strip() or sig in state.shown:
            return
        state.shown.add(sig)
        for text_line in clip_lines(text):
            self._screen.line(self._screen.style(DIM, "  │ " + text_line))


def _diff_colour(line: str) -> str:
    if line.startswith("@@"):
        return CYAN
    if line.startswith("+"):
        return GREEN
    if line.startswith("-"):
        return RED
    return ""


def _one_line(text: str) -> str:
    # A tool call's line is rewritten in place on a terminal (one line up): a title must not span several.
    return " ".join(text.split())
