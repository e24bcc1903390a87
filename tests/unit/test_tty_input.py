"""The terminal input side of acp-client (issue 14): the input parser, OSC 7501 detection against a fake
terminal (a pty whose master side the test plays), line editing, and the terminal mode and its restoration."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.client.terminal.tty_input import PROBE, LineInterrupted, TerminalInput, in_tmux, resolve_mode
from ama_acp.client.terminal.tty_parser import (
    MAX_SEQUENCE_BYTES,
    MAX_STRING_BYTES,
    DeviceAttributesReply,
    Event,
    IgnoredSequence,
    InputParser,
    Key,
    ProgramStatusReply,
    SequenceKind,
    Text,
)
from ama_acp.errors import ControlFlow
from tests.support.hypothesis_profiles import examples

posix = pytest.mark.skipif(sys.platform == "win32", reason="ttys and termios are POSIX")

STATUS = b"\x1b]7501;?\x1b\\"
DA1 = b"\x1b[?62;22c"
END = b"\x00<end of test>"


def parse(data: bytes) -> list[Event]:
    return InputParser().feed(data)


def text_of(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, Text))


# --- the parser: one example per kind of sequence --------------------------------------------------------


def test_text_and_keys() -> None:
    events = parse(b"a\tb\r\n\n\r\x7f\x08\x03\x04\x15\x17\x01")
    assert events == [
        Text("a"),
        Text(" "),
        Text("b"),
        Key("enter"),  # \r\n is one enter
        Key("enter"),
        Key("enter"),
        Key("backspace"),
        Key("backspace"),
        Key("ctrl-c"),
        Key("ctrl-d"),
        Key("ctrl-u"),
        Key("ctrl-w"),
        IgnoredSequence("control", b"\x01"),
    ]


def test_a_crlf_pair_split_across_reads_is_one_enter() -> None:
    parser = InputParser()
    assert parser.feed(b"x\r") == [Text("x"), Key("enter")]
    assert parser.feed(b"\ny") == [Text("y")]


def test_program_status_replies_end_with_bel_or_st() -> None:
    assert parse(b"\x1b]7501;?:future=1\x1b\\") == [ProgramStatusReply(":future=1")]
    assert parse(b"\x1b]7501;?\x07") == [ProgramStatusReply("")]
    # Our own report echoed back, or another OSC, is not a reply to the query.
    assert parse(b"\x1b]7501;state=idle\x1b\\") == [IgnoredSequence("osc", b"\x1b]7501;state=idle\x1b\\")]


def test_device_attributes_replies() -> None:
    assert parse(DA1) == [DeviceAttributesReply((62, 22))]
    assert parse(b"\x1b[?c") == [DeviceAttributesReply(())]
    assert parse(b"\x1b[>1;2c") == [IgnoredSequence("csi", b"\x1b[>1;2c")]  # DA2 is not DA1
    assert parse(b"\x1b[?1;2$c") == [IgnoredSequence("csi", b"\x1b[?1;2$c")]


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"\x1b[A", "csi"),
        (b"\x1b[1;5C", "csi"),
        (b"\x1b[200~", "csi"),
        (b"\x1bOP", "ss3"),
        (b"\x1b]11;rgb:0000/0000/0000\x07", "osc"),
        (b"\x1b]52;c;aGVsbG8=\x1b\\", "osc"),
        (b"\x1bP1$r0m\x1b\\", "dcs"),
        (b"\x1b_Gi=1;OK\x1b\\", "apc"),
        (b"\x1b^private\x1b\\", "pm"),
        (b"\x1bXstring\x1b\\", "sos"),
        (b"\x1bb", "esc"),
        (b"\x1b(B", "esc"),
        (b"\x1b\\", "esc"),
    ],
)
def test_other_sequences_are_ignored_never_text(data: bytes, kind: SequenceKind) -> None:
    assert parse(data) == [IgnoredSequence(kind, data)]


def test_bracketed_paste_markers_are_ignored_and_the_paste_stays_text() -> None:
    events = parse(b"\x1b[200~hi there\x1b[201~")
    assert text_of(events) == "hi there"
    assert [e for e in events if not isinstance(e, Text)] == [
        IgnoredSequence("csi", b"\x1b[200~"),
        IgnoredSequence("csi", b"\x1b[201~"),
    ]


def test_a_sequence_cut_short_gives_its_byte_back() -> None:
    assert parse(b"\x1b[1\x03") == [IgnoredSequence("csi", b"\x1b[1"), Key("ctrl-c")]
    assert parse(b"\x1b\r") == [IgnoredSequence("esc", b"\x1b"), Key("enter")]
    assert parse(b"\x1b\x1b[A") == [IgnoredSequence("esc", b"\x1b"), IgnoredSequence("csi", b"\x1b[A")]
    # ESC inside a string without `\` ends the string and starts a sequence of its own.
    assert parse(b"\x1b]0;t\x1b[B") == [IgnoredSequence("osc", b"\x1b]0;t"), IgnoredSequence("csi", b"\x1b[B")]
    # CAN cancels a string and is consumed with it.
    assert parse(b"\x1b]0;t\x18a") == [IgnoredSequence("osc", b"\x1b]0;t"), Text("a")]


def test_enter_and_ctrl_c_still_work_after_a_stray_string_introducer() -> None:
    """Alt+] sends ESC ] in some terminals; what the person types next must not vanish into it forever."""
    events = parse(b"\x1b]hello\r")
    assert events == [IgnoredSequence("osc", b"\x1b]hello"), Key("enter")]
    assert parse(b"\x1bPabc\x03")[-1] == Key("ctrl-c")


def test_utf8_split_and_invalid() -> None:
    parser = InputParser()
    assert parser.feed(b"\xe6") == []
    assert parser.feed(b"\x97") == []
    assert parser.feed(b"\xa5!") == [Text("日"), Text("!")]
    assert text_of(parse(b"\xff\xe2\x82A\xed\xa0\x80\xc0\xaf")) == b"\xff\xe2\x82A\xed\xa0\x80\xc0\xaf".decode(
        "utf-8", "replace"
    )
    # An escape sequence in the middle of a character: the character is invalid, the sequence still ignored.
    assert parse(b"\xe6\x97\x1b[A") == [Text("\ufffd"), IgnoredSequence("csi", b"\x1b[A")]


def test_c1_controls_sent_as_utf8_are_not_text() -> None:
    assert parse("a\u009bb".encode()) == [Text("a"), IgnoredSequence("control", b"\xc2\x9b"), Text("b")]


def test_an_unterminated_string_is_dropped_and_parsing_goes_on() -> None:
    parser = InputParser()
    events = parser.feed(b"\x1b]7501;?")
    for _ in range(100):
        events += parser.feed(b"a" * 1000)
        assert parser.buffered <= MAX_STRING_BYTES + 2
    events += parser.feed(b"\x1b\\ok")
    (dropped,) = (e for e in events if not isinstance(e, Text))
    assert isinstance(dropped, IgnoredSequence) and dropped.truncated and dropped.kind == "osc"
    assert len(dropped.data) <= MAX_STRING_BYTES + 4
    assert text_of(events) == "ok"  # not a reply: it was too long to be one


def test_a_long_csi_is_consumed_to_its_final_byte() -> None:
    parser = InputParser()
    events = parser.feed(b"\x1b[?" + b"1;" * 10_000)
    assert events == [] and parser.buffered <= MAX_SEQUENCE_BYTES + 1
    events = parser.feed(b"cX")
    assert isinstance(events[0], IgnoredSequence)
    assert events[0] == IgnoredSequence("csi", events[0].data, truncated=True)
    assert events[1:] == [Text("X")]


def test_hostile_input_is_parsed_in_linear_time() -> None:
    hostile = b"\x1b[" * 40_000 + b"\x1b]" + b"x" * 100_000 + b"\x1bP" * 20_000 + b"\xf0\x9f" * 20_000
    start = time.monotonic()
    events = parse(hostile)
    assert time.monotonic() - start < 10.0
    assert not any(isinstance(e, Text) and e.text not in ("\ufffd",) for e in events)


# --- the parser: properties ------------------------------------------------------------------------------

typed = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=20)
string_body = st.binary(max_size=60).map(lambda b: bytes(x for x in b if x >= 0x20 and x != 0x7F))
terminator = st.sampled_from([b"\x07", b"\x1b\\"])
status_reply = st.tuples(string_body, terminator).map(lambda t: ("status", b"\x1b]7501;?" + t[0] + t[1], t[0]))
da1_reply = st.lists(st.integers(0, 9999), max_size=6).map(
    lambda ps: ("da1", b"\x1b[?" + ";".join(map(str, ps)).encode() + b"c", tuple(ps))
)
other_sequence = st.sampled_from(
    [
        b"\x1b[A",
        b"\x1b[1;5D",
        b"\x1bOQ",
        b"\x1b[200~",
        b"\x1b]11;rgb:ffff/ffff/ffff\x07",
        b"\x1bP1$r0m\x1b\\",
        b"\x1b_Gi=1;OK\x1b\\",
        b"\x1b[?2004;1$y",
    ]
).map(lambda b: ("other", b, None))
item = st.one_of(typed.map(lambda t: ("text", t.encode(), t)), status_reply, da1_reply, other_sequence)


@given(st.lists(item, max_size=30))
@settings(max_examples=examples(300), deadline=None)
def test_replies_never_become_text_and_texts_keep_their_order(items: list[tuple[str, bytes, object]]) -> None:
    events = parse(b"".join(raw for _, raw, _ in items))
    assert text_of(events) == "".join(str(v) for k, _, v in items if k == "text")
    statuses = [e.body for e in events if isinstance(e, ProgramStatusReply)]
    assert statuses == [v.decode("utf-8", "replace") for k, _, v in items if k == "status" and isinstance(v, bytes)]
    assert [e.params for e in events if isinstance(e, DeviceAttributesReply)] == [v for k, _, v in items if k == "da1"]
    assert not any(isinstance(e, Key) for e in events)


def _interleaved() -> st.SearchStrategy[bytes]:
    return st.lists(item, max_size=12).map(lambda items: b"".join(raw for _, raw, _ in items))


@given(st.one_of(st.binary(max_size=300), _interleaved()), st.data())
@settings(max_examples=examples(300), deadline=None)
def test_any_split_gives_the_same_events(data: bytes, draw: st.DataObject) -> None:
    cuts = sorted(draw.draw(st.lists(st.integers(0, len(data)), max_size=12)))
    parser = InputParser()
    events: list[Event] = []
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
        events += parser.feed(data[a:b])
    assert events == parse(data)


@given(st.lists(st.binary(max_size=2000), max_size=8))
@settings(max_examples=examples(200), deadline=None)
def test_arbitrary_bytes_never_raise_and_memory_stays_bounded(chunks: list[bytes]) -> None:
    parser = InputParser()
    for chunk in chunks:
        for event in parser.feed(chunk):
            if isinstance(event, IgnoredSequence):
                assert len(event.data) <= MAX_STRING_BYTES + 4
            if isinstance(event, Text):
                assert "\x1b" not in event.text and len(event.text) == 1
        assert parser.buffered <= MAX_STRING_BYTES + 2


@given(st.binary(max_size=200).map(lambda b: bytes(x for x in b if x >= 0x20 and x != 0x7F)))
@settings(max_examples=examples(300), deadline=None)
def test_text_decodes_as_python_does(data: bytes) -> None:
    expected = "".join(ch for ch in data.decode("utf-8", "replace") if not "\x80" <= ch <= "\x9f")
    # The Enter after it settles a character left incomplete at the end (the parser waits for more otherwise).
    assert text_of(parse(data + b"\r")) == expected


# --- mode resolution ---------------------------------------------------------------------------------------


def test_resolve_mode() -> None:
    ttys = {"stdin_tty": True, "stdout_tty": True}
    assert resolve_mode("on", stdin_tty=False, stdout_tty=False, tmux=True) == "on"
    assert resolve_mode("off", **ttys, tmux=False) == "off"
    assert resolve_mode("auto", **ttys, tmux=False) == "detect"
    assert resolve_mode("auto", **ttys, tmux=True) == "off"
    assert resolve_mode("auto", stdin_tty=False, stdout_tty=True, tmux=False) == "off"
    assert resolve_mode("auto", stdin_tty=True, stdout_tty=False, tmux=False) == "off"
    with pytest.raises(ValueError, match="sometimes"):
        resolve_mode("sometimes", **ttys, tmux=False)


def test_in_tmux() -> None:
    assert in_tmux({"TMUX": "/tmp/tmux-1000/default,1234,0"})
    assert not in_tmux({"TMUX": ""})
    assert not in_tmux({})


def test_line_interrupted_is_control_flow() -> None:
    assert issubclass(LineInterrupted, ControlFlow)
    assert LineInterrupted("ab").text == "ab"


# --- a fake terminal: the test plays the terminal on a pty's master side ---------------------------------------


class Screen:
    """Everything the program wrote to its tty, read from the master side as it comes."""

    def __init__(self, master: int, slave: int) -> None:
        self.master, self.slave = master, slave
        self.data = bytearray()
        self._changed = anyio.Event()

    async def run(self) -> None:
        while True:
            await anyio.wait_readable(self.master)
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                return
            self.data += chunk
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_for(self, needle: bytes) -> None:
        with anyio.fail_after(5):
            while needle not in self.data:
                await self._changed.wait()

    def type(self, data: bytes) -> None:
        os.write(self.master, data)


@contextmanager
def pty_pair() -> Iterator[tuple[int, int]]:
    master, slave = os.openpty()
    try:
        yield master, slave
    finally:
        for fd in (slave, master):
            try:
                os.close(fd)
            except OSError:
                pass


def terminal_for(slave: int) -> TerminalInput:
    return TerminalInput(slave, lambda s: os.write(slave, s.encode("utf-8")))


def play(scenario: Callable[[TerminalInput, Screen], Awaitable[None]]) -> bytes:
    """Run `scenario` with a TerminalInput on a pty slave and a Screen on its master; returns what was shown."""

    async def main() -> bytes:
        with pty_pair() as (master, slave):
            screen = Screen(master, slave)
            async with anyio.create_task_group() as tg:
                tg.start_soon(screen.run)
                with anyio.fail_after(10), terminal_for(slave) as term:
                    await scenario(term, screen)
                    # The tty keeps order: once this marker is on the screen, so is everything written before.
                    os.write(slave, END)
                    await screen.wait_for(END)
                tg.cancel_scope.cancel()
            shown, _, _ = bytes(screen.data).partition(END)
            return shown

    return anyio.run(main)


async def answer_probe(screen: Screen, reply: bytes, byte_by_byte: bool = False) -> None:
    await screen.wait_for(PROBE.encode())
    if not byte_by_byte:
        screen.type(reply)
        return
    for i in range(len(reply)):
        screen.type(reply[i : i + 1])
        await anyio.lowlevel.checkpoint()  # a yield: the reader may take each byte alone (it reads 1 at a time)


def expect_shown(shown: bytes, prompt: str, echoed: str) -> None:
    assert shown == PROBE.encode() + prompt.encode() + echoed.encode() + b"\r\n"


@posix
@pytest.mark.parametrize("byte_by_byte", [False, True])
def test_a_status_reply_first_means_supported(byte_by_byte: bool) -> None:
    async def scenario(term: TerminalInput, screen: Screen) -> None:
        if byte_by_byte:
            term.read_size = 1
        async with anyio.create_task_group() as tg:
            # The person types while the replies arrive: "hel" between them, "lo" and Enter after.
            tg.start_soon(answer_probe, screen, STATUS + b"hel" + DA1 + b"lo\r", byte_by_byte)
            assert await term.detect_program_status() is True
        assert term.program_status is True
        assert await term.read_line("» ") == "hello"

    expect_shown(play(scenario), "» ", "hello")


@posix
def test_device_attributes_first_means_not_supported() -> None:
    async def scenario(term: TerminalInput, screen: Screen) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(answer_probe, screen, DA1 + b"hello\r")
            assert await term.detect_program_status() is False
        assert await term.read_line("» ") == "hello"

    expect_shown(play(scenario), "» ", "hello")


@posix
def test_no_answer_means_not_supported_after_300_ms() -> None:
    async def scenario(term: TerminalInput, screen: Screen) -> None:
        start = time.monotonic()
        assert await term.detect_program_status() is False
        assert 0.25 <= time.monotonic() - start < 2.0
        screen.type(b"hello\r")
        assert await term.read_line("» ") == "hello"

    expect_shown(play(scenario), "» ", "hello")


@posix
def test_late_replies_are_swallowed_by_the_next_line() -> None:
    async def scenario(term: TerminalInput, screen: Screen) -> None:
        assert await term.detect_program_status(timeout=0.3) is False
        screen.type(b"\x1b]7501;?:late=1\x1b\\" + DA1 + b"hello\r")
        assert await term.read_line("» ") == "hello"
        assert term.program_status is False  # the decision stands

    expect_shown(play(scenario), "» ", "hello")


@posix
def test_an_outstanding_device_attributes_reply_is_swallowed_at_exit() -> None:
    """The status reply decided; DA1 comes after. Leaving the context must not hand it to the echoing tty."""

    async def main() -> bytes:
        with pty_pair() as (master, slave):
            screen = Screen(master, slave)
            async with anyio.create_task_group() as tg:
                tg.start_soon(screen.run)
                with terminal_for(slave) as term:
                    tg.start_soon(answer_probe, screen, STATUS)
                    assert await term.detect_program_status() is True
                    screen.type(DA1)
                # Restored (ECHO and ICANON on again): anything left unread would be echoed or read by the shell.
                assert not _readable(slave)
                os.write(slave, END)
                await screen.wait_for(END)
                tg.cancel_scope.cancel()
            return bytes(screen.data)

    assert anyio.run(main) == PROBE.encode() + END


def _readable(fd: int) -> bool:
    import select

    return bool(select.select([fd], [], [], 0)[0])


# --- line editing -------------------------------------------------------------------------------------------


class Typing:
    """A scenario: the person types `keys`, the program reads `count` lines."""

    def __init__(self, keys: bytes, count: int = 1) -> None:
        self.keys, self.count = keys, count
        self.lines: list[str | None] = []

    async def __call__(self, term: TerminalInput, screen: Screen) -> None:
        screen.type(self.keys)
        for _ in range(self.count):
            self.lines.append(await term.read_line("> "))


@posix
@pytest.mark.parametrize(
    ("keys", "line", "echo"),
    [
        (b"helo\x7f\x7fllo\r", "hello", "helo\b \b\b \bllo\r\n"),
        ("日本\x7fx\r".encode(), "日x", "日本\b\b  \b\bx\r\n"),
        ("e\u0301\x7f\r".encode(), "", "e\u0301\b \b\r\n"),
        (b"abc\x15xy\r", "xy", "abc\b\b\b   \b\b\bxy\r\n"),
        (b"foo bar\x17baz\n", "foo baz", "foo bar\b\b\b   \b\b\bbaz\r\n"),
        (b"a\x1b[Db\x1bOA\x1b]0;x\x07\r", "ab", "ab\r\n"),
        (b"\x7fx\x04\r", "x", "x\r\n"),
    ],
)
def test_editing(keys: bytes, line: str, echo: str) -> None:
    scenario = Typing(keys)
    shown = play(scenario)
    assert scenario.lines == [line]
    assert shown == b"> " + echo.encode()


@posix
def test_type_ahead_is_kept_for_the_next_line() -> None:
    scenario = Typing(b"one\rtwo\r", count=2)
    shown = play(scenario)
    assert scenario.lines == ["one", "two"]
    assert shown == b"> one\r\n> two\r\n"


@posix
def test_ctrl_d_on_an_empty_line_is_eof() -> None:
    scenario = Typing(b"\x04")
    assert play(scenario) == b"> \r\n"
    assert scenario.lines == [None]


@posix
def test_ctrl_c_interrupts_the_line() -> None:
    async def scenario(term: TerminalInput, screen: Screen) -> None:
        screen.type(b"ab\x03")
        with pytest.raises(LineInterrupted) as caught:
            await term.read_line("> ")
        assert caught.value.text == "ab"

    assert play(scenario) == b"> ab^C\r\n"


@posix
def test_the_end_of_input_is_eof() -> None:
    async def main() -> None:
        master, slave = os.openpty()
        try:
            with anyio.fail_after(5), terminal_for(slave) as term:
                os.close(master)
                assert await term.read_line("> ") is None
                assert await term.read_line("> ") is None
        finally:
            os.close(slave)

    anyio.run(main)


# --- the terminal mode ----------------------------------------------------------------------------------------


@posix
def test_the_mode_while_reading_and_during_a_turn() -> None:
    import termios

    with pty_pair() as (_master, slave):
        with terminal_for(slave) as term:
            iflag, oflag, _c, lflag, _i, _o, cc = termios.tcgetattr(slave)
            assert not lflag & (termios.ICANON | termios.ECHO | termios.ISIG | termios.IEXTEN)
            assert not iflag & (termios.ICRNL | termios.ISTRIP)
            assert oflag & termios.OPOST
            assert (cc[termios.VMIN], cc[termios.VTIME]) == (1, 0)
            with term.turn():
                lflag = termios.tcgetattr(slave)[3]
                assert lflag & termios.ISIG and not lflag & (termios.ICANON | termios.ECHO)
            assert not termios.tcgetattr(slave)[3] & termios.ISIG


@posix
def test_read_line_during_a_turn_reads_ctrl_c_as_a_key_then_gives_signals_back() -> None:
    import termios

    async def scenario(term: TerminalInput, screen: Screen) -> None:
        with term.turn():
            screen.type(b"y\r")
            assert await term.read_line("allow? ") == "y"
            assert termios.tcgetattr(screen.slave)[3] & termios.ISIG

    play(scenario)


@posix
def test_the_attributes_come_back_after_the_context() -> None:
    import termios

    with pty_pair() as (_master, slave):
        before = termios.tcgetattr(slave)
        with terminal_for(slave):
            assert termios.tcgetattr(slave) != before
        assert termios.tcgetattr(slave) == before
        with pytest.raises(RuntimeError, match="boom"), terminal_for(slave):
            raise RuntimeError("boom")
        assert termios.tcgetattr(slave) == before


@posix
def test_the_attributes_come_back_after_a_cancelled_read() -> None:
    import termios

    async def main() -> None:
        with pty_pair() as (_master, slave):
            before = termios.tcgetattr(slave)
            with anyio.move_on_after(0.05) as scope, terminal_for(slave) as term, term.turn():
                await term.read_line("> ")
            assert scope.cancelled_caught
            assert termios.tcgetattr(slave) == before

    anyio.run(main)


@posix
def test_the_attributes_come_back_at_exit_without_unwinding() -> None:
    """A process that ends with the context still entered (no `with` unwinding) restores through atexit."""
    import termios

    child = textwrap.dedent(
        """
        import sys
        from ama_acp.client.terminal.tty_input import TerminalInput
        TerminalInput(0, sys.stdout.write).__enter__()
        """
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with pty_pair() as (_master, slave):
        before = termios.tcgetattr(slave)
        subprocess.run([sys.executable, "-c", child], stdin=slave, cwd=root, check=True, timeout=60)
        assert termios.tcgetattr(slave) == before


def test_the_context_refuses_what_is_not_a_terminal() -> None:
    read, write = os.pipe()
    try:
        with pytest.raises(ValueError, match="not a terminal"), TerminalInput(read, lambda s: None):
            pass
    finally:
        os.close(read)
        os.close(write)


# --- issue 24: a lone Esc, Backspace on a wrapped line, Ctrl-Z ------------------------------------------------


def test_flush_makes_a_held_lone_esc_the_esc_key_and_keeps_a_cut_reply_whole() -> None:
    parser = InputParser()
    assert (parser.feed(b"\x1b"), parser.holds_escape) == ([], True)
    assert (parser.flush(), parser.holds_escape) == ([IgnoredSequence("esc", b"\x1b")], False)
    assert parser.feed(b"a") == [Text("a")]  # the key after Esc is its own
    assert parser.feed(b"\x1b[?62") == [] and parser.flush() == []  # a reply cut between reads stays held
    assert parser.feed(b";22c") == [DeviceAttributesReply((62, 22))]
    assert parser.feed(b"\x1ba") == [IgnoredSequence("esc", b"\x1ba")]  # Alt+a, sent in one go, is still Alt+a


@posix
def test_a_lone_esc_does_not_swallow_the_next_key() -> None:
    lines: list[str | None] = []

    async def scenario(term: TerminalInput, screen: Screen) -> None:
        flushed = anyio.Event()
        real_flush = term._parser.flush

        def flush() -> list[Event]:
            events = real_flush()
            if events:
                flushed.set()
            return events

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(term._parser, "flush", flush)
            screen.type(b"\x1b")  # Esc, and nothing after it for a while
            async with anyio.create_task_group() as tg:

                async def read() -> None:
                    lines.append(await term.read_line("> "))

                tg.start_soon(read)
                await flushed.wait()  # the reader took it as the Esc key after ESC_TIMEOUT_S of quiet
                screen.type(b"a\r")

    assert play(scenario) == b"> a\r\n"
    assert lines == ["a"]


@posix
def test_backspace_on_a_line_wider_than_the_terminal_erases_it_on_every_row() -> None:
    import fcntl
    import struct
    import termios

    from tests.support.vt_screen import Screen as VtScreen

    scenario = Typing(b"abcdefghijkl" + b"\x7f" * 5 + b"\r")

    async def narrow(term: TerminalInput, screen: Screen) -> None:
        fcntl.ioctl(screen.slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 10, 0, 0))
        await scenario(term, screen)

    shown = play(narrow)
    assert scenario.lines == ["abcdefg"]
    assert VtScreen(10).feed(shown.decode()).lines() == ["> abcdefg"]


@posix
def test_ctrl_z_at_the_prompt_suspends_then_shows_the_line_again(monkeypatch: pytest.MonkeyPatch) -> None:
    suspended: list[bool] = []
    monkeypatch.setattr(TerminalInput, "suspend", lambda self, whole_job=True: suspended.append(whole_job))
    scenario = Typing(b"ab\x1acd\r")
    assert play(scenario) == b"> ab^Z\r\n> abcd\r\n"
    assert scenario.lines == ["abcd"] and suspended == [True]


@posix
def test_sigtstp_is_caught_inside_the_context_only() -> None:
    import signal

    before = signal.getsignal(signal.SIGTSTP)
    with pty_pair() as (_master, slave), terminal_for(slave) as term:
        assert signal.getsignal(signal.SIGTSTP) == term._on_stop
    assert signal.getsignal(signal.SIGTSTP) == before
