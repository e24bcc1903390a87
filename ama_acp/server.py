"""Composition root of `ama --mode acp`: stdio → peer → dispatcher → handlers → session manager."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from ama_acp.config import Config
from ama_acp.handlers import Handlers, Reload
from ama_acp.rpc.dispatch import Dispatcher
from ama_acp.rpc.errors import UNEXPECTED
from ama_acp.rpc.peer import Peer

log = logging.getLogger(__name__)

# Imported in a thread right after startup, so `initialize` is answered without waiting for them and the
# first `session/new` finds them loaded.
PRELOAD = (
    "ama_acp.session.manager",
    "ama_acp.session.lifecycle",
    "ama_acp.session.accounting",
    "ama_acp.providers.catalog",
    "ama_acp.providers.resolve",
    "ama_acp.tools.registry",
    "ama_acp.session.compacting",
)


PRELOAD_JOIN_S = 2.0


PRELOADED = "preloaded the session modules"  # the log line benchmarks wait for (tests/bench/_ama.py)


def _preload() -> None:
    import importlib
    import time

    start = time.perf_counter()
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # a module of ama's that cannot be imported is a bug; the real import reports it too
            log.exception("%s preloading %s failed", UNEXPECTED, name)
    log.info("%s in %.0f ms", PRELOADED, (time.perf_counter() - start) * 1000)


def _start_preload() -> threading.Thread:
    thread = threading.Thread(target=_preload, name="ama-preload", daemon=True)
    thread.start()
    return thread


async def serve(
    config: Config,
    model_id: str | None,
    receive: ByteReceiveStream,
    send: ByteSendStream,
    reload: Reload | None = None,
    why: str = "",
) -> None:
    dispatcher = Dispatcher()
    peer = Peer(receive, send, dispatcher)
    handlers = Handlers(config, peer, model_id, reload, why)
    handlers.register(dispatcher)
    peer.on_cancel_request = handlers.on_cancel_request
    preload = _start_preload()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signal, tg.cancel_scope)

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
    # (C++ `terminate called without an active exception` from google-re2, exit status -6). Importing
    # takes well under a second; the wait is bounded all the same.
    await anyio.to_thread.run_sync(preload.join, PRELOAD_JOIN_S)
    log.info("input closed; exiting")


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    """SIGTERM or SIGINT (an editor stopping us, Ctrl-C in a terminal): end like stdin EOF, not a traceback."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("%s received; exiting", signal.Signals(signum).name)
            scope.cancel()
            return


def run_stdio(config: Config, model_id: str | None, reload: Reload | None = None, why: str = "") -> int:
    """Serve ACP on stdio. `model_id` None: no usable model yet — sessions answer `auth_required` until an
    `authenticate` finds one through `reload` (which re-reads the config and the credentials); `why` says what
    the person can do about it."""
    from ama_acp.rpc.stdio import protocol_streams

    receive, send = protocol_streams()
    anyio.run(serve, config, model_id, receive, send, reload, why)
    return 0
