"""rpc/stdio.py EndableReceiveStream on a real os.pipe(): what stop signals use to end the input as EOF does
(server.py). Data passes through untouched; `end()` turns a receive that waits on an idle pipe, and every later
one, into EndOfStream; a cancel from outside stays a cancel."""

from __future__ import annotations

import os
import threading

import anyio
import pytest

from ama_acp.rpc.stdio import EndableReceiveStream, FdReceiveStream

pytestmark = pytest.mark.anyio

STEP = 10.0  # seconds any one step may take; they take milliseconds


async def _close(stream: EndableReceiveStream, r: int, w: int) -> None:
    """End the pipe while the event loop still runs, and wait for the reader thread to stop: it gets EOF, or its
    next hand-over finds the stream closed. No thread outlives the test."""
    os.close(w)
    await stream.aclose()
    with anyio.fail_after(STEP):
        # A thread cannot set an anyio.Event here without the loop it may be stuck handing data to: poll.
        while any(t.name == "ama-stdin" and t.is_alive() for t in threading.enumerate()):  # noqa: ASYNC110
            await anyio.sleep(0.01)
    os.close(r)


async def test_data_passes_then_end_during_an_idle_wait_is_end_of_stream_every_time():
    r, w = os.pipe()
    stream = EndableReceiveStream(FdReceiveStream(r))
    try:
        os.write(w, b"one\n")
        with anyio.fail_after(STEP):
            assert await stream.receive() == b"one\n"
        ended: list[str] = []

        async def reader() -> None:
            try:
                await stream.receive()  # nothing more is written: it waits until `end()`
            except anyio.EndOfStream:
                ended.append("eof")

        with anyio.fail_after(STEP):
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader)
                await anyio.wait_all_tasks_blocked()
                assert not stream.ended
                stream.end()
        assert ended == ["eof"] and stream.ended
        os.write(w, b"late\n")  # input after the end is never read
        for _ in range(2):
            with pytest.raises(anyio.EndOfStream):
                await stream.receive()
    finally:
        await _close(stream, r, w)


async def test_a_cancel_from_outside_is_not_mistaken_for_the_end():
    r, w = os.pipe()
    stream = EndableReceiveStream(FdReceiveStream(r))
    try:
        with anyio.move_on_after(0.05) as scope:
            await stream.receive()
        assert scope.cancelled_caught and not stream.ended
        os.write(w, b"still here\n")
        with anyio.fail_after(STEP):
            assert await stream.receive() == b"still here\n"
    finally:
        await _close(stream, r, w)
