"""The terminal input side of `ama acp-client`: the person's lines, OSC 7501 detection, and the terminal's replies.

Three layers, each usable alone: `tty_parser.InputParser` (bytes → typed events, no I/O), `line_editor.LineEditor`
(the line being typed → what to write, no I/O), and `TerminalInput` here, which owns the tty.

`TerminalInput` owns a tty file descriptor (POSIX). Its terminal mode, chosen so that a reply can never reach the
screen: for the whole client session ECHO, ICANON and IEXTEN stay off (a late reply arriving while a turn runs is
then neither echoed by the tty nor mixed into a line; the next `read_line` swallows it), input is 8-bit with no
CR/NL translation, VMIN=1/VTIME=0, and output post-processing is left on (a newline still returns the carriage). Only ISIG
changes: off while a line is read (Ctrl-C arrives as a byte: `read_line` raises `LineInterrupted`), on while a
turn runs (`with terminal.turn():`, so Ctrl-C is SIGINT as before). `read_line` turns ISIG off for its own
duration and puts back what it found, so it may be called inside `turn()` (the permission prompt). Keys typed
during a turn are not echoed then: they wait in the tty and the next `read_line` reads (and echoes) them. The
original attributes come back when the context exits, on an exception or a cancellation too, and from an
`atexit` hook if the process ends without unwinding.

Ctrl-Z stops the client as it stops any program, with the terminal given its own mode back first (the shell gets
a sane terminal) and the client's mode put back on `fg`: at the prompt it arrives as a key (ISIG is off), during
a turn as SIGTSTP, which the context catches (main thread only). A line being typed is shown again after `fg`.

The parser holds an ESC until the byte after it; when ESC_TIMEOUT_S pass with nothing more, `read_line` takes it
as the Esc key (`InputParser.flush`), so a lone Esc never swallows the key typed after it. A terminal writes a
sequence, or a reply, in one go: the pause cannot fall inside one.

`detect_program_status()` writes the OSC 7501 query and then DA1; every terminal answers DA1, and answers in
order, so a 7501 reply first means supported and DA1 first (or nothing within 300 ms) means not. Replies are
swallowed whenever they arrive, before or after the decision, and what the person typed meanwhile waits for the
next `read_line`. If the DA1 reply is still outstanding when the context exits, it is waited for (at most
200 ms) so the restored, echoing tty does not print it.

`resolve_mode()` and `in_tmux()` decide whether to report program status at all.
"""

from __future__ import annotations

import atexit
import errno
import os
import select
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any, Literal, Self

import anyio

from ama_acp.client.terminal.line_editor import LineEditor
from ama_acp.client.terminal.tty_parser import (
    DeviceAttributesReply,
    Event,
    InputParser,
    Key,
    KeyName,
    ProgramStatusReply,
    Text,
)
from ama_acp.errors import ControlFlow

DETECT_TIMEOUT_S = 0.3
EXIT_DRAIN_S = 0.2
# Quiet after an ESC that makes it the Esc key. Terminals write a sequence in one go (tmux's own escape-time is
# 10 ms since 3.5); a person's next key after Esc comes later than this.
ESC_TIMEOUT_S = 0.1
PROBE = "\x1b]7501;?\x1b\\" + "\x1b[c"  # the OSC 7501 query, then DA1 (which every terminal answers)


_Attrs = list[Any]  # what termios.tcgetattr returns (typeshed's own type for it)
_Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None  # what signal.signal takes


class LineInterrupted(ControlFlow):
    """Ctrl-C while a line was being read; `text` is what had been typed."""

    def __init__(self, text: str = "") -> None:
        super().__init__("interrupted")
        self.text = text


def in_tmux(env: Mapping[str, str] | None = None) -> bool:
    """Inside tmux: TMUX is set and not empty."""
    return bool((os.environ if env is None else env).get("TMUX"))


def resolve_mode(mode: str, *, stdin_tty: bool, stdout_tty: bool, tmux: bool) -> Literal["on", "off", "detect"]:
    """`on` reports program status whatever the terminal (the encoder wraps it for tmux); `off` never; `auto`
    detects, except inside tmux or when stdin or stdout is not a terminal, where it is off."""
    if mode == "on":
        return "on"
    if mode == "off":
        return "off"
    if mode == "auto":
        return "detect" if stdin_tty and stdout_tty and not tmux else "off"
    raise ValueError(f"unknown program-status mode {mode!r} (on, off or auto)")


class TerminalInput:
    """A tty read by this process: `with TerminalInput(fd, write, flush) as term:` then `await term.read_line(…)`.

    `write` (and `flush`, if given, after each write) is where the prompt, the echo and the probe go: the same
    terminal, through whatever the caller writes its output with, so the two never interleave out of order."""

    read_size = 4096

    def __init__(self, fd: int, write: Callable[[str], object], flush: Callable[[], object] | None = None) -> None:
        self._fd = fd
        self._write, self._flush = write, flush
        self._parser = InputParser()
        self._pending: deque[Event] = deque()  # read but not yet used by a line (type-ahead)
        self._saved: _Attrs | None = None
        self._signals = False
        self._eof = False
        self._probe_open = False  # the probe was written and no reply has decided yet
        self._decision: bool | None = None
        self._awaiting_da1 = False
        self._stop_handler: _Handler = None  # SIGTSTP's handler before ours; None: ours is not installed
        self.program_status: bool | None = None  # what the last detection decided

    # --- the terminal mode ----------------------------------------------------------------------------

    def __enter__(self) -> Self:
        import termios

        if self._saved is not None:
            raise RuntimeError("this TerminalInput is already in use")
        if not os.isatty(self._fd):
            raise ValueError(f"file descriptor {self._fd} is not a terminal")
        self._saved = termios.tcgetattr(self._fd)
        atexit.register(self._restore)
        try:
            self._apply(signals=False)
            self._catch_stop()
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._awaiting_da1:
                self._drain(EXIT_DRAIN_S)
        finally:
            self._restore()

    def _apply(self, *, signals: bool) -> None:
        import termios

        assert self._saved is not None
        attrs = list(self._saved)
        attrs[6] = list(self._saved[6])
        attrs[0] &= ~(termios.ICRNL | termios.INLCR | termios.IGNCR | termios.ISTRIP)
        attrs[3] &= ~(termios.ICANON | termios.ECHO | termios.ECHONL | termios.IEXTEN | termios.ISIG)
        if signals:
            attrs[3] |= termios.ISIG
        attrs[6][termios.VMIN] = 1
        attrs[6][termios.VTIME] = 0
        termios.tcsetattr(self._fd, termios.TCSANOW, attrs)
        self._signals = signals

    def _restore(self) -> None:
        saved, self._saved = self._saved, None
        if saved is None:
            return
        atexit.unregister(self._restore)
        if self._stop_handler is not None:
            signal.signal(signal.SIGTSTP, self._stop_handler)
            self._stop_handler = None
        self._set_attrs(saved)

    def _set_attrs(self, attrs: _Attrs) -> None:
        import termios

        try:
            termios.tcsetattr(self._fd, termios.TCSANOW, attrs)
        except (OSError, termios.error):
            pass  # the terminal is gone (hung up, closed): nothing left to restore

    def set_signals(self, enabled: bool) -> None:
        """ISIG on (Ctrl-C is SIGINT) or off (Ctrl-C is a byte `read_line` reads); the rest of the mode stays."""
        self._require_open()
        if enabled != self._signals:
            self._apply(signals=enabled)

    @contextmanager
    def turn(self) -> Iterator[None]:
        """While a turn runs: Ctrl-C is SIGINT again; afterwards it is a byte again."""
        self.set_signals(True)
        try:
            yield
        finally:
            if self._saved is not None:
                self.set_signals(False)

    def _require_open(self) -> None:
        if self._saved is None:
            raise RuntimeError("use TerminalInput inside its `with` block")

    # --- Ctrl-Z -----------------------------------------------------------------------------------------

    def _catch_stop(self) -> None:
        if not hasattr(signal, "SIGTSTP"):
            return
        try:
            self._stop_handler = signal.signal(signal.SIGTSTP, self._on_stop)
        except ValueError:
            pass  # not the main thread: Ctrl-Z during a turn stops the process with the mode left as it is

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        self.suspend(whole_job=False)  # the terminal sent SIGTSTP to the whole job already

    def suspend(self, *, whole_job: bool = True) -> None:
        """Stop the process as Ctrl-Z does (with `whole_job`, the rest of its job too, as the terminal would),
        with the terminal's own mode given back first; the client's mode comes back when it continues."""
        if self._saved is None or not hasattr(signal, "SIGTSTP"):
            return
        self._set_attrs(self._saved)
        ours = signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        try:
            # The process stops here until SIGCONT (`fg`). An orphaned process group (no shell to resume it)
            # is not stopped at all: the kernel drops the signal.
            if whole_job:
                os.killpg(os.getpgrp(), signal.SIGTSTP)
            else:
                os.kill(os.getpid(), signal.SIGTSTP)
        finally:
            signal.signal(signal.SIGTSTP, ours)
            if self._saved is not None:
                self._apply(signals=self._signals)

    # --- reading --------------------------------------------------------------------------------------

    def _out(self, text: str) -> None:
        if not text:
            return
        try:
            self._write(text)
            if self._flush is not None:
                self._flush()
        except OSError as exc:
            if exc.errno != errno.EIO:
                raise
            # The terminal hung up: there is no screen left to write to, and reading now ends the input.

    def _read(self) -> bytes:
        try:
            return os.read(self._fd, self.read_size)
        except OSError as exc:
            if exc.errno == errno.EIO:  # Linux: the other end of the tty hung up
                return b""
            raise

    def _feed(self, data: bytes) -> None:
        self._take(self._parser.feed(data))

    def _take(self, events: list[Event]) -> None:
        """Replies are taken here (whenever they come), everything else waits for a line."""
        for event in events:
            if isinstance(event, ProgramStatusReply):
                if self._probe_open:
                    self._probe_open, self._decision = False, True
            elif isinstance(event, DeviceAttributesReply):
                self._awaiting_da1 = False
                if self._probe_open:
                    self._probe_open, self._decision = False, False
            else:
                self._pending.append(event)

    async def _fill(self) -> bool:
        """Wait for input and parse it; False at the end of input. A lone ESC followed by ESC_TIMEOUT_S of
        quiet is the Esc key."""
        if self._eof:
            return False
        if self._parser.holds_escape:
            with anyio.move_on_after(ESC_TIMEOUT_S) as quiet:
                await anyio.wait_readable(self._fd)
            if quiet.cancelled_caught:
                self._take(self._parser.flush())
                return True
        else:
            await anyio.wait_readable(self._fd)
        data = self._read()
        if not data:
            self._eof = True
            return False
        self._feed(data)
        return True

    def _drain(self, budget: float) -> None:
        """Read (blocking, at most `budget` seconds) until the outstanding DA1 reply has come."""
        deadline = time.monotonic() + budget
        while self._awaiting_da1 and not self._eof:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                ready, _, _ = select.select([self._fd], [], [], left)
                data = self._read() if ready else None
            except OSError:
                return
            if data is None:
                return
            if not data:
                self._eof = True
                return
            self._feed(data)

    async def detect_program_status(self, timeout: float = DETECT_TIMEOUT_S) -> bool:
        """Ask the terminal whether it reads OSC 7501 (see the module docstring); the answer is also kept in
        `program_status`."""
        self._require_open()
        self._decision = None
        self._probe_open = self._awaiting_da1 = True
        try:
            self._out(PROBE)
            with anyio.move_on_after(timeout):
                while self._probe_open and await self._fill():
                    pass
        finally:
            self._probe_open = False
        self.program_status = bool(self._decision)
        return self.program_status

    async def read_line(self, prompt: str) -> str | None:
        """Write `prompt`, read one line with echo and editing; None at Ctrl-D on an empty line or the end of
        input. Ctrl-C raises `LineInterrupted`. What follows the line's Enter stays for the next call."""
        self._require_open()
        restore_signals = self._signals
        if restore_signals:
            # Before the prompt shows: a Ctrl-C typed the moment it appears must be this line's, not a SIGINT.
            self.set_signals(False)
        self._out(prompt)
        try:
            return await self._edit(LineEditor(prompt, self._columns))
        finally:
            if restore_signals and self._saved is not None:
                self.set_signals(True)

    def _columns(self) -> int:
        try:
            return os.get_terminal_size(self._fd).columns
        except OSError:
            return 0

    async def _edit(self, line: LineEditor) -> str | None:
        echo: list[str] = []
        try:
            while True:
                if not self._pending:
                    self._out("".join(echo))
                    echo.clear()
                    if not await self._fill() and not self._pending:
                        echo.append("\n")
                        return None
                    continue
                event = self._pending.popleft()
                if isinstance(event, Text):
                    echo.append(line.insert(event.text))
                    continue
                if not isinstance(event, Key):
                    continue  # an escape sequence: never text, never echoed
                done = self._key(event.name, line, echo)
                if done:
                    return None if event.name == "ctrl-d" else line.text
        finally:
            self._out("".join(echo))

    def _key(self, key: KeyName, line: LineEditor, echo: list[str]) -> bool:
        """Act on one key while `line` is typed; True when the line is done (Enter, or Ctrl-D on it empty)."""
        match key:
            case "enter":
                echo.append("\n")
                return True
            case "ctrl-c":
                echo.append("^C\n")
                raise LineInterrupted(line.text)
            case "ctrl-d":
                if line.chars:
                    return False
                echo.append("\n")
                return True
            case "ctrl-z":
                echo.append("^Z\n")
                self._out("".join(echo))
                echo.clear()
                self.suspend()
                echo.append(line.redraw())
                return False
            case _:
                echo.append(line.rub_out(key))
                return False
