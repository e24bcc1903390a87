"""A program under a real pseudo-terminal, with the test playing the terminal: it reads everything the program
writes, answers the OSC 7501 query and DA1 as a terminal would (or not, as asked), and types keys.

The program gets the pty's slave side as its controlling terminal (a new session), so Ctrl-C typed as a byte
becomes SIGINT for its foreground process group, exactly as in a terminal emulator.
"""

from __future__ import annotations

import base64
import fcntl
import os
import re
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

PROBE = b"\x1b]7501;?\x1b\\"
DA1_QUERY = b"\x1b[c"
STATUS_REPLY = b"\x1b]7501;?\x1b\\"
DA1_REPLY = b"\x1b[?62;22c"
_REPORT = re.compile(rb"\x1b\]7501;([^\x1b\x07?][^\x1b\x07]*)(?:\x1b\\|\x07)")


def _controlling_tty() -> None:  # runs in the child between fork and exec
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def reports(data: bytes) -> list[dict[str, str]]:
    """Every OSC 7501 report in `data` (the query excluded), fields decoded (title and msg from base64)."""
    found = []
    for match in _REPORT.finditer(data):
        report: dict[str, str] = {}
        for pair in match.group(1).decode("utf-8", "replace").split(":"):
            key, _, value = pair.partition("=")
            report[key] = base64.b64decode(value).decode("utf-8") if key in ("title", "msg") else value
        found.append(report)
    return found


class PtyTerminal:
    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        answer_status: bool = True,
        answer_da1: bool = True,
        cols: int = 120,
        rows: int = 40,
    ) -> None:
        self.answer_status, self.answer_da1 = answer_status, answer_da1
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = subprocess.Popen(
            list(argv), stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, preexec_fn=_controlling_tty
        )
        os.close(slave)
        self._output = bytearray()
        self._cond = threading.Condition()
        self._eof = False
        self._scanned = 0
        self.queries = 0  # OSC 7501 queries seen
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # --- the terminal's side ------------------------------------------------------------------------------

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: the slave side is closed (the program exited)
                data = b""
            with self._cond:
                if not data:
                    self._eof = True
                    self._cond.notify_all()
                    return
                self._output += data
                self._answer()
                self._cond.notify_all()

    def _answer(self) -> None:
        # Queries are answered in order, as a terminal does; a query split across reads is found once whole.
        while True:
            rest = bytes(self._output[self._scanned :])
            probe, da1 = rest.find(PROBE), rest.find(DA1_QUERY)
            hits = [(i, q) for i, q in ((probe, PROBE), (da1, DA1_QUERY)) if i >= 0]
            if not hits:
                return
            at, query = min(hits)
            self._scanned += at + len(query)
            if query == PROBE:
                self.queries += 1
                if self.answer_status:
                    os.write(self.master, STATUS_REPLY)
            elif self.answer_da1:
                os.write(self.master, DA1_REPLY)

    # --- the test's side -----------------------------------------------------------------------------------

    @property
    def output(self) -> bytes:
        with self._cond:
            return bytes(self._output)

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def type(self, keys: str | bytes) -> None:
        os.write(self.master, keys.encode() if isinstance(keys, str) else keys)

    def wait_for(self, predicate: Callable[[bytes], bool] | bytes | str, timeout: float = 30.0) -> bytes:
        """Block until `predicate(output)` holds (or the text appears); AssertionError with the output on timeout."""
        if isinstance(predicate, str):
            predicate = predicate.encode()
        if isinstance(predicate, bytes):
            needle = predicate
            predicate = lambda out: needle in out  # noqa: E731
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if predicate(bytes(self._output)):
                    return bytes(self._output)
                if self._eof:
                    raise AssertionError(f"the program ended first; the terminal shows:\n{self._shown()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out; the terminal shows:\n{self._shown()}")
                # Woken by new output, and every 50 ms besides: a predicate may read state no output announces
                # (the terminal's mode after `fg`), which a wait for output alone would see only at the deadline.
                self._cond.wait(min(left, 0.05))

    def _shown(self) -> str:
        return self._output.decode("utf-8", "replace")

    def wait_exit(self, timeout: float = 30.0) -> int:
        rc = self.proc.wait(timeout)
        self._reader.join(timeout)
        return rc

    def reports(self) -> list[dict[str, str]]:
        return reports(self.output)

    def states(self) -> list[str]:
        return [r.get("state", "") for r in self.reports()]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(5)
        try:
            os.close(self.master)
        except OSError:
            pass

    def __enter__(self) -> PtyTerminal:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
