"""The line editor's output, as a terminal shows it (tests/support/vt_screen.py): erasing on a line wider than the
terminal leaves nothing of what was erased on any row (issue 24: Backspace on a wrapped line erased only the
cursor's row, since a backspace cannot climb to the row above)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.client.terminal.line_editor import LineEditor, backspaces, end_of
from ama_acp.client.terminal.tty_parser import KeyName
from tests.support.vt_screen import Screen


def typed(text: str, columns: int, prompt: str = "> ") -> tuple[LineEditor, Screen]:
    editor = LineEditor(prompt, lambda: columns)
    screen = Screen(columns).feed(prompt)
    for ch in text:
        screen.feed(editor.insert(ch))
    return editor, screen


def test_backspace_within_the_cursors_row_is_backspaces_as_before() -> None:
    editor, screen = typed("abcdefghijkl", 10)  # "> abcdefgh" / "ijkl"
    out = editor.rub_out("backspace")
    assert out == backspaces(1)
    assert screen.feed(out).lines() == ["> abcdefgh", "ijk"]


def test_backspace_across_the_row_boundary_erases_the_row_above() -> None:
    editor, screen = typed("abcdefghijkl", 10)
    for _ in range(5):
        screen.feed(editor.rub_out("backspace"))
    assert editor.text == "abcdefg"
    assert screen.lines() == ["> abcdefg"]
    screen.feed(editor.insert("X"))  # and the cursor is where the next character belongs
    assert screen.lines() == ["> abcdefgX"]


def test_backspace_with_the_cursor_waiting_at_the_right_edge() -> None:
    editor, screen = typed("abcdefgh", 10)  # exactly one full row: the terminal has not wrapped yet
    screen.feed(editor.rub_out("backspace"))
    assert screen.lines() == ["> abcdefg"]
    screen.feed(editor.insert("Y"))
    assert screen.lines() == ["> abcdefgY"]


def test_ctrl_u_and_ctrl_w_on_three_rows() -> None:
    editor, screen = typed("one two three four five six", 10)
    screen.feed(editor.rub_out("ctrl-w"))
    assert screen.lines() == ["> one two", "three four", " five"]
    screen.feed(editor.rub_out("ctrl-u"))
    assert editor.text == "" and screen.lines() == [">"]


def test_a_wide_character_that_wrapped_early() -> None:
    editor, screen = typed("abcdefg日", 10)  # 9 cells, then 2 that do not fit: the last cell of row 0 stays blank
    assert screen.lines() == ["> abcdefg", "日"]
    screen.feed(editor.rub_out("backspace"))
    assert screen.lines() == ["> abcdefg"]


def test_a_prompt_of_two_lines_draws_only_its_last_again() -> None:
    editor = LineEditor("first line\nAllow? ", lambda: 10)
    screen = Screen(10).feed("first line\r\nAllow? ")
    for ch in "abcdef":
        screen.feed(editor.insert(ch))
    for _ in range(4):
        screen.feed(editor.rub_out("backspace"))
    assert screen.lines() == ["first line", "Allow? ab"]


def test_no_width_known_is_backspaces() -> None:
    editor = LineEditor("> ", lambda: 0)  # a terminal that reports no size (a fresh pty)
    for ch in "abcdefghijkl":
        editor.insert(ch)
    assert editor.rub_out("ctrl-w") == backspaces(12)


def test_a_coloured_prompt_takes_only_its_visible_cells() -> None:
    editor = LineEditor("\x1b[1m>\x1b[0m ", lambda: 10)
    screen = Screen(10).feed("\x1b[1m>\x1b[0m ")
    for ch in "abcdefghij":
        screen.feed(editor.insert(ch))
    for _ in range(3):
        screen.feed(editor.rub_out("backspace"))
    assert screen.lines() == ["> abcdefg"]


def test_end_of() -> None:
    assert end_of([], 10) == (0, 0)
    assert end_of([1] * 10, 10) == (0, 10)  # waiting at the edge
    assert end_of([1] * 11, 10) == (1, 1)
    assert end_of([1] * 9 + [2], 10) == (1, 2)
    assert end_of([1, 0, 0, 1], 10) == (0, 2)


@pytest.mark.parametrize("columns", [5, 7, 10])
@given(
    text=st.text(st.sampled_from("ab 日\u0301x"), max_size=30),
    keys=st.lists(st.sampled_from(["backspace", "ctrl-w", "ctrl-u"]), max_size=6),
)
def test_the_screen_always_shows_the_prompt_and_the_text_left(columns: int, text: str, keys: list[KeyName]) -> None:
    editor, screen = typed(text, columns)
    for key in keys:
        screen.feed(editor.rub_out(key))
    expected = Screen(columns).feed("> " + editor.text)
    assert screen.lines() == expected.lines()
