"""Composition root of `ama --mode acp`: stdio → peer → dispatcher → handlers → session manager."""

from __future__ import annotations

import logging

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from ama_acp.config import Config
from ama_acp.handlers import Handlers
from ama_acp.rpc.dispatch import Dispatcher
from ama_acp.rpc.peer import Peer
from ama_acp.session.manager import SessionManager

log = logging.getLogger(__name__)


async def serve(config: Config, model_id: str, receive: ByteReceiveStream, send: ByteSendStream) -> None:
    dispatcher = Dispatcher()
    peer = Peer(receive, send, dispatcher)
    manager = SessionManager(config, peer, default_model=model_id)
    handlers = Handlers(manager)
    handlers.register(dispatcher)
    manager.register_methods(dispatcher)
    peer.on_cancel_request = handlers.on_cancel_request
    try:
        await peer.run()
    finally:
        with anyio.CancelScope(shield=True):
            await manager.shutdown()
    log.info("input closed; exiting")


def run_stdio(config: Config, model_id: str) -> int:
    from ama_acp.rpc.stdio import protocol_streams

    receive, send = protocol_streams()
    anyio.run(serve, config, model_id, receive, send)
    return 0
