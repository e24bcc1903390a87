"""A raw newline-delimited JSON-RPC peer for a stdio MCP server, for tests that look at what a server sends (the
light server against the SDK one: tests/unit/test_mcp_light_server.py). No SDK: it sends what it is told and
keeps every line the server writes, parsed.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


class Wire:
    """A server process and what it wrote on stdout (one JSON value a line; a line that is not JSON is kept as
    `{"unparsed": line}`)."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> None:
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr: list[bytes] = []
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                self._lines.put(json.loads(raw))
            except ValueError:
                self._lines.put({"unparsed": raw.decode(errors="replace")})
        self._lines.put(None)  # EOF

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        self._stderr.extend(self.process.stderr)

    def send(self, message: Any) -> None:
        assert self.process.stdin is not None
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.process.stdin.write(raw + b"\n")
        self.process.stdin.flush()

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def until_answer(self, request_id: Any, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Every message up to and including the answer to `request_id` (notifications sent before it, and the
        answers to other requests, come first)."""
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no answer to {request_id!r} within {timeout} s; got {got}") from None
            if message is None:
                raise AssertionError(f"the server closed stdout before answering {request_id!r}; got {got}")
            got.append(message)
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return got

    def request(self, request_id: Any, method: str, params: Any = None, timeout: float = 30.0) -> list[dict[str, Any]]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.until_answer(request_id, timeout)

    def close(self, timeout: float = 30.0) -> tuple[int, list[dict[str, Any]], str]:
        """Close stdin; the exit status, what came on stdout after the last answer read, and all of stderr."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        rc = self.process.wait(timeout=timeout)
        rest = self.rest(timeout)
        self._readers[1].join(timeout=timeout)
        return rc, rest, self.stderr()

    def rest(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        """What the server writes until it closes stdout."""
        got: list[dict[str, Any]] = []
        while (message := self._lines.get(timeout=timeout)) is not None:
            got.append(message)
        return got

    def stderr(self) -> str:
        """What the server wrote on stderr so far (all of it once it has exited and `kill()` ran)."""
        return b"".join(self._stderr).decode(errors="replace")

    def kill(self) -> None:
        """The process ended (killed if need be), its pipes read to their end and closed."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        for reader in self._readers:
            reader.join(timeout=30)
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except BrokenPipeError:
                    pass
