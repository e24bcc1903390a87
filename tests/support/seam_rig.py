"""The rig of the seam fuzzer (tests/fuzz/test_seams.py): one blocking portal, one scripted model server that
remembers which reply answered which request, and one ama (its ACP server in-process, tests/support/harness.py's
`run_ama`; AMA_TEST_PROCESSES=1 makes it a real `ama --mode acp`) driven by ama's own ACP client, its every
line checked against the pinned ACP schema.

Hypothesis' stateful rules are synchronous; the client is async. The portal runs the client's event loop (and
the in-process server's) in a thread and every rule calls into it, so one ama serves thousands of examples
(each a new session).

A request ama gave up on (its turn cancelled) may reach the model server's handler thread late, after the
next step queued its own replies. Such a request takes no reply (`RecordingLLMServer.stale`): its client has
closed the connection, which the server checks under the queue's lock, and a cancelled request's connection is
closed before its turn's answer is written, so before any later step can queue a reply.
"""

from __future__ import annotations

import functools
import json
import select
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from ama_acp.client.connection import AgentProcess, ClientOptions, PendingRequest
from ama_acp.client.handlers import choose_option
from ama_acp.rpc.errors import UNEXPECTED
from ama_conformance.schema.validate import WireRecorder, load_validator
from tests.support.harness import Ama, run_ama
from tests.support.leaks import TRACEBACK
from tests.support.llm_server import LLMServer, RecordedRequest
from tests.support.llm_server import _Handler as ModelRequestHandler

T = TypeVar("T")


@dataclass
class Served:
    """One reply the model server took from its queue, and the request it answered."""

    request: RecordedRequest
    reply: dict[str, Any]

    @property
    def model(self) -> str:
        body = self.request.body
        return str(body.get("model")) if isinstance(body, dict) else ""

    @property
    def purpose(self) -> str:
        """`compaction` for a handoff request (ama sends it without tools), else `turn`."""
        body = self.request.body
        return "turn" if isinstance(body, dict) and body.get("tools") else "compaction"


_current = threading.local()  # the request and connection a handler thread is serving


class _ConnectionHandler(ModelRequestHandler):
    def do_POST(self) -> None:
        _current.connection = self.connection
        try:
            super().do_POST()
        finally:
            _current.connection = None


def client_gone(conn: socket.socket) -> bool:
    """The client closed its end of the connection (or reset it): it no longer waits for this answer. ama sends
    nothing after a request's body, so a readable socket here means the end of its input."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable) and conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True  # reset by the client


class RecordingLLMServer(LLMServer):
    """LLMServer that pairs each reply it takes with the request it answers (`served`). Each request is
    handled on its own thread, which records the request just before it takes a reply: a thread-local joins
    the two. A request whose client has gone when its reply would be taken takes none (`stale`) and is
    answered with nothing (the connection closed)."""

    handler_class = _ConnectionHandler

    def __init__(self) -> None:
        super().__init__()
        self.served: list[Served] = []
        self.stale: list[RecordedRequest] = []

    def _record(self, req: RecordedRequest) -> None:
        super()._record(req)
        _current.request = req

    def _next(self) -> dict[str, Any] | None:
        conn: socket.socket | None = getattr(_current, "connection", None)
        # Under the lock enqueue() and clear() take: no step queues replies between the check and the take.
        with self._lock:
            if conn is not None and client_gone(conn):
                self.stale.append(_current.request)
                return {"hang": 0}  # write nothing, close: the client is gone
            reply = self._queue.popleft() if self._queue else None
            if reply is not None:
                self.served.append(Served(_current.request, reply))
        return reply


@dataclass
class Timed:
    """A session/update as the client received it, with the monotonic time it arrived."""

    at: float
    update: dict[str, Any]


@dataclass
class Permissions:
    """How the rig's client answers `session/request_permission`: allow once, or hold the question open
    (a person who does not click) until the turn is cancelled."""

    hold: bool = False
    asked: int = 0

    async def __call__(self, params: dict[str, Any]) -> Any:
        self.asked += 1
        if self.hold:
            await anyio.sleep_forever()  # conn.cancel() cancels this wait and answers `cancelled`
        options = params.get("options")
        return choose_option(options if isinstance(options, list) else [], "allow_once")


@dataclass
class Rig:
    """Everything the seam fuzzer shares between examples. `restart()` starts a fresh ama (after a crash)."""

    tmp: Path
    config_text: Callable[[str, str], str]  # (OpenAI base URL, Anthropic base URL) -> config.toml
    env: dict[str, str]
    stack: ExitStack = field(default_factory=ExitStack)
    portal: BlockingPortal | None = None
    llm: RecordingLLMServer | None = None
    ama: Ama | None = None
    conn: AgentProcess | None = None
    permissions: Permissions = field(default_factory=Permissions)
    updates: dict[str, list[Timed]] = field(default_factory=dict)
    restarts: int = 0
    _conn_cm: AbstractContextManager[AgentProcess] | None = None
    _recorder: WireRecorder | None = None
    _validated: int = 0
    _client_violations: int = 0
    _log_offset: int = 0
    # Notification lines already found valid. A notification's schema check (ama_conformance.schema.validate) is a function of
    # its bytes alone (no request id, nothing earlier), so a line byte for byte the same has the same verdict:
    # streamed replies repeat their chunk lines (about one line in six of a run), and the check is most of the
    # fuzzer's own CPU.
    _valid_notifications: set[str] = field(default_factory=set)

    def start(self) -> Rig:
        self.portal = self.stack.enter_context(start_blocking_portal())
        self.llm = self.stack.enter_context(RecordingLLMServer())
        self.ama = Ama(self.tmp)
        self.ama.config.write_text(self.config_text(self.llm.openai_url, self.llm.anthropic_url), encoding="utf-8")
        self._start_ama()
        self.stack.callback(self._stop_ama)
        return self

    def close(self) -> None:
        self.stack.close()

    # --- the ama process

    def _start_ama(self) -> None:
        assert self.portal is not None and self.ama is not None
        options = ClientOptions(fs=False, terminal=False, compaction=True, permission=self.permissions)
        self._conn_cm = self.portal.wrap_async_context_manager(
            run_ama(self.ama, env=self.env, options=options, validate=False)
        )
        conn = self._conn_cm.__enter__()
        conn.on_update = self._on_update
        self.conn = conn
        self._recorder = WireRecorder(load_validator())
        self._validated = 0
        self._client_violations = 0
        self.call(conn.initialize)

    def _stop_ama(self) -> None:
        if self._conn_cm is not None:
            cm, self._conn_cm = self._conn_cm, None
            try:
                cm.__exit__(None, None, None)
            except Exception:  # a dead process may fail to close cleanly; it is replaced anyway
                pass

    def restart(self) -> None:
        self.restarts += 1
        self._stop_ama()
        self._start_ama()

    @property
    def alive(self) -> bool:
        return self.conn is not None and not self.conn.exited

    def _on_update(self, params: dict[str, Any]) -> None:
        sid, update = params.get("sessionId"), params.get("update")
        if isinstance(sid, str) and isinstance(update, dict):
            self.updates.setdefault(sid, []).append(Timed(time.monotonic(), update))

    # --- calling into the client's loop

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        assert self.portal is not None
        return self.portal.call(functools.partial(fn, *args, **kwargs))

    def request(self, method: str, params: dict[str, Any], timeout: float = 20.0) -> Any:
        assert self.conn is not None
        return self.call(self.conn.request, method, params, timeout=timeout)

    def start_request(self, method: str, params: dict[str, Any]) -> PendingRequest:
        assert self.conn is not None
        return self.call(self.conn.start_request, method, params)

    def wait(self, pending: PendingRequest, timeout: float = 30.0) -> Any:
        return self.call(pending.wait, timeout)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        assert self.conn is not None
        self.call(self.conn.wait_for, predicate, timeout)

    def cancel(self, sid: str) -> None:
        assert self.conn is not None
        self.call(self.conn.cancel, sid)

    # --- the wire

    def new_wire_problems(self) -> list[str]:
        """Schema violations and client-side protocol violations since the last call."""
        assert self.conn is not None and self._recorder is not None
        conn, recorder = self.conn, self._recorder
        before = len(recorder.violations)
        end = len(conn.transcript)
        for entry in conn.transcript[self._validated : end]:
            if entry.direction == "out":
                recorder.sent(json.loads(entry.raw))
            elif entry.raw not in self._valid_notifications:
                seen = len(recorder.violations)
                msg = recorder.received(entry.raw)
                if msg is not None and "method" in msg and "id" not in msg and len(recorder.violations) == seen:
                    self._valid_notifications.add(entry.raw)
        self._validated = end
        problems = list(recorder.violations[before:])
        bad = [v for v in conn.violations[self._client_violations :] if v.kind != "unanswered"]
        self._client_violations = len(conn.violations)
        problems += [f"{v.kind}: {v.detail}" for v in bad]
        return problems

    def new_log_problems(self) -> list[str]:
        """Tracebacks or `UNEXPECTED:` lines ama logged since the last call (an exception nobody handled)."""
        assert self.ama is not None
        path = self.ama.data / "logs" / "ama.log"
        try:
            with open(path, "rb") as f:
                if f.seek(0, 2) < self._log_offset:
                    self._log_offset = 0  # the log was rotated: read the new file from its start
                f.seek(self._log_offset)
                text = f.read().decode("utf-8", errors="replace")
                self._log_offset = f.tell()
        except FileNotFoundError:
            return []
        return [line for line in text.splitlines() if TRACEBACK in line or UNEXPECTED in line]
