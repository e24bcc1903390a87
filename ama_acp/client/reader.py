"""The agent's stdout, read as a strict editor reads it: lines (rpc/framing's `LineSplitter`, with the
client's own cap), then UTF-8, then JSON; every departure recorded as a violation, and what carries nothing
kept only up to a bound.

What it keeps is bounded, whatever the agent sends: no line longer than the cap (a longer one is a
`line_too_long` violation and the connection ends: its end cannot be waited for, and nothing after it can be
trusted to be framed), the first `NOISE_KEPT` lines that carry nothing (not JSON, blank) in the transcript
and the rest only counted (`dropped_lines`).

How long it reads them is bounded too: `MAX_NOISE_LINES` lines in a row, or `MAX_NOISE_BYTES` of them, that
carry no message (not JSON, blank, or JSON that is no request, notification or response) are a `stdout_flood`
violation and the connection ends, as for a line too long. An agent that prints a log line now and then still
talks; one that only floods would otherwise be read forever, with nobody told.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import msgspec
from anyio.abc import ByteReceiveStream

from ama_acp.client.violations import RAW_KEPT, Record
from ama_acp.rpc.dispatch import JSONValue
from ama_acp.rpc.framing import LineSplitter, LineTooLong

NOISE_KEPT = 1000  # lines that carry nothing (not JSON, blank) kept in the transcript; the rest are counted
# Lines in a row that carry no message before the connection ends: far past any agent's stray logging (the
# fixture agent's 10,000-line flood at start still talks), and reached by a flooding one within a second.
MAX_NOISE_LINES = 100_000
MAX_NOISE_BYTES = 64 * 1024 * 1024  # …or their bytes (long lines of noise)


@dataclass
class TranscriptEntry:
    direction: str  # "in" (agent -> client) or "out" (client -> agent)
    raw: str
    time: float


class StdoutReader:
    """Reads the agent's stdout until it ends. Each JSON line goes to `on_message` (with the line as text),
    after `check_line` (a test's validator) has seen it; `on_message` says whether the line was a message (a
    request, a notification or a response). `changed` is called after every line that was JSON or tried to be."""

    def __init__(
        self,
        max_line: int,
        transcript: list[TranscriptEntry] | None,
        record: Record,
        check_line: Callable[[str], None],
        on_message: Callable[[JSONValue, str], bool],
        changed: Callable[[], None],
    ) -> None:
        self.max_line = max_line
        self.transcript = transcript
        self.dropped_lines = 0  # lines that carried nothing, past the NOISE_KEPT kept in the transcript
        self._noise_kept = 0
        self._noise_run = 0  # lines in a row that carried no message
        self._noise_run_bytes = 0
        self._record = record
        self._check_line = check_line
        self._on_message = on_message
        self._changed = changed

    async def read(self, stdout: ByteReceiveStream, stop_agent: Callable[[], None]) -> None:
        """Until EOF, or a line over the cap or a flood of lines without a message (then `stop_agent` is
        called)."""
        lines = LineSplitter(self.max_line)
        while True:
            try:
                chunk = await stdout.receive(1 << 20)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                break
            try:
                for line in lines.feed(chunk):
                    self.take(line)
                    if self._flooded():
                        stop_agent()
                        return
            except LineTooLong as exc:
                # Only the line's head is kept, in the violation.
                self._record(
                    "line_too_long",
                    f"a stdout line is longer than {self.max_line} bytes: the connection was ended",
                    _decode(exc.head[:RAW_KEPT]),
                )
                stop_agent()
                return
        rest = lines.rest()
        if rest.strip():
            self._record("unterminated_line", "the last stdout line has no newline", _decode(rest))
            self.take(rest)

    def take(self, raw_bytes: bytes) -> None:
        """One line, without its newline."""
        if raw_bytes.endswith(b"\r"):
            raw_bytes = raw_bytes[:-1]
        try:
            raw = raw_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raw = _decode(raw_bytes)
            self._record("invalid_utf8", "a stdout line is not valid UTF-8", raw)
        if not raw.strip():
            self._no_message(raw_bytes)
            if self._keep_noise():
                self._keep(raw)
            return  # blank lines carry nothing (R9: tolerated, not required)
        try:
            message: JSONValue = msgspec.json.decode(raw_bytes)
        except (msgspec.DecodeError, RecursionError) as exc:
            # msgspec raises RecursionError for nesting deeper than it walks: that line is not JSON a client can
            # read, the same decode error as any other.
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            self._no_message(raw_bytes)
            if self._keep_noise():
                self._keep(raw)
            self._check_line(raw)
            self._record("non_json_stdout", f"stdout line is not JSON: {why}", raw)
            self._changed()
            return
        self._keep(raw)
        self._check_line(raw)
        try:
            if self._on_message(message, raw):
                self._noise_run = self._noise_run_bytes = 0
            else:
                self._no_message(raw_bytes)
        finally:
            self._changed()

    def _no_message(self, raw_bytes: bytes) -> None:
        self._noise_run += 1
        self._noise_run_bytes += len(raw_bytes) + 1  # its newline too

    def _flooded(self) -> bool:
        """Whether the lines since the last message passed a bound: then it is recorded (the caller ends the
        agent)."""
        if self._noise_run < MAX_NOISE_LINES and self._noise_run_bytes < MAX_NOISE_BYTES:
            return False
        self._record(
            "stdout_flood",
            f"{self._noise_run} stdout lines ({self._noise_run_bytes} bytes) in a row carried no message; the "
            f"limit is {MAX_NOISE_LINES} lines or {_size(MAX_NOISE_BYTES)}: the connection was ended",
            None,
        )
        return True

    def _keep_noise(self) -> bool:
        """Whether one more line that carries nothing is kept in the transcript (the first NOISE_KEPT are)."""
        if self._noise_kept < NOISE_KEPT:
            self._noise_kept += 1
            return True
        self.dropped_lines += 1
        return False

    def _keep(self, raw: str) -> None:
        if self.transcript is not None:  # None: the caller keeps no transcript (ClientOptions.history)
            self.transcript.append(TranscriptEntry("in", raw, time.monotonic()))


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n % (1024 * 1024) == 0 else f"{n} bytes"


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")
