"""Text deltas merged at the editor's pace (ama_acp/session/editor/coalesce.py): never reordered, never dropped, never
held past the window."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp.session.editor.coalesce import ChunkCoalescer
from ama_acp.wire import types as w
from tests.support.hypothesis_profiles import examples

MSG, THOUGHT = w.AgentMessageChunk, w.AgentThoughtChunk
WINDOW = 0.02
SLACK = 0.25  # a loaded 2-core CI machine: the timer may wake late, but never by more than this


class Sink:
    def __init__(self) -> None:
        self.sent: list[tuple[float, w.SessionUpdate]] = []
        self.changed = anyio.Event()

    async def __call__(self, update: w.SessionUpdate) -> None:
        self.sent.append((time.monotonic(), update))
        self.changed.set()
        self.changed = anyio.Event()

    async def wait_for(self, count: int, timeout: float = 5.0) -> None:
        """Until `count` updates were sent (told by each send, not polled)."""
        with anyio.fail_after(timeout):
            while len(self.sent) < count:
                await self.changed.wait()

    @property
    def updates(self) -> list[w.SessionUpdate]:
        return [u for _, u in self.sent]


def key(update: w.SessionUpdate) -> tuple[Any, ...]:
    if isinstance(update, MSG | THOUGHT) and isinstance(update.content, w.TextContent):
        return ("text", type(update).__name__, update.message_id)
    return ("other", update)


def text_of(update: w.SessionUpdate) -> str:
    """The text of a message or thought chunk the test expects to carry text."""
    assert isinstance(update, MSG | THOUGHT) and isinstance(update.content, w.TextContent), update
    return update.content.text


def merged(items: list[tuple[tuple[Any, ...], str]]) -> list[tuple[tuple[Any, ...], str]]:
    """Adjacent text of one kind and message joined: what the editor renders, whatever the chunking."""
    out: list[tuple[tuple[Any, ...], str]] = []
    for k, text in items:
        if out and k[0] == "text" and out[-1][0] == k:
            out[-1] = (k, out[-1][1] + text)
        else:
            out.append((k, text))
    return out


def shown(updates: list[w.SessionUpdate]) -> list[tuple[tuple[Any, ...], str]]:
    return merged([(key(u), text_of(u) if key(u)[0] == "text" else "") for u in updates])


def run(fn: Any) -> Any:
    return anyio.run(fn)


def test_outside_a_turn_every_delta_is_its_own_chunk() -> None:
    async def main() -> None:
        sink = Sink()
        c = ChunkCoalescer(sink, window=WINDOW)
        for piece in ("a", "b", "c"):
            await c.text(MSG, piece, "m1")
        assert [text_of(u) for u in sink.updates] == ["a", "b", "c"]

    run(main)


def test_a_zero_window_merges_nothing_even_in_a_turn() -> None:
    async def main() -> None:
        sink = Sink()
        c = ChunkCoalescer(sink, window=0)
        async with c.turn():
            for piece in ("a", "b", "c"):
                await c.text(MSG, piece, "m1")
        assert len(sink.updates) == 3

    run(main)


def test_the_first_delta_goes_out_at_once_and_the_rest_one_window_later() -> None:
    async def main() -> None:
        sink = Sink()
        c = ChunkCoalescer(sink, window=WINDOW)
        async with c.turn():
            t0 = time.monotonic()
            await c.text(MSG, "Hel", "m1")
            assert [text_of(u) for u in sink.updates] == ["Hel"]
            for piece in ("lo", ", ", "world"):
                await c.text(MSG, piece, "m1")
            assert len(sink.updates) == 1  # merged, waiting for the frame
            await sink.wait_for(2)  # the stream paused: the timer sends it
            at, second = sink.sent[1]
            assert text_of(second) == "lo, world"
            assert WINDOW * 0.9 <= at - t0 <= WINDOW + SLACK
        assert len(sink.updates) == 2

    run(main)


def test_any_other_update_flushes_what_is_pending_first() -> None:
    async def main() -> None:
        sink = Sink()
        c = ChunkCoalescer(sink, window=10.0)  # the timer never fires during the test
        tool = w.ToolCallUpdate(tool_call_id="t1", status="in_progress")
        async with c.turn():
            await c.text(MSG, "a", "m1")
            await c.text(MSG, "b", "m1")
            await c.text(MSG, "c", "m1")
            await c.send(tool)
            await c.text(THOUGHT, "hmm", "m1")  # a thought after text: the text is out already
            await c.text(THOUGHT, " more", "m1")
            await c.text(MSG, "d", "m2")  # another message: the thought goes first
            assert [key(u)[:2] for u in sink.updates] == [("text", "AgentMessageChunk")] * 2 + [("other", tool)] + [
                ("text", "AgentThoughtChunk")
            ] * 2 + [("text", "AgentMessageChunk")]
        texts = [text_of(u) if isinstance(u, MSG | THOUGHT) else None for u in sink.updates]
        assert texts == ["a", "bc", None, "hmm", " more", "d"]

    run(main)


def test_a_chunk_goes_out_when_it_reaches_max_chars() -> None:
    async def main() -> None:
        sink = Sink()
        c = ChunkCoalescer(sink, window=10.0, max_chars=10)
        async with c.turn():
            await c.text(MSG, "x", "m")
            for _ in range(25):
                await c.text(MSG, "ab", "m")
            assert [len(text_of(u)) for u in sink.updates] == [1, 10, 10, 10, 10, 10]
        assert "".join(text_of(u) for u in sink.updates) == "x" + "ab" * 25

    run(main)


def test_a_cancelled_turn_still_sends_what_is_pending() -> None:
    async def main() -> None:
        sink = Sink()
        c = ChunkCoalescer(sink, window=10.0)
        with anyio.CancelScope() as scope:
            async with c.turn():
                await c.text(MSG, "partial ", "m")
                await c.text(MSG, "answer", "m")
                scope.cancel()
                await anyio.sleep(1)  # cancelled here
        assert "".join(text_of(u) for u in sink.updates) == "partial answer"

    run(main)


def test_the_turn_ending_while_the_timer_writes_loses_nothing() -> None:
    """The timer's flush takes the pending text and then waits on a slow write (an editor's full pipe); the turn
    ends meanwhile and cancels the timer. The text it held must still reach the editor, before the turn's end —
    it was lost (the chunk's text cleared, its write cancelled) under load before the timer's flush was shielded."""

    async def main() -> None:
        writing = anyio.Event()
        release = anyio.Event()
        sent: list[str] = []

        async def slow_sink(update: w.SessionUpdate) -> None:
            text = text_of(update)
            if text == "held":
                writing.set()
                await release.wait()  # the timer's write: blocked until the turn has ended
            sent.append(text)

        c = ChunkCoalescer(slow_sink, window=0.01)
        async with anyio.create_task_group() as tg:

            async def the_turn() -> None:
                async with c.turn():
                    await c.text(MSG, "first ", "m")  # goes at once
                    await c.text(MSG, "held", "m")  # pending: the timer sends it
                    await writing.wait()
                sent.append("<turn ended>")

            tg.start_soon(the_turn)
            await writing.wait()
            await anyio.wait_all_tasks_blocked()
            release.set()
        assert sent == ["first ", "held", "<turn ended>"]

    run(main)


def test_a_chunk_with_more_than_text_is_passed_through_in_order() -> None:
    async def main() -> None:
        sink = Sink()
        c = ChunkCoalescer(sink, window=10.0)
        image = w.AgentMessageChunk(content=w.ImageContent(data="AA==", mime_type="image/png"), message_id="m")
        annotated = w.AgentMessageChunk(content=w.TextContent(text="!", annotations={"x": 1}), message_id="m")
        async with c.turn():
            await c.text(MSG, "a", "m")
            await c.text(MSG, "b", "m")
            await c.send(image)
            await c.send(annotated)
            await c.send(w.AgentMessageChunk(content=w.TextContent(text="c"), message_id="m"))
        assert sink.updates[2] is image and sink.updates[3] is annotated
        assert [text_of(u) for u in sink.updates if u not in (image, annotated)] == ["a", "b", "c"]

    run(main)


# --- properties ------------------------------------------------------------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("text"), st.sampled_from([MSG, THOUGHT]), st.sampled_from(["m1", "m2", None]), st.text(max_size=6)
        ),
        st.tuples(st.just("tool"), st.integers(0, 3)),
        st.tuples(st.just("pause"), st.sampled_from([0.0, 0.005, 0.03])),
    ),
    max_size=60,
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, window=st.sampled_from([0.0, 0.01, 0.03]), max_chars=st.sampled_from([1, 5, 16_384]))
def test_coalescing_never_reorders_drops_or_invents(ops: list[tuple[Any, ...]], window: float, max_chars: int) -> None:
    async def main() -> None:
        sink = Sink()
        c = ChunkCoalescer(sink, window=window, max_chars=max_chars)
        expected: list[tuple[tuple[Any, ...], str]] = []
        appended: list[tuple[float, int]] = []  # (when, the characters the editor should have by then)
        total = 0
        async with c.turn():
            for op in ops:
                if op[0] == "text":
                    _, kind, mid, text = op
                    await c.text(kind, text, mid)
                    expected.append((("text", kind.__name__, mid), text))
                    total += len(text)
                    appended.append((time.monotonic(), total))
                elif op[0] == "tool":
                    update = w.ToolCallUpdate(tool_call_id=f"t{op[1]}", status="in_progress")
                    await c.send(update)
                    expected.append((("other", update), ""))
                else:
                    await anyio.sleep(op[1])
        # Empty deltas are text nobody sees: compare what the editor renders.
        assert [x for x in shown(sink.updates) if x[1] or x[0][0] == "other"] == [
            x for x in merged(expected) if x[1] or x[0][0] == "other"
        ]
        # Never held past the window: every character is out within window (+ scheduling slack) of its delta.
        emitted, out = [], 0
        for at, u in sink.sent:
            if isinstance(u, MSG | THOUGHT):
                out += len(text_of(u))
            emitted.append((at, out))
        for when, needed in appended:
            at = next(t for t, n in emitted if n >= needed)
            assert at - when <= window + SLACK

    anyio.run(main)


@pytest.mark.parametrize("window", [0.0, WINDOW])
def test_many_fast_deltas_become_few_chunks_with_the_same_text(window: float) -> None:
    async def main() -> None:
        sink = Sink()
        c = ChunkCoalescer(sink, window=window)
        text = "".join(f"{i:04d}" for i in range(5_000))
        async with c.turn():
            for i in range(0, len(text), 4):
                await c.text(MSG, text[i : i + 4], "m")
        assert "".join(text_of(u) for u in sink.updates) == text
        if window:
            assert len(sink.updates) < 100  # 5,000 deltas in a few frames
        else:
            assert len(sink.updates) == 5_000

    anyio.run(main)
