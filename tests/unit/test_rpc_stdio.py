"""rpc/stdio.py on real os.pipe() pairs: reads reach the event loop as they come and end in EndOfStream; writes
go out whole even when the pipe is full (the reader behind); a reader that went away is BrokenResourceError."""

from __future__ import annotations

import os

import anyio
import pytest

from ama_acp.rpc.stdio import FdReceiveStream, FdSendStream

pytestmark = pytest.mark.anyio

STEP = 10.0  # seconds any one step may take; they take milliseconds


async def read_all(stream: FdReceiveStream) -> bytes:
    got = bytearray()
    with anyio.fail_after(STEP):
        while True:
            try:
                got += await stream.receive()
            except anyio.EndOfStream:
                return bytes(got)


async def test_receive_hands_over_what_was_written_then_end_of_stream_every_time():
    r, w = os.pipe()
    stream = FdReceiveStream(r)
    try:
        os.write(w, b"first\n")
        with anyio.fail_after(STEP):
            assert await stream.receive() == b"first\n"
        os.write(w, b"second")
        os.close(w)  # EOF ends the reading thread
        assert await read_all(stream) == b"second"
        with pytest.raises(anyio.EndOfStream):  # and stays ended
            await stream.receive()
    finally:
        await stream.aclose()
        os.close(r)


async def test_a_write_bigger_than_the_pipe_goes_out_whole_while_the_reader_catches_up():
    r, w = os.pipe()
    reader, writer = FdReceiveStream(r), FdSendStream(w)
    data = bytes(range(256)) * 8192  # 2 MiB: far more than a pipe holds, so the full-pipe path runs
    got: list[bytes] = []
    try:
        async with anyio.create_task_group() as tg:

            async def collect() -> None:
                got.append(await read_all(reader))

            tg.start_soon(collect)
            with anyio.fail_after(STEP):
                await writer.send(data)
                await writer.send(b"tail")
            os.close(w)
    finally:
        await reader.aclose()
        os.close(r)
    assert got == [data + b"tail"]


async def test_writing_to_a_pipe_whose_reader_is_gone_is_broken_resource():
    r, w = os.pipe()
    os.close(r)
    writer = FdSendStream(w)
    try:
        with pytest.raises(anyio.BrokenResourceError):
            await writer.send(b"x")
    finally:
        os.close(w)
