"""A raw line-level driver of `ama --mode acp`, for malformed input that a real client would never send."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from typing import Any

from conformance.schema import load_validator
from tests.support.harness import Ama, clean_env


class RawAma:
    def __init__(self, ama: Ama, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            ama.command(*args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(ama.stderr, "wb"),
            cwd=ama.workspace,
            env=clean_env(ama.tmp, env),
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.methods: dict[Any, str] = {}  # ids we sent → method, for per-method schema validation
        self.validator = load_validator()
        self.validate = True  # off for junk whose answers no schema method describes
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send_line(self, data: bytes) -> None:
        self._remember(data)
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def send(self, msg: Any) -> None:
        """Send any JSON value as one line."""
        self.send_line(json.dumps(msg).encode())

    def _remember(self, data: bytes) -> None:
        """A request-looking line with a string or integer id: its answer is validated against its method."""
        if b'"method"' not in data:
            return
        try:
            msg = json.loads(data)
        except (ValueError, RecursionError):
            return
        if isinstance(msg, dict) and "method" in msg and type(msg.get("id")) in (str, int):
            self.methods[msg["id"]] = msg["method"] if isinstance(msg["method"], str) else repr(msg["method"])

    def recv(self, timeout: float = 10.0) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        assert line is not None, "ama closed stdout"
        text = line.decode("utf-8")
        assert text.endswith("\n")
        if not self.validate:
            return json.loads(text)
        return self.validator.validate_line(text.rstrip("\n"), self.methods)

    def response(self, req_id: Any, timeout: float = 10.0) -> dict[str, Any]:
        """The response to `req_id`, skipping notifications (and answering permission requests: allow once)."""
        deadline = time.monotonic() + timeout
        while True:
            msg = self.recv(max(0.1, deadline - time.monotonic()))
            if msg.get("method") == "session/request_permission":
                self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": msg["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
                    }
                )
                continue
            if "method" not in msg and msg.get("id") == req_id:
                return msg

    def until(self, req_id: Any, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Every message up to and including the response to `req_id`, as written (no automatic answers)."""
        deadline = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        while True:
            msg = self.recv(max(0.1, deadline - time.monotonic()))
            seen.append(msg)
            if "method" not in msg and msg.get("id") == req_id and type(msg.get("id")) is type(req_id):
                return seen

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, req_id: Any, method: str, params: Any) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params})
        return self.response(req_id)

    def close(self, timeout: float = 5.0) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout)
