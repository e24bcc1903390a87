"""Composition root of `ama --mode acp`: stdio → peer → dispatcher → handlers → session manager."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

import anyio
import anyio.abc
from anyio.abc import ByteReceiveStream, ByteSendStream

from ama_acp.config import Config
from ama_acp.handlers import Handlers, Reload
from ama_acp.rpc.dispatch import Dispatcher
from ama_acp.rpc.errors import UNEXPECTED
from ama_acp.rpc.peer import Peer
from ama_acp.rpc.stdio import EndableReceiveStream

log = logging.getLogger(__name__)

# Imported in a thread right after startup, so `initialize` is answered without waiting for them. First what
# session/new's answer needs (manager.py answers it from these alone: a fresh ama's first session/new arrives
# within a millisecond of `initialize`'s answer, long before the rest is imported), then what the Session is
# built from after that answer and what its first prompt uses. After them, Handlers.prepare_first_prompt: the
# configured model's provider, and for an HTTP one httpx and the TLS context. Nothing after that: what a first
# answer in text does not use (permissions, the `task` runner and machinery, /rewind, session/load's lifecycle,
# each tool's module: docs/performance.md) is imported on first use, as a preload of it would run beside the first
# request and delay its answer by as much (issue 41).
# The heavier parts of ama_acp.session.live come as steps of their own before it: the same modules end up
# imported, but a process whose input ends right after `initialize` (a test's, an editor probing the agent) stops
# after the smaller step it is in instead of importing the whole session machinery (~0.1 s of CPU).
PRELOAD = (
    "ama_acp.session.manager",
    "ama_acp.session.store.early",  # session/new makes the session's file before its answer
    "ama_acp.agent.instructions",
    "ama_acp.session.history.checkpoints",
    "ama_acp.session.turn.compacting",
    "ama_acp.session.turn.host",
    "ama_acp.session.live",
    "ama_acp.session.store.session_store",
    "ama_acp.session.commands",
    "ama_acp.session.mcp",
    "ama_acp.tools.registry",
    "ama_acp.tools.declared",  # the tools as the model sees them; their modules are imported on first use
    "ama_acp.context.request_size",
)

# While the preload runs, the main thread competes with it for the GIL: each time the main thread waits for
# input, a stat or a write, it gives the GIL up, and without this it waits up to the default switch interval
# (5 ms) to get it back. session/new makes several such calls; the interval is lowered for the preload's
# duration only (the threads then take turns more often, at a few microseconds a turn) and restored after.
PRELOAD_SWITCH_INTERVAL_S = 0.0005

PRELOAD_JOIN_S = 2.0


PRELOADED = "preloaded the session modules"  # the log line benchmarks wait for (tests/bench/_ama.py)
PRELOAD_STOPPED = "preload stopped: the connection ended"  # instead of PRELOADED, when it ends before that


def _preload(prepare: Callable[[], None] | None, stop: threading.Event, collector_paused: bool = False) -> None:
    """The modules of PRELOAD, then `prepare` (the first prompt's work, Handlers.prepare_first_prompt). Once
    `stop` is set (the connection ended) nothing more is started: the exit waits for one step at most.
    `collector_paused`: the garbage collector was turned off for the start (cli.py), and is turned back on once
    this ends (however it ends)."""
    import importlib
    import sys
    import time

    steps: list[tuple[str, Callable[[], object]]] = [(name, partial(importlib.import_module, name)) for name in PRELOAD]
    if prepare is not None:
        steps.append(("the first prompt's provider", prepare))
    start = time.perf_counter()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, PRELOAD_SWITCH_INTERVAL_S))
    try:
        for what, step in steps:
            if stop.is_set():
                log.info("%s after %.0f ms", PRELOAD_STOPPED, (time.perf_counter() - start) * 1000)
                return
            try:
                step()
            except Exception:  # a bug, never fatal: the first use does the same work and reports what fails
                log.exception("%s preloading %s failed", UNEXPECTED, what)
    finally:
        sys.setswitchinterval(interval)
        if collector_paused:
            _resume_collector()
    log.info("%s in %.0f ms", PRELOADED, (time.perf_counter() - start) * 1000)


def _resume_collector() -> None:
    """The garbage collector back on after the start. What the start allocated (modules, classes, functions:
    ~60,000 objects, nearly all alive until exit) is frozen first, so no later full collection walks it again."""
    import gc

    gc.freeze()
    gc.enable()


def _start_preload(
    prepare: Callable[[], None] | None = None, collector_paused: bool = False
) -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()
    args = (prepare, stop, collector_paused)
    thread = threading.Thread(target=_preload, args=args, name="ama-preload", daemon=True)
    thread.start()
    return thread, stop


# The end of input gives the requests read before it this long to answer and send their updates (rpc/peer.py).
END_GRACE_S = 2.0


async def serve(
    config: Config,
    model_id: str | None,
    receive: ByteReceiveStream,
    send: ByteSendStream,
    reload: Reload | None = None,
    why: str = "",
    *,
    stop_signals: bool = True,
    collector_paused: bool = False,
) -> None:
    """Serve one connection until its input ends. A stop signal (STOP_SIGNALS) ends the input the way stdin EOF
    does, so everything after it is the EOF path: the peer closed (requests of ours still waiting, such as an
    unanswered permission request, fail at once), the turns cancelled, the sessions' commands and MCP servers
    stopped and their files closed. The signals stay caught until that clean-up is over: a second one is
    logged, never the default action that would kill ama and orphan what it started.

    `stop_signals=False` leaves the signals alone: for a server that shares its process with something that
    owns them (the tests run ama in the test runner's process, whose Ctrl-C must stay the runner's).
    `collector_paused`: `ama --mode acp` turned the garbage collector off to start (cli.py); the preload turns
    it back on when it ends."""
    ending = EndableReceiveStream(receive)
    dispatcher = Dispatcher()
    peer = Peer(ending, send, dispatcher)
    handlers = Handlers(config, peer, model_id, reload, why)
    handlers.register(dispatcher)
    peer.on_cancel_request = handlers.on_cancel_request
    # stdin may close right after session/new's answer (`acpx sessions new`): the opening updates still go out.
    peer.end_grace, peer.cut_at_end = END_GRACE_S, frozenset({"session/prompt"})
    preload, stop_preload = _start_preload(handlers.prepare_first_prompt, collector_paused)
    async with anyio.create_task_group() as watching:
        if stop_signals:
            await watching.start(_end_input_on_signal, ending)
        async with anyio.create_task_group() as tg:

            def spawn(run: Callable[[], Coroutine[Any, Any, None]]) -> None:
                tg.start_soon(run)  # sessions' MCP servers: stopped by shutdown() below, before the group ends

            handlers.spawn = spawn
            try:
                await peer.run()
            finally:
                with anyio.CancelScope(shield=True):
                    await handlers.shutdown()
                tg.cancel_scope.cancel()
        # An interpreter that exits while this thread is inside an extension module's initialisation can abort
        # (C++ `terminate called without an active exception` from google-re2, exit status -6). The thread
        # finishes the import it is in and starts no other; the wait is bounded all the same.
        stop_preload.set()
        await anyio.to_thread.run_sync(preload.join, PRELOAD_JOIN_S)
        watching.cancel_scope.cancel()
    log.info("input closed; exiting")


# SIGTERM: an editor or a service manager stopping ama. SIGHUP: the terminal (or the terminal editor) it ran in
# closed. SIGINT: Ctrl-C in that terminal, which reaches the whole process group, ama included; an editor has
# no other use for it. Each ends ama like stdin EOF, with exit status 0 (docs/errors.md "Signals and exit codes").
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


async def _end_input_on_signal(
    receive: EndableReceiveStream, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Until cancelled (after the clean-up): the first stop signal ends the input, later ones are logged."""
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        task_status.started()
        async for signum in signals:
            name = signal.Signals(signum).name
            if receive.ended:
                log.warning("%s received again; ama is already stopping what it started", name)
            else:
                log.info("%s received; ending as at the end of input", name)
                receive.end()


def run_stdio(
    config: Config, model_id: str | None, reload: Reload | None = None, why: str = "", *, collector_paused: bool = False
) -> int:
    """Serve ACP on stdio. `model_id` None: no usable model yet — sessions answer `auth_required` until an
    `authenticate` finds one through `reload` (which re-reads the config and the credentials); `why` says what
    the person can do about it. `collector_paused`: see `serve`."""
    from ama_acp.rpc.stdio import protocol_streams

    receive, send = protocol_streams()
    anyio.run(partial(serve, config, model_id, receive, send, reload, why, collector_paused=collector_paused))
    return 0
