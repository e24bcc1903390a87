"""rpc/framing.py: bytes ↔ lines. Reads are cut wherever the test says (one chunk per receive), so every
boundary case is exact: a line across reads, CRLF, blank lines, the size limit, EOF, bytes that are not UTF-8,
and one write per message on the way out."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import ByteReceiveStream, ByteSendStream

from ama_acp.rpc.framing import LineTooLong, LineWriter, read_lines
from tests.support.byte_pipe import chunks_of

pytestmark = pytest.mark.anyio


async def lines(*chunks: bytes, max_line: int = 1 << 20) -> list[bytes]:
    return [line async for line in read_lines(await chunks_of(*chunks), max_line=max_line)]


# --- reading -------------------------------------------------------------------------------------------------


async def test_a_line_cut_across_reads_is_joined():
    assert await lines(b'{"a"', b":1}\n", b'{"b":', b"2", b"}\n") == [b'{"a":1}', b'{"b":2}']


async def test_many_lines_in_one_read_and_a_line_finished_in_the_next():
    assert await lines(b"one\ntwo\nthr", b"ee\nfour\n") == [b"one", b"two", b"three", b"four"]


async def test_a_newline_alone_in_a_read_ends_the_pending_line():
    assert await lines(b"abc", b"\n", b"def", b"\n") == [b"abc", b"def"]


async def test_a_utf8_character_cut_across_reads_is_whole_again():
    text = "é ✓ 𝄞".encode()
    assert await lines(text[:1], text[1:5], text[5:] + b"\n") == [text]


async def test_crlf_ends_a_line_and_only_one_cr_is_stripped():
    assert await lines(b"a\r\n", b"b\r", b"\n", b"c\r\r\n") == [b"a", b"b", b"c\r"]


async def test_a_cr_inside_a_line_is_kept():
    assert await lines(b'{"x":"a\rb"}\n') == [b'{"x":"a\rb"}']


async def test_blank_and_whitespace_lines_are_skipped():
    assert await lines(b"\n\n", b"  \t\n", b"\r\n", b"x\n", b"\n") == [b"x"]


async def test_eof_after_a_newline_yields_nothing_more():
    assert await lines(b"a\n") == [b"a"]


async def test_a_last_line_without_its_newline_still_counts():
    assert await lines(b"a\n", b"b") == [b"a", b"b"]
    assert await lines(b"a\nb\r") == [b"a", b"b"]


async def test_trailing_whitespace_without_newline_at_eof_is_no_line():
    assert await lines(b"a\n", b"  \r") == [b"a"]


async def test_no_input_at_all_is_no_line():
    assert await lines() == []


async def test_bytes_that_are_not_utf8_pass_through_unchanged():
    """Framing is byte-level: only 0x0A splits; decoding (and its -32700) is the peer's job."""
    assert await lines(b"\xff\xfe not utf-8\n", b"\xc3\n") == [b"\xff\xfe not utf-8", b"\xc3"]


async def test_a_pending_line_over_the_limit_raises():
    reader = await chunks_of(b"ok\n", b"123456789")  # 9 bytes and no newline yet, limit 8
    got: list[bytes] = []
    with pytest.raises(LineTooLong):
        async for line in read_lines(reader, max_line=8):
            got.append(line)
    assert got == [b"ok"]  # what came before the long line was delivered


async def test_a_line_at_the_limit_is_read():
    assert await lines(b"12345678\n", b"1234", b"5678\n", max_line=8) == [b"12345678", b"12345678"]


@pytest.mark.parametrize(
    "chunks",
    [
        (b"123456789\n",),  # a whole long line in one read
        (b"12345", b"6789\n"),  # a long line completed by the next read
        (b"ok\n123456789\nnext\n",),  # a long line between short ones
    ],
)
async def test_a_complete_line_over_the_limit_raises_however_it_is_cut(chunks):
    """The limit is on lines, not on what is left over after a read: the same line must not pass or fail
    depending on where the reads happen to cut it."""
    with pytest.raises(LineTooLong):
        await lines(*chunks, max_line=8)


class _FailingReceive(ByteReceiveStream):
    def __init__(self, first: bytes, error: Exception) -> None:
        self._first: bytes | None = first
        self._error = error

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        raise self._error

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("error", [anyio.BrokenResourceError(), anyio.ClosedResourceError(), anyio.EndOfStream()])
async def test_a_broken_or_closed_stream_ends_the_lines_like_eof(error):
    assert [line async for line in read_lines(_FailingReceive(b"a\nb", error))] == [b"a", b"b"]


# --- writing -------------------------------------------------------------------------------------------------


class _Recording(ByteSendStream):
    """Records each send; a send hands the event loop over between its two halves, the way a real pipe write
    can stop part-way, so two unlocked writers would interleave."""

    def __init__(self) -> None:
        self.sends: list[bytes] = []
        self.bytes = bytearray()
        self.broken = False

    async def send(self, item: bytes) -> None:
        if self.broken:
            raise anyio.BrokenResourceError
        self.sends.append(item)
        half = len(item) // 2
        self.bytes += item[:half]
        await anyio.lowlevel.checkpoint()
        self.bytes += item[half:]

    async def aclose(self) -> None:
        return None


async def test_one_message_is_one_send_of_one_line():
    out = _Recording()
    writer = LineWriter(out)
    await writer.write(b'{"a":1}')
    await writer.write(b'{"b":"x\\ny"}')  # an escaped newline inside a string is fine
    assert out.sends == [b'{"a":1}\n', b'{"b":"x\\ny"}\n']


async def test_a_raw_newline_is_refused_and_nothing_is_written():
    out = _Recording()
    with pytest.raises(ValueError, match="raw newline"):
        await LineWriter(out).write(b'{"a":\n1}')
    assert out.sends == []


async def test_concurrent_writers_never_interleave():
    out = _Recording()
    writer = LineWriter(out)
    messages = [(b'{"n":%d,"pad":"' % i) + b"x" * (i * 7) + b'"}' for i in range(20)]
    async with anyio.create_task_group() as tg:
        for message in messages:
            tg.start_soon(writer.write, message)
    written = bytes(out.bytes).split(b"\n")
    assert written[-1] == b""
    assert sorted(written[:-1]) == sorted(messages)


async def test_a_broken_stream_marks_the_writer_closed_and_later_writes_are_dropped():
    out = _Recording()
    writer = LineWriter(out)
    await writer.write(b"1")
    out.broken = True
    await writer.write(b"2")  # the reader went away: no exception for the caller
    assert writer.closed
    out.broken = False
    await writer.write(b"3")  # never sent: the writer knows the stream is gone
    assert out.sends == [b"1\n"]
