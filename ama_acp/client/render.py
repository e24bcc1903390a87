"""What an editor would show for a stream of session/update notifications, as plain text lines.

The output goes to a writer (anything with `write`, optionally `flush` and `isatty`), coloured with ANSI
codes only when asked or when the writer is a terminal. Message text is streamed as it arrives; every
other update starts on a line of its own.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from ama_acp.textsafe import one_line, terminal_safe, visible

RESET, BOLD, DIM = "\x1b[0m", "\x1b[1m", "\x1b[2m"
RED, GREEN, YELLOW, CYAN, MAGENTA = "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[36m", "\x1b[35m"

BAR_WIDTH = 20
RED_ABOVE = 80.0  # percent: the meter turns red past this (where models start to degrade)
_MAX_TEXT_LINES = 8
_MAX_DIFF_LINES = 60
_STATUS_COLOUR = {"pending": DIM, "in_progress": YELLOW, "completed": GREEN, "failed": RED}
_PLAN_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
_NO_MODEL = object()  # the session's model before the agent named one (not a value any option can hold)


class Writer(Protocol):
    def write(self, text: str, /) -> Any: ...


# --- the context meter ----------------------------------------------------------------------------


def whole_percent(percent: float) -> int:
    """The percentage as the meter shows it at 10 % and above: half up (34.5 → 35), not Python's half to even."""
    return math.floor(percent + 0.5)


def format_percent(percent: float) -> str:
    """`34%`, or one decimal below 10 % (`1.3%`), so a fresh session never reads as 0 %."""
    tenths = math.floor(percent * 10 + 0.5) / 10
    if tenths < 10:
        return f"{tenths:.1f}%"
    return f"{whole_percent(percent)}%"


def format_cost(cost: Any) -> str:
    """`$0.0451`, another currency by its code, or `$?` when the agent reported no cost: an unknown cost is
    never shown as free."""
    if not isinstance(cost, dict) or not _is_number(cost.get("amount")):
        return "$?"
    currency = cost.get("currency")
    if currency == "USD":
        return f"${cost['amount']:.4f}"
    return f"{cost['amount']:.4f} {currency}"


def meter_bar(percent: float, colour: bool = False) -> str:
    """Twenty cells; coloured (red) only past 80 %, where a model starts to lose track."""
    filled = max(0, min(BAR_WIDTH, math.floor(percent / 100 * BAR_WIDTH + 0.5)))
    bar = "█" * filled + "░" * (BAR_WIDTH - filled)
    if colour and percent > RED_ABOVE:
        bar = RED + bar + RESET
    return bar


ESTIMATED_SOURCES = frozenset({"estimate", "prefix"})


def is_estimated(usage: dict[str, Any]) -> bool:
    """Whether the figure is ama's estimate rather than a provider's reading: its `_meta.ama.source` says
    `estimate` or `prefix`. An agent that says nothing about provenance is taken at its word."""
    meta = usage.get("_meta")
    ama = meta.get("ama") if isinstance(meta, dict) else None
    source = ama.get("source") if isinstance(ama, dict) else None
    return isinstance(source, str) and source in ESTIMATED_SOURCES


def context_percent(usage: dict[str, Any] | None) -> float | None:
    """used / size in percent, or None when the agent sent no usable window."""
    if not usage:
        return None
    used, size = usage.get("used"), usage.get("size")
    if not isinstance(used, int) or not isinstance(size, int) or not _is_count(used) or not _is_count(size):
        return None
    try:
        return used / size * 100 if size > 0 else None
    except OverflowError:  # JSON integers have no bound: 10**400 tokens is no figure at all
        return None


def format_ctx(usage: dict[str, Any] | None, colour: bool = False) -> str:
    """The meter line for a usage_update payload: `ctx 34% (68,000 / 200,000) $0.0451 [source usage] ███…`.
    Estimated figures carry `≈` (`ctx ≈1.3% (≈2,500 / 200,000)`), an unknown cost is `$?`, and without a
    window the line is `ctx ? $?` (with the tokens and the cost, when the agent sent those). No figure at all
    (`None`: never reported, or forgotten at a model change) is `ctx ? $?` too: the cost is always on the line,
    so a cost that became unknown never just vanishes from it."""
    if not usage:
        return "ctx ? $?"
    used = usage.get("used")
    percent = context_percent(usage)
    approx = "≈" if is_estimated(usage) else ""
    if percent is None:
        tokens = f" ({approx}{used:,} tokens)" if _is_count(used) else ""
        return f"ctx ?{tokens} {format_cost(usage.get('cost'))}"
    text = f"ctx {approx}{format_percent(percent)}"
    if colour and percent > RED_ABOVE:
        text = RED + BOLD + text + RESET
    parts = [text, f"({approx}{used:,} / {usage['size']:,})", format_cost(usage.get("cost"))]
    meta = usage.get("_meta")
    ama = meta.get("ama") if isinstance(meta, dict) else None
    if isinstance(ama, dict) and isinstance(ama.get("source"), str):
        parts.append(f"[source {ama['source']}]")
    parts.append(meter_bar(percent, colour))
    if isinstance(ama, dict) and ama.get("tier") in ("warning", "danger"):
        parts.append(f"tier {ama['tier']}")
    return " ".join(parts)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# --- what the agent sends, made safe for a terminal ----------------------------------------------------

# Every string an agent sends passes through `terminal_safe` (ama_acp/textsafe.py: controls made visible, `^[`
# for ESC) before it is shown; a field shown on a line with others goes through `one_line` as well, and `line()`
# makes any newline left in what it prints visible, so an agent's string can never start a line of its own.


def as_list(value: Any) -> list[Any]:
    """`value` if it is a list, else none: an agent's array field may be anything (`"options": 5`)."""
    return value if isinstance(value, list) else []


def field(value: Any) -> str:
    """An agent's value shown inside a line (a name, a title, a stop reason): one line, controls visible."""
    return one_line(str(value))


# --- content helpers ------------------------------------------------------------------------------


def block_text(block: Any) -> str:
    """A content block as text: the text itself, or a short placeholder for other kinds."""
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "image":
        return f"[image {block.get('mimeType', '')}]".replace(" ]", "]")
    if kind == "audio":
        return f"[audio {block.get('mimeType', '')}]".replace(" ]", "]")
    if kind == "resource_link":
        return f"[link {block.get('name', '')} {block.get('uri', '')}]"
    if kind == "resource":
        res = block.get("resource")
        return f"[resource {res.get('uri', '') if isinstance(res, dict) else ''}]"
    return f"[{kind}]"


def compact_diff(path: str, old: str | None, new: str, max_lines: int = _MAX_DIFF_LINES) -> list[str]:
    """A short unified diff (one line of context); every line `+` for a new file."""
    if old is None:
        body = ["+" + line for line in new.splitlines()]
    else:
        body = list(difflib.unified_diff(old.splitlines(), new.splitlines(), n=1, lineterm=""))[2:]
    if len(body) > max_lines:
        body = body[:max_lines] + [f"… {len(body) - max_lines} more diff lines"]
    return body


def permission_details(tool_call: Any) -> list[str]:
    """What a permission request asks about, beyond its title: the text it carries (the whole command) and
    the diff an edit or write would apply — so the person judges the call itself, not a summary."""
    if not isinstance(tool_call, dict):
        return []
    lines: list[str] = []
    for item in as_list(tool_call.get("content")):
        if not isinstance(item, dict):
            continue
        if item.get("type") == "diff" and isinstance(item.get("newText"), str):
            old = item.get("oldText")
            lines.append(str(item.get("path", "")))
            lines += compact_diff(str(item.get("path", "")), old if isinstance(old, str) else None, item["newText"])
        elif item.get("type") == "content" and isinstance(item.get("content"), dict):
            text = item["content"].get("text")
            if isinstance(text, str):
                lines += _clip_lines(text)
    return lines


def _clip_lines(text: str, limit: int = _MAX_TEXT_LINES) -> list[str]:
    lines = text.rstrip("\n").splitlines()
    if len(lines) <= limit:
        return lines
    head, tail = limit // 2, limit - limit // 2 - 1
    return lines[:head] + [f"… {len(lines) - head - tail} more lines"] + lines[len(lines) - tail :]


class _ToolState:
    def __init__(self, tool_call_id: str) -> None:
        self.id = tool_call_id
        self.title = tool_call_id
        self.kind = "other"
        self.statuses: list[str] = []
        self.shown: set[str] = set()  # content already printed (diffs and texts are not repeated)
        self.terminals: list[str] = []  # client terminals embedded in the call: shown when it ends


class Renderer:
    """Turns session/update params into lines. `cwd` shortens paths inside it; `terminal_output` lets
    tool calls that embed a client terminal show what it printed."""

    def __init__(
        self,
        out: Writer,
        colour: bool | None = None,
        cwd: str | None = None,
        terminal_output: Any = None,
    ) -> None:
        self.out = out
        if colour is None:
            isatty = getattr(out, "isatty", None)
            colour = bool(isatty and isatty()) and "NO_COLOR" not in os.environ
        self.colour = colour
        self.cwd = cwd
        self.terminal_output = terminal_output
        self.usage: dict[str, dict[str, Any]] = {}  # sessionId -> last usage_update (none: the meter is unknown)
        # Told the session id whenever that session's meter figure is replaced or forgotten (the program status
        # follows it: its progress is the meter's percent).
        self.on_meter: Callable[[str], None] | None = None
        self.config: dict[str, dict[str, Any]] = {}  # sessionId -> {optionId: option}
        self.modes: dict[str, dict[str, str]] = {}  # sessionId -> {modeId: name}
        self.titles: dict[str, str | None] = {}
        self._tools: dict[tuple[str, str], _ToolState] = {}
        self._plans: dict[str, list[Any]] = {}
        self._commands: dict[str, list[str]] = {}
        self._meters: dict[str, str] = {}  # sessionId -> the meter line last printed
        self._meter_waits: dict[str, int] = {}  # sessionId -> open `one_meter_line` blocks (its line waits)
        self._asked: set[tuple[str, str]] = set()  # permission requests shown before their answer
        self._current_mode: dict[str, str] = {}
        self._stream: tuple[str, Any] | None = None  # (kind, messageId) of the text being streamed
        self._at_line_start = True
        self._last_line_key: Any = None  # what the last full line showed (lets a TTY rewrite it in place)
        self._held: list[dict[str, Any]] | None = None

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

    def line(self, text: str = "", key: Any = None) -> None:
        """One line. A newline inside `text` can only have come from someone else's string (the renderer's own
        lines are one line each): it is shown as `^J`, so no field forges a line (a permission prompt's option)."""
        self.end_stream()
        if "\n" in text or "\r" in text:
            text = text.replace("\r", "^M").replace("\n", "^J")
        self._emit(text + "\n")
        self._last_line_key = key

    def _path(self, path: str) -> str:
        if self.cwd and isinstance(path, str):
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

    def session_opened(self, session_id: str, result: dict[str, Any] | None, quiet: bool = False) -> None:
        """Take in the modes and config options a session/new (or load/resume) result carries."""
        result = terminal_safe(result or {})
        modes = result.get("modes")
        if isinstance(modes, dict):
            self._take_modes(session_id, modes)
        options = result.get("configOptions")
        if isinstance(options, list):
            self._config_update(session_id, options, quiet=quiet)

    def _take_modes(self, session_id: str, modes: dict[str, Any]) -> None:
        names = {}
        for mode in as_list(modes.get("availableModes")):
            if isinstance(mode, dict) and isinstance(mode.get("id"), str):
                names[mode["id"]] = str(mode.get("name") or mode["id"])
        self.modes[session_id] = names
        if isinstance(modes.get("currentModeId"), str):
            self._current_mode[session_id] = modes["currentModeId"]

    def mode_set(self, session_id: str, mode_id: str) -> None:
        """The person changed the mode and the agent accepted: shown now, and not again when the agent's own
        current_mode_update for it arrives."""
        self._current_mode.pop(session_id, None)
        self._on_current_mode_update(session_id, {"currentModeId": terminal_safe(mode_id)})

    def option_set(self, session_id: str, option_id: str, options: list[Any]) -> None:
        """The person set a config option and the agent answered with every option: the one set is shown (even
        when the agent kept the value it had), the others only if they changed. When the model changed by it,
        the meter is forgotten (see `_after_options`)."""
        options = terminal_safe(options)
        model_before = self._model_value(session_id)
        self._config_update(session_id, [o for o in options if not (isinstance(o, dict) and o.get("id") == option_id)])
        mine = [o for o in options if isinstance(o, dict) and o.get("id") == option_id]
        if mine:
            self.config.setdefault(session_id, {})[option_id] = mine[0]
            key = ("option", session_id, option_id, _option_value(mine[0]))
            if self._last_line_key != key:  # not when the agent's own update just showed this very value
                self.line(self.style(CYAN, f"⚙ {mine[0].get('name', option_id)}: {_option_value(mine[0])}"), key=key)
        self._after_options(session_id, model_before)

    def _model_value(self, session_id: str) -> Any:
        """The raw `currentValue` of the session's option of category `model` (whatever the agent sent), or
        _NO_MODEL before the agent reported such an option."""
        for option in self.config.get(session_id, {}).values():
            if option.get("category") == "model":
                return option.get("currentValue")
        return _NO_MODEL

    def _after_options(self, session_id: str, model_before: Any) -> None:
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
        for option in self.config.get(session_id, {}).values():
            if option.get("category") == "model":
                value = option.get("currentValue")
                return value if isinstance(value, str) else None
        return None

    def permission_title(self, params: dict[str, Any]) -> str:
        """What a permission request is about: its tool call's title, or the title announced earlier."""
        return self._title(terminal_safe(params))

    def permission_request(self, params: dict[str, Any], numbered: bool = False) -> None:
        """Show a permission request: what it is about, the command or diff it carries, and its options
        (numbered, for a person to choose one); its answer (`permission`) then does not show it again."""
        params = terminal_safe(params)
        self._show_request(params, numbered)
        self._asked.add(_request_key(params))

    def permission(self, params: dict[str, Any], outcome: dict[str, Any]) -> None:
        """A permission request and the answer given to it (the request itself only if not shown already)."""
        params = terminal_safe(params)
        outcome = terminal_safe(outcome)
        options = [o for o in as_list(params.get("options")) if isinstance(o, dict)]
        key = _request_key(params)
        if key in self._asked:
            self._asked.discard(key)
        else:
            self._show_request(params, numbered=False)
        if outcome.get("outcome") == "selected":
            chosen = next((o for o in options if o.get("optionId") == outcome.get("optionId")), {})
            kind = str(chosen.get("kind", ""))
            answer = f"{chosen.get('name', outcome.get('optionId'))} ({kind or outcome.get('optionId')})"
            self.line("  → " + self.style(GREEN if kind.startswith("allow") else RED, answer))
        else:
            self.line("  → " + self.style(DIM, "cancelled"))

    def _title(self, params: dict[str, Any]) -> str:
        tool = call if isinstance(call := params.get("toolCall"), dict) else {}
        title = tool.get("title")
        if not title:
            state = self._tools.get((str(params.get("sessionId")), str(tool.get("toolCallId"))))
            title = state.title if state else tool.get("toolCallId", "?")
        return field(title)

    def _show_request(self, params: dict[str, Any], numbered: bool) -> None:
        """`params` already made terminal-safe."""
        tool = call if isinstance(call := params.get("toolCall"), dict) else {}
        options = [o for o in as_list(params.get("options")) if isinstance(o, dict)]
        choices = ", ".join(f"{field(o.get('name'))} ({field(o.get('kind'))})" for o in options)
        header = self.style(MAGENTA, f"? permission: {self._title(params)}")
        self.line(header if numbered else f"{header} — {choices}")
        for detail in permission_details(tool):
            self.line("  │ " + detail)
        if numbered:
            for i, o in enumerate(options, 1):
                self.line(f"  {i}. {field(o.get('name'))} ({field(o.get('kind'))})")

    def turn_end(self, session_id: str, stop_reason: Any) -> None:
        """The end of a prompt turn: its stop reason and the meter as it stands (`ctx ?` if never reported)."""
        self.line(self.style(BOLD, f"[stop: {field(stop_reason)}]"))
        # The turn's summary shows the meter even when it has not changed since it was last printed.
        text = format_ctx(self.usage.get(session_id), self.colour)
        self._meters[session_id] = text
        self.line(text)

    # --- session/update ------------------------------------------------------------------------------

    def update(self, params: dict[str, Any]) -> None:
        """Render one session/update notification's params (`{sessionId, update}`)."""
        if self._held is not None:
            self._held.append(params)
            return
        params = terminal_safe(params)
        sid = str(params.get("sessionId", ""))
        update = params.get("update")
        if not isinstance(update, dict):
            return
        kind = update.get("sessionUpdate")
        handler = getattr(self, f"_on_{kind}", None) if isinstance(kind, str) else None
        if handler is None:
            self.line(self.style(DIM, f"[{kind}]"))
            return
        handler(sid, update)

    def _chunk(self, kind: str, update: dict[str, Any], prefix: str, code: str) -> None:
        text = block_text(update.get("content"))
        if not text:
            return
        key = (kind, update.get("messageId"))
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

    def _on_agent_message_chunk(self, sid: str, update: dict[str, Any]) -> None:
        self._chunk("agent", update, "", "")

    def _on_agent_thought_chunk(self, sid: str, update: dict[str, Any]) -> None:
        self._chunk("thought", update, "│ ", DIM)

    def _on_user_message_chunk(self, sid: str, update: dict[str, Any]) -> None:
        self._chunk("user", update, "» ", BOLD)

    def _on_compaction_summary_chunk(self, sid: str, update: dict[str, Any]) -> None:
        self._chunk("compaction", update, "≡ ", DIM)

    # tool calls

    def _tool_line(self, state: _ToolState) -> str:
        chain = " → ".join(self.style(_STATUS_COLOUR.get(s, ""), s) for s in state.statuses)
        return f"▸ {state.title} [{state.kind}] {chain}".rstrip()

    def _show_tool(self, sid: str, state: _ToolState, update: dict[str, Any], new_status: bool) -> None:
        terminal = bool(state.statuses) and state.statuses[-1] in ("completed", "failed")
        if new_status:
            if self.colour and self._last_line_key == ("tool", sid, state.id):
                # A terminal can show the status change in place instead of a second line.
                self._emit("\x1b[1A\r\x1b[2K")
                self.line(self._tool_line(state), key=("tool", sid, state.id))
            elif len(state.statuses) == 1 or terminal or self.colour:
                self.line(self._tool_line(state), key=("tool", sid, state.id))
        for item in as_list(update.get("content")):
            if isinstance(item, dict) and item.get("type") == "terminal":
                if str(item.get("terminalId")) not in state.terminals:
                    state.terminals.append(str(item.get("terminalId")))
            elif not (state.terminals and self.terminal_output and _is_text(item)):
                # With a live terminal to show, its output replaces the text copy of it.
                self._tool_content(state, item)
        if terminal:
            # A terminal's output is complete only when the call ends.
            for tid in state.terminals:
                self._terminal_output(state, tid)

    def _terminal_output(self, state: _ToolState, tid: str) -> None:
        if f"terminal:{tid}" in state.shown:
            return
        state.shown.add(f"terminal:{tid}")
        self.line(self.style(DIM, f"  [terminal {tid}]"))
        output = self.terminal_output(tid) if self.terminal_output else None
        # What the command printed (the agent chose the command): shown, never obeyed.
        for text_line in _clip_lines(visible(output or "")):
            self.line(self.style(DIM, "  │ " + text_line))

    def _tool_content(self, state: _ToolState, item: Any) -> None:
        if not isinstance(item, dict):
            return
        kind = item.get("type")
        if kind == "diff":
            sig = f"diff:{item.get('path')}:{hash(item.get('newText'))}:{hash(item.get('oldText'))}"
            if sig in state.shown:
                return
            state.shown.add(sig)
            path = self._path(str(item.get("path", "?")))
            old = item.get("oldText")
            header = f"  {path}" + (" (new file)" if old is None else "")
            self.line(self.style(BOLD, header))
            for diff_line in compact_diff(path, old, str(item.get("newText", ""))):
                code = GREEN if diff_line.startswith("+") else RED if diff_line.startswith("-") else ""
                code = CYAN if diff_line.startswith("@@") else code
                self.line("    " + (self.style(code, diff_line) if code else diff_line))
        elif kind == "content":
            text = block_text(item.get("content"))
            sig = f"text:{hash(text)}"
            if not text.strip() or sig in state.shown:
                return
            state.shown.add(sig)
            for text_line in _clip_lines(text):
                self.line(self.style(DIM, "  │ " + text_line))

    def _on_tool_call(self, sid: str, update: dict[str, Any]) -> None:
        tid = str(update.get("toolCallId"))
        state = self._tools.setdefault((sid, tid), _ToolState(tid))
        state.title = _one_line(str(update.get("title") or state.title))
        state.kind = str(update.get("kind") or state.kind)
        status = str(update.get("status") or "pending")
        new_status = not state.statuses or state.statuses[-1] != status
        if new_status:
            state.statuses.append(status)
        self._show_tool(sid, state, update, new_status)

    def _on_tool_call_update(self, sid: str, update: dict[str, Any]) -> None:
        tid = str(update.get("toolCallId"))
        state = self._tools.setdefault((sid, tid), _ToolState(tid))
        if update.get("title"):
            state.title = _one_line(str(update["title"]))
        if update.get("kind"):
            state.kind = str(update["kind"])
        status = update.get("status")
        new_status = isinstance(status, str) and (not state.statuses or state.statuses[-1] != status)
        if new_status:
            state.statuses.append(str(status))
        self._show_tool(sid, state, update, new_status)

    # plan, modes, options, info

    def _on_plan(self, sid: str, update: dict[str, Any]) -> None:
        entries = as_list(update.get("entries"))
        if self._plans.get(sid) == entries:
            return
        self._plans[sid] = entries
        self.line(self.style(BOLD, "Plan:"))
        for entry in entries:
            if isinstance(entry, dict):
                mark = _PLAN_MARK.get(str(entry.get("status")), "[?]")
                self.line(f"  {mark} {entry.get('content', '')}")

    def _on_plan_update(self, sid: str, update: dict[str, Any]) -> None:
        plan = given if isinstance(given := update.get("plan"), dict) else {}
        if plan.get("type") == "items":
            self._on_plan(sid, {"entries": as_list(plan.get("entries"))})
        else:
            self.line(
                self.style(BOLD, f"Plan ({plan.get('type')}): ") + str(plan.get("uri") or plan.get("content", ""))
            )

    def _on_current_mode_update(self, sid: str, update: dict[str, Any]) -> None:
        mode = str(update.get("currentModeId"))
        if self._current_mode.get(sid) == mode:
            return  # already shown (the answer to /mode came first)
        self._current_mode[sid] = mode
        name = self.modes.get(sid, {}).get(mode, mode)
        self.line(self.style(CYAN, f"⚙ mode: {name}"))

    def _config_update(self, sid: str, options: list[Any], quiet: bool = False) -> None:
        known = self.config.setdefault(sid, {})
        for option in options:
            if not isinstance(option, dict) or not isinstance(option.get("id"), str):
                continue
            before = known.get(option["id"])
            known[option["id"]] = option
            if quiet or (before is not None and before.get("currentValue") == option.get("currentValue")):
                continue
            value = _option_value(option)
            self.line(
                self.style(CYAN, f"⚙ {option.get('name', option['id'])}: {value}"),
                key=("option", sid, option["id"], value),
            )

    def _on_config_option_update(self, sid: str, update: dict[str, Any]) -> None:
        options = update.get("configOptions")
        if isinstance(options, list):
            model_before = self._model_value(sid)
            self._config_update(sid, options)
            self._after_options(sid, model_before)

    def _on_session_info_update(self, sid: str, update: dict[str, Any]) -> None:
        if "title" in update and update["title"] != self.titles.get(sid):
            self.titles[sid] = update["title"]
            self.line(self.style(BOLD, f"title: {update['title']}"))

    def _on_available_commands_update(self, sid: str, update: dict[str, Any]) -> None:
        names = [f"/{c.get('name')}" for c in as_list(update.get("availableCommands")) if isinstance(c, dict)]
        if self._commands.get(sid) != names:
            self._commands[sid] = names
            self.line(self.style(DIM, "commands: " + (" ".join(names) or "(none)")))

    def _on_usage_update(self, sid: str, update: dict[str, Any]) -> None:
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

    def _on_notice(self, sid: str, update: dict[str, Any]) -> None:
        severity = str(update.get("severity", "info"))
        code = RED if severity == "error" else YELLOW if severity == "warning" else CYAN
        text = f"! {severity}: {update.get('title', '')}"
        if update.get("description"):
            text += f" — {update['description']}"
        self.line(self.style(code, text))

    def _on_compaction_update(self, sid: str, update: dict[str, Any]) -> None:
        text = f"⟳ compaction {update.get('status')}"
        if update.get("error"):
            text += f": {update['error']}"
        self.line(self.style(CYAN, text))
        summary = update.get("summary")
        if isinstance(summary, list):
            for block in summary:
                for text_line in _clip_lines(block_text(block)):
                    self.line(self.style(DIM, "  ≡ " + text_line))


def _one_line(text: str) -> str:
    # A tool call's line is rewritten in place on a terminal (one line up): a title must not span several.
    return " ".join(text.split())


def _request_key(params: dict[str, Any]) -> tuple[str, str]:
    tool = params.get("toolCall")
    return str(params.get("sessionId")), str(tool.get("toolCallId") if isinstance(tool, dict) else None)


def _is_text(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "content"


def _option_value(option: dict[str, Any]) -> str:
    value = option.get("currentValue")
    if isinstance(value, bool):
        return "on" if value else "off"
    for choice in flat_options(option.get("options")):
        if choice.get("value") == value and choice.get("name") and choice["name"] != value:
            return f"{choice['name']} ({value})"
    return str(value)


def flat_options(options: Any) -> list[dict[str, Any]]:
    """A select option's choices, groups (`{"group", "options": [...]}`) flattened; anything not an object dropped."""
    flat: list[dict[str, Any]] = []
    for item in as_list(options):
        if isinstance(item, dict) and isinstance(item.get("options"), list):
            flat.extend(o for o in item["options"] if isinstance(o, dict))
        elif isinstance(item, dict):
            flat.append(item)
    return flat
