"""What an editor would show for a stream of session/update notifications, as plain text lines.

The output goes to a writer (anything with `write`, optionally `flush` and `isatty`), coloured with ANSI
codes only when asked or when the writer is a terminal. Message text is streamed as it arrives; every
other update starts on a line of its own.

Each payload is made terminal-safe first (`terminal_safe`: an agent's controls made visible), then read as
the lenient struct of its kind (`agent_types.py`); `line()` makes any newline left in what it prints
visible, so an agent's string can never start a line of its own. The meter line is `meter.py`'s, the text
of content blocks, diffs and options `content.py`'s.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from ama_acp.client.display import agent_types as agent
from ama_acp.client.display.agent_types import UNSET, lenient
from ama_acp.client.display.ansi import BOLD, CYAN, DIM, GREEN, MAGENTA, RED, RESET, YELLOW
from ama_acp.client.display.content import (
    as_list,
    block_text,
    clip_lines,
    field,
    objects,
    option_value,
    permission_details,
)
from ama_acp.client.display.meter import format_ctx
from ama_acp.client.display.tool_calls import ToolCalls
from ama_acp.rpc.dispatch import JSONObject, JSONValue
from ama_acp.textsafe import terminal_safe

# Re-exported: the prompt (repl.py) takes these from here.
__all__ = ["RED", "Renderer", "Writer", "as_list", "field"]

_PLAN_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
_NO_MODEL = object()  # the session's model before the agent named one (not a value any option can hold)


class Writer(Protocol):
    def write(self, text: str, /) -> object: ...


class Renderer:
    """Turns session/update params into lines. `cwd` shortens paths inside it; `terminal_output` lets
    tool calls that embed a client terminal show what it printed."""

    def __init__(
        self,
        out: Writer,
        colour: bool | None = None,
        cwd: str | None = None,
        terminal_output: Callable[[str], str | None] | None = None,
    ) -> None:
        self.out = out
        if colour is None:
            isatty = getattr(out, "isatty", None)
            colour = bool(isatty and isatty()) and "NO_COLOR" not in os.environ
        self.colour = colour
        self.cwd = cwd
        self.terminal_output = terminal_output
        self.usage: dict[str, JSONObject] = {}  # sessionId -> last usage_update (none: the meter is unknown)
        # Told the session id whenever that session's meter figure is replaced or forgotten (the program status
        # follows it: its progress is the meter's percent).
        self.on_meter: Callable[[str], None] | None = None
        self.config: dict[str, dict[str, JSONObject]] = {}  # sessionId -> {optionId: option}
        self.modes: dict[str, dict[str, str]] = {}  # sessionId -> {modeId: name}
        self.titles: dict[str, object] = {}  # sessionId -> the title last shown (the agent's value)
        self._tool_calls = ToolCalls(self)
        self._plans: dict[str, list[JSONValue]] = {}
        self._commands: dict[str, list[str]] = {}
        self._meters: dict[str, str] = {}  # sessionId -> the meter line last printed
        self._meter_waits: dict[str, int] = {}  # sessionId -> open `one_meter_line` blocks (its line waits)
        self._asked: set[tuple[str, str]] = set()  # permission requests shown before their answer
        self._current_mode: dict[str, str] = {}
        # sessionId -> the (optionId, value) lines shown since the person's last command began: the answer to
        # /model or /option does not show again what the agent's own config_option_update just showed, however
        # many lines came between (issue 25: one model line per change).
        self._options_shown: dict[str, set[tuple[str, str]]] = {}
        self._stream: tuple[str, object] | None = None  # (kind, messageId) of the text being streamed
        self._at_line_start = True
        self._last_line_key: object = None  # what the last full line showed (lets a TTY rewrite it in place)
        self._held: list[JSONObject] | None = None

    # --- output primitives ------------------------------------------------------------------------

    def style(self, code: str, text: str) -> str:
        """`text` in an ANSI style when colour is on."""
        return f"{code}{text}{RESET}" if self.colour else text

    def _emit(self, text: str) -> None:
        self.out.write(text)
        flush = getattr(self.out, "flush", None)
        if flush:
            flush()

    def end_stream(self) -> None:
        """Finish a streamed message so the next output starts on its own line."""
        if not self._at_line_start:
            self._emit("\n")
            self._at_line_start = True
        self._stream = None

    def line(self, text: str = "", key: object = None) -> None:
        """One line. A newline inside `text` can only have come from someone else's string (the renderer's own
        lines are one line each): it is shown as `^J`, so no field forges a line (a permission prompt's option)."""
        self.end_stream()
        if "\n" in text or "\r" in text:
            text = text.replace("\r", "^M").replace("\n", "^J")
        self._emit(text + "\n")
        self._last_line_key = key

    def last_line_is(self, key: object) -> bool:
        """Whether the last full line printed showed `key` (and nothing was streamed after it)."""
        return self._last_line_key == key

    def rewrite_last_line(self) -> None:
        """Go back to the start of the last line and clear it (a terminal only: colour is on)."""
        self._emit("\x1b[1A\r\x1b[2K")

    def shorten(self, path: str) -> str:
        """`path` relative to the cwd, when it is inside it."""
        if self.cwd:
            try:
                rel = os.path.relpath(path, self.cwd)
            except ValueError:
                return path
            if not rel.startswith(".."):
                return rel
        return path

    # --- holding (a caller that wants to print something first) -----------------------------------

    def hold(self) -> None:
        """Queue updates instead of printing them, until release()."""
        if self._held is None:
            self._held = []

    def release(self) -> None:
        held, self._held = self._held or [], None
        for params in held:
            self.update(params)

    # --- session-level events -----------------------------------------------------------------------

    def session_opened(self, session_id: str, result: JSONObject | None, quiet: bool = False) -> None:
        """Take in the modes and config options a session/new (or load/resume) result carries."""
        safe: JSONObject = terminal_safe(result or {})
        modes = safe.get("modes")
        if isinstance(modes, dict):
            self._take_modes(session_id, modes)
        options = safe.get("configOptions")
        if isinstance(options, list):
            self._config_update(session_id, options, quiet=quiet)

    def _take_modes(self, session_id: str, modes: JSONObject) -> None:
        names = {}
        for mode in objects(modes.get("availableModes")):
            if isinstance(mode_id := mode.get("id"), str):
                names[mode_id] = str(mode.get("name") or mode_id)
        self.modes[session_id] = names
        if isinstance(current := modes.get("currentModeId"), str):
            self._current_mode[session_id] = current

    def mode_set(self, session_id: str, mode_id: str) -> None:
        """The person changed the mode and the agent accepted: shown now, and not again when the agent's own
        current_mode_update for it arrives."""
        self._current_mode.pop(session_id, None)
        self._show_mode(session_id, terminal_safe(mode_id))

    def command_started(self, session_id: str) -> None:
        """The person typed one of the client's commands: what it changes is shown once from here on."""
        self._options_shown[session_id] = set()

    def option_set(self, session_id: str, option_id: str, options: list[JSONValue]) -> None:
        """The person set a config option and the agent answered with every option: the one set is shown (even
        when the agent kept the value it had), the others only if they changed. When the model changed by it,
        the meter is forgotten (see `_after_options`)."""
        safe: list[JSONValue] = terminal_safe(options)
        model_before = self._model_value(session_id)
        self._config_update(session_id, [o for o in safe if not (isinstance(o, dict) and o.get("id") == option_id)])
        mine = [o for o in objects(safe) if o.get("id") == option_id]
        if mine:
            self.config.setdefault(session_id, {})[option_id] = mine[0]
            value = option_value(mine[0])
            shown = self._options_shown.setdefault(session_id, set())
            if (option_id, value) not in shown:  # not when the agent's own update already showed this very value
                shown.add((option_id, value))
                self.line(self.style(CYAN, f"⚙ {mine[0].get('name', option_id)}: {value}"))
        self._after_options(session_id, model_before)

    def _model_value(self, session_id: str) -> object:
        """The raw `currentValue` of the session's option of category `model` (whatever the agent sent), or
        _NO_MODEL before the agent reported such an option."""
        for option in self.config.get(session_id, {}).values():
            if option.get("category") == "model":
                return option.get("currentValue")
        return _NO_MODEL

    def _after_options(self, session_id: str, model_before: object) -> None:
        """The model changed: the meter's figure (window, tokens, cost) was the previous model's, so it is
        forgotten and the line reads `ctx ? $?` until the agent reports again. Only an actual change of the
        model option's value counts — the first time the agent names its model is no change, and an agent that
        repeats the value it had (ama announces its options after /model, then answers with them again) leaves
        the figure that followed its announcement alone. An agent that sends its usage_update before its
        config_option_update shows `ctx ?` until its next usage_update: an update cannot be told to belong to
        the model announced after it, and a stale figure is worse than an unknown one."""
        if model_before is _NO_MODEL or self._model_value(session_id) == model_before:
            return
        if self.usage.pop(session_id, None) is None:
            return  # no figure to forget: the meter reads as it did
        self._meter_moved(session_id)
        self.show_meter(session_id)

    def _meter_moved(self, session_id: str) -> None:
        if self.on_meter is not None:
            self.on_meter(session_id)

    @contextmanager
    def one_meter_line(self, session_id: str) -> Iterator[None]:
        """The meter moves within the block but its line is printed once, at the end (if it then reads
        differently from the last line printed). For a request whose answer comes after the updates it causes —
        /model: ama sends the options, then the new model's meter, then its answer — so the person sees the
        outcome, not the `ctx ? $?` of the moment between the two updates."""
        self._meter_waits[session_id] = self._meter_waits.get(session_id, 0) + 1
        try:
            yield
        finally:
            self._meter_waits[session_id] -= 1
            if not self._meter_waits[session_id]:
                del self._meter_waits[session_id]
                self.show_meter(session_id)

    def current_model(self, session_id: str) -> str | None:
        """The `currentValue` of the config option of category `model`, when the agent reported one."""
        value = self._model_value(session_id)
        return value if isinstance(value, str) else None

    # --- permission requests --------------------------------------------------------------------------

    def permission_title(self, params: JSONObject) -> str:
        """What a permission request is about: its tool call's title, or the title announced earlier."""
        return self._title(terminal_safe(params))

    def permission_request(self, params: JSONObject, numbered: bool = False) -> None:
        """Show a permission request: what it is about, the command or diff it carries, and its options
        (numbered, for a person to choose one); its answer (`permission`) then does not show it again."""
        safe: JSONObject = terminal_safe(params)
        self._show_request(safe, numbered)
        self._asked.add(_request_key(safe))

    def permission(self, params: JSONObject, outcome: JSONObject) -> None:
        """A permission request and the answer given to it (the request itself only if not shown already)."""
        safe: JSONObject = terminal_safe(params)
        answered: JSONObject = terminal_safe(outcome)
        options = objects(safe.get("options"))
        key = _request_key(safe)
        if key in self._asked:
            self._asked.discard(key)
        else:
            self._show_request(safe, numbered=False)
        if answered.get("outcome") == "selected":
            option_id = answered.get("optionId")
            chosen = next((o for o in options if o.get("optionId") == option_id), {})
            kind = str(chosen.get("kind", ""))
            answer = f"{chosen.get('name', option_id)} ({kind or option_id})"
            self.line("  → " + self.style(GREEN if kind.startswith("allow") else RED, answer))
        else:
            self.line("  → " + self.style(DIM, "cancelled"))

    def _title(self, params: JSONObject) -> str:
        tool = call if isinstance(call := params.get("toolCall"), dict) else {}
        title = tool.get("title")
        if not title:
            announced = self._tool_calls.title(str(params.get("sessionId")), str(tool.get("toolCallId")))
            title = announced if announced is not None else tool.get("toolCallId", "?")
        return field(title)

    def _show_request(self, params: JSONObject, numbered: bool) -> None:
        """`params` already made terminal-safe."""
        options = objects(params.get("options"))
        choices = ", ".join(f"{field(o.get('name'))} ({field(o.get('kind'))})" for o in options)
        header = self.style(MAGENTA, f"? permission: {self._title(params)}")
        self.line(header if numbered else f"{header} — {choices}")
        for detail in permission_details(params.get("toolCall")):
            self.line("  │ " + detail)
        if numbered:
            for i, o in enumerate(options, 1):
                self.line(f"  {i}. {field(o.get('name'))} ({field(o.get('kind'))})")

    def turn_end(self, session_id: str, stop_reason: object) -> None:
        """The end of a prompt turn: its stop reason and the meter as it stands (`ctx ?` if never reported)."""
        self.line(self.style(BOLD, f"[stop: {field(stop_reason)}]"))
        # The turn's summary shows the meter even when it has not changed since it was last printed.
        text = format_ctx(self.usage.get(session_id), self.colour)
        self._meters[session_id] = text
        self.line(text)

    # --- session/update ------------------------------------------------------------------------------

    def update(self, params: JSONObject) -> None:
        """Render one session/update notification's params (`{sessionId, update}`)."""
        if self._held is not None:
            self._held.append(params)
            return
        safe: JSONObject = terminal_safe(params)
        sid = str(safe.get("sessionId", ""))
        update = safe.get("update")
        if not isinstance(update, dict):
            return
        kind = update.get("sessionUpdate")
        show = _SHOW.get(kind) if isinstance(kind, str) else None
        if show is None:
            self.line(self.style(DIM, f"[{kind}]"))
            return
        show(self, sid, update)

    def _chunk(self, kind: str, update: JSONObject, prefix: str, code: str) -> None:
        chunk = lenient(agent.ContentChunk, update)
        text = block_text(chunk.content)
        if not text:
            return
        key = (kind, chunk.message_id)
        if self._stream != key:
            self.end_stream()
            self._stream = key
        for i, piece in enumerate(text.split("\n")):
            if i > 0:
                self._emit("\n")
                self._at_line_start = True
            if not piece:
                continue
            if self._at_line_start and prefix:
                self._emit(self.style(code, prefix))
            self._emit(self.style(code, piece) if code and self.colour else piece)
            self._at_line_start = False
        self._last_line_key = None

    def _agent_message_chunk(self, sid: str, update: JSONObject) -> None:
        self._chunk("agent", update, "", "")

    def _agent_thought_chunk(self, sid: str, update: JSONObject) -> None:
        self._chunk("thought", update, "│ ", DIM)

    def _user_message_chunk(self, sid: str, update: JSONObject) -> None:
        self._chunk("user", update, "» ", BOLD)

    def _compaction_summary_chunk(self, sid: str, update: JSONObject) -> None:
        self._chunk("compaction", update, "≡ ", DIM)

    # plan, modes, options, info

    def _plan(self, sid: str, update: JSONObject) -> None:
        self._show_plan(sid, as_list(update.get("entries")))

    def _show_plan(self, sid: str, entries: list[JSONValue]) -> None:
        if self._plans.get(sid) == entries:
            return
        self._plans[sid] = entries
        self.line(self.style(BOLD, "Plan:"))
        for entry in objects(entries):
            given = lenient(agent.PlanEntry, entry)
            mark = _PLAN_MARK.get(str(given.status), "[?]")
            self.line(f"  {mark} {given.content}")

    def _plan_update(self, sid: str, update: JSONObject) -> None:
        plan = lenient(agent.Plan, update.get("plan"))
        if plan.type == "items":
            self._show_plan(sid, as_list(plan.entries))
        else:
            self.line(self.style(BOLD, f"Plan ({plan.type}): ") + str(plan.uri or plan.content))

    def _current_mode_update(self, sid: str, update: JSONObject) -> None:
        self._show_mode(sid, str(lenient(agent.CurrentMode, update).current_mode_id))

    def _show_mode(self, sid: str, mode: str) -> None:
        if self._current_mode.get(sid) == mode:
            return  # already shown (the answer to /mode came first)
        self._current_mode[sid] = mode
        name = self.modes.get(sid, {}).get(mode, mode)
        self.line(self.style(CYAN, f"⚙ mode: {name}"))

    def _config_update(self, sid: str, options: list[JSONValue], quiet: bool = False) -> None:
        known = self.config.setdefault(sid, {})
        for option in objects(options):
            if not isinstance(option_id := option.get("id"), str):
                continue
            before = known.get(option_id)
            known[option_id] = option
            if quiet or (before is not None and before.get("currentValue") == option.get("currentValue")):
                continue
            value = option_value(option)
            self._options_shown.setdefault(sid, set()).add((option_id, value))
            self.line(self.style(CYAN, f"⚙ {option.get('name', option_id)}: {value}"))

    def _config_option_update(self, sid: str, update: JSONObject) -> None:
        options = update.get("configOptions")
        if isinstance(options, list):
            model_before = self._model_value(sid)
            self._config_update(sid, options)
            self._after_options(sid, model_before)

    def _session_info_update(self, sid: str, update: JSONObject) -> None:
        title = lenient(agent.SessionInfo, update).title
        if title is not UNSET and title != self.titles.get(sid):
            self.titles[sid] = title
            self.line(self.style(BOLD, f"title: {title}"))

    def _available_commands_update(self, sid: str, update: JSONObject) -> None:
        commands = objects(update.get("availableCommands"))
        names = [f"/{lenient(agent.AvailableCommand, c).name}" for c in commands]
        if self._commands.get(sid) != names:
            self._commands[sid] = names
            self.line(self.style(DIM, "commands: " + (" ".join(names) or "(none)")))

    def _usage_update(self, sid: str, update: JSONObject) -> None:
        self.usage[sid] = update
        self._meter_moved(sid)
        self.show_meter(sid)

    def show_meter(self, sid: str) -> None:
        """Print the session's meter if it reads differently from the last one printed (an agent that repeats
        a figure does not repeat the line); `ctx ? $?` when the agent never reported one, or the model changed
        since. Inside `one_meter_line` the line waits for the block's end."""
        if self._meter_waits.get(sid):
            return
        text = format_ctx(self.usage.get(sid), self.colour)
        if self._meters.get(sid) != text:
            self._meters[sid] = text
            self.line(text)

    def _notice(self, sid: str, update: JSONObject) -> None:
        notice = lenient(agent.Notice, update)
        severity = str(notice.severity)
        code = RED if severity == "error" else YELLOW if severity == "warning" else CYAN
        text = f"! {severity}: {notice.title}"
        if notice.description:
            text += f" — {notice.description}"
        self.line(self.style(code, text))

    def _compaction_update(self, sid: str, update: JSONObject) -> None:
        compaction = lenient(agent.Compaction, update)
        text = f"⟳ compaction {compaction.status}"
        if compaction.error:
            text += f": {compaction.error}"
        self.line(self.style(CYAN, text))
        if isinstance(compaction.summary, list):
            for block in compaction.summary:
                for text_line in clip_lines(block_text(block)):
                    self.line(self.style(DIM, "  ≡ " + text_line))


# Each sessionUpdate kind the renderer knows, and how it is shown; any other is shown as `[kind]`.
_SHOW: dict[str, Callable[[Renderer, str, JSONObject], None]] = {
    "agent_message_chunk": Renderer._agent_message_chunk,
    "agent_thought_chunk": Renderer._agent_thought_chunk,
    "user_message_chunk": Renderer._user_message_chunk,
    "compaction_summary_chunk": Renderer._compaction_summary_chunk,
    "tool_call": lambda r, sid, update: r._tool_calls.started(sid, update),
    "tool_call_update": lambda r, sid, update: r._tool_calls.updated(sid, update),
    "plan": Renderer._plan,
    "plan_update": Renderer._plan_update,
    "current_mode_update": Renderer._current_mode_update,
    "config_option_update": Renderer._config_option_update,
    "session_info_update": Renderer._session_info_update,
    "available_commands_update": Renderer._available_commands_update,
    "usage_update": Renderer._usage_update,
    "notice": Renderer._notice,
    "compaction_update": Renderer._compaction_update,
}


def _request_key(params: JSONObject) -> tuple[str, str]:
    tool = params.get("toolCall")
    return str(params.get("sessionId")), str(tool.get("toolCallId") if isinstance(tool, dict) else None)
