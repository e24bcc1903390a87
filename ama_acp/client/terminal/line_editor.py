"""The line being typed at `ama acp-client`'s prompt, and what to write so the screen shows it: no I/O.

Typed text is echoed as it comes. Erasing (Backspace: one character and the marks on it; Ctrl-W: a word and the
spaces after it; Ctrl-U: everything) writes backspaces, blanks and backspaces while what goes stays on the
cursor's row. A backspace cannot climb to the row above, so when the erased text reaches back past the start of
the row (a line wider than the terminal), or the cursor waits at the right edge (the terminal wraps only when
the next character comes), the line is drawn again instead: up to the prompt's row, clear to the end of the
screen, the prompt and what is left. That needs the terminal's width (`columns`, asked at each erase since the
window may have been resized); with none known (0, as a fresh pty reports) the backspaces are all there is.

The rows are counted as a terminal with auto-wrap fills them: a character that does not fit in what is left of
a row goes to the next one (a wide one leaves the last cell blank), a combining mark takes no cell. The prompt
is taken to start a row (the client writes it on a fresh line); of a prompt with line breaks only the last line
is drawn again.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable

from ama_acp.client.terminal.tty_parser import KeyName

_STYLE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # a CSI (colour) in the prompt: no cell on the screen


def cells(ch: str) -> int:
    """Terminal cells a character takes (close enough for erasing what was echoed)."""
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def end_of(widths: Iterable[int], columns: int) -> tuple[int, int]:
    """The row and column after writing characters of these widths from the start of row 0 with auto-wrap.
    Column `columns` means the cursor waits at the right edge (the wrap happens with the next character)."""
    row = col = 0
    for width in widths:
        if not width:
            continue
        if col + width > columns:
            row, col = row + 1, 0
        col += width
    return row, col


def backspaces(count: int) -> str:
    """Erase `count` cells left of the cursor, on its row."""
    return "\b" * count + " " * count + "\b" * count


class LineEditor:
    """One line being typed after `prompt`; each method returns what to write to the terminal."""

    def __init__(self, prompt: str, columns: Callable[[], int]) -> None:
        self.chars: list[str] = []
        self._row_prompt = prompt.rpartition("\n")[2]  # what is on the line's first row before the text
        self._prompt_widths = [cells(ch) for ch in _STYLE.sub("", self._row_prompt)]
        self._columns = columns

    @property
    def text(self) -> str:
        return "".join(self.chars)

    def insert(self, text: str) -> str:
        self.chars.append(text)
        return text

    def rub_out(self, key: KeyName) -> str:
        """Remove what `key` (backspace, ctrl-w or ctrl-u) removes; what erases it from the screen."""
        columns = self._columns()
        before = self._end(columns)
        erased = _rub_out(self.chars, key)
        if not erased:
            return ""
        if columns <= 0:
            return backspaces(erased)
        after = self._end(columns)
        if after[0] == before[0] and before[1] < columns:
            return backspaces(erased)
        return self._redraw(before[0])

    def redraw(self) -> str:
        """The prompt's row and the text again, on a fresh row (after the client was suspended and resumed)."""
        return self._row_prompt + self.text

    def _end(self, columns: int) -> tuple[int, int]:
        return end_of([*self._prompt_widths, *(cells(ch) for ch in self.chars)], max(columns, 1))

    def _redraw(self, row: int) -> str:
        up = f"\x1b[{row}A" if row else ""
        return f"\r{up}\x1b[J{self._row_prompt}{self.text}"


def _rub_out(chars: list[str], key: KeyName) -> int:
    """Remove from `chars` what backspace (one character and the marks on it), ctrl-w (a word and the spaces
    after it) or ctrl-u (everything) removes; returns the cells to erase."""
    erased = 0
    if key == "ctrl-u":
        erased = sum(cells(ch) for ch in chars)
        chars.clear()
    elif key == "ctrl-w":
        while chars and chars[-1].isspace():
            erased += cells(chars.pop())
        while chars and not chars[-1].isspace():
            erased += cells(chars.pop())
    else:
        while chars:
            width = cells(chars.pop())
            erased += width
            if width:
                break
    return erased
