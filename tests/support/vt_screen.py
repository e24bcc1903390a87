"""What a terminal shows for the bytes a line editor writes: a grid of cells as xterm fills it, for the few
controls an editor uses (text with auto-wrap, BS, CR, LF, `ESC [ n A` up, `ESC [ J` clear below, `ESC [ K`).

Auto-wrap is xterm's: after the last column the cursor waits there (the wrap happens with the next character),
a wide character that does not fit goes to the next row, and BS never climbs to the row above. Other escape
sequences (colours) are skipped. Enough to see what is left on the screen after erasing, not a terminal."""

from __future__ import annotations

import re
import unicodedata

_CSI = re.compile(r"\x1b\[([0-9;?]*)([ -/]*[@-~])")


def _width(ch: str) -> int:
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


class Screen:
    def __init__(self, columns: int) -> None:
        self.columns = columns
        self.rows: list[list[str]] = [[]]
        self.row = self.col = 0  # col == columns: waiting at the right edge

    def feed(self, text: str) -> Screen:
        i = 0
        while i < len(text):
            match = _CSI.match(text, i)
            if match:
                self._csi(match.group(1), match.group(2))
                i = match.end()
                continue
            self._char(text[i])
            i += 1
        return self

    def lines(self) -> list[str]:
        """Each row's text, trailing blanks dropped, empty rows at the end dropped."""
        out = ["".join(cell for cell in row if cell is not None).rstrip() for row in self.rows]
        while out and not out[-1]:
            out.pop()
        return out

    def _cells(self, row: int) -> list[str]:
        while len(self.rows) <= row:
            self.rows.append([])
        cells = self.rows[row]
        if len(cells) < self.columns:
            cells.extend(" " * (self.columns - len(cells)))
        return cells

    def _char(self, ch: str) -> None:
        if ch == "\b":
            self.col = max(0, min(self.col, self.columns - 1) - 1)
        elif ch == "\r":
            self.col = 0
        elif ch == "\n":
            self.row += 1
            self._cells(self.row)
        elif ch == "\x1b" or ord(ch) < 0x20:
            pass
        else:
            width = _width(ch)
            if not width:
                return
            if self.col + width > self.columns:
                self.row, self.col = self.row + 1, 0
            cells = self._cells(self.row)
            cells[self.col] = ch
            for extra in range(1, width):
                cells[self.col + extra] = ""  # the wide character's second cell
            self.col += width

    def _csi(self, params: str, final: str) -> None:
        count = int(params) if params.isdigit() else 1
        if final == "A":
            self.row = max(0, self.row - count)
            self.col = min(self.col, self.columns - 1)
        elif final == "J":
            cells = self._cells(self.row)
            cells[self.col :] = " " * (self.columns - self.col)
            del self.rows[self.row + 1 :]
        elif final == "K":
            cells = self._cells(self.row)
            cells[self.col :] = " " * (self.columns - self.col)
