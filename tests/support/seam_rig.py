"""The rig of the seam fuzzer (tests/fuzz/test_seams.py): one blocking portal, one scripted model server that
remembers which reply answered which request, and one real `ama --mode acp` subprocess driven by ama's own
ACP client over real pipes, its every line checked against the pinned ACP schema as it arrives.

Hypothesis' stateful rules are synchronous; the client is async. The portal runs the client's event loop in
a thread and every rule calls into it, so one process serves thousands of examples (each a new session).
"""

from __future__ import annotations

import functools
import json
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
from conformance.schema import WireRecorder, load_validator
from tests.support.harness import Ama, run_ama
from tests.support.leaks import TRACEBACK
from tests.support.llm_server import LLMServer, RecordedRequest

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


class RecordingLLMServer(LLMServer):
    """LLMServer that pairs each reply it takes with the request it answers (`served`). Each request is
    handled on its own thread, which records the request just before it takes a reply: a thread-local joins
    the two."""

    def __init__(self) -> None:
        super().__init__()
        self._current = threading.local()
        self.served: list[Served] = []

    def _record(self, req: RecordedRequest) -> None:
        super()._record(req)
        self._current.request = req

    def _next(self) -> dict[str, Any] | None:
        reply = super()._next()
        if reply is not None:
            self.served.append(Served(self._current.request, reply))
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
        # A real process: in the client's own event loop ama's cancels and the model server's threads race
        # differently, and the fuzzer's model of what was billed is built for ama running beside the client
        # (in-process, a cancelled request the server had already answered was counted as billed).
        self._conn_cm = self.portal.wrap_async_context_manager(
            run_ama(self.ama, env=self.env, options=options, validate=False, process=True)
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
            except Exception:  # noqa: BLE001 - a dead process may fail to close cleanly; it is replaced anyway
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
            else:
                recorder.received(entry.raw)
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
