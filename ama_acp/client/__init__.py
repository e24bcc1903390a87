"""ama's own ACP client: drives any ACP agent over stdio (`ama acp-client`, `ama demo`, the tests).

The names below are imported on first use (PEP 562): ama's sessions import `ama_acp.client.process_group` at
every start (session/tasks/external/agent.py), and importing this package must not build the whole client with it
(~10 ms of every ama process).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ama_acp.client.connection import (
        CAPTURE,
        AgentExited,
        AgentProcess,
        AgentStartError,
        ClientOptions,
        PendingRequest,
        TranscriptEntry,
        Violation,
    )
    from ama_acp.client.errors import RpcError

__all__ = [
    "CAPTURE",
    "AgentExited",
    "AgentProcess",
    "AgentStartError",
    "ClientOptions",
    "PendingRequest",
    "RpcError",
    "TranscriptEntry",
    "Violation",
]

_HOME = {name: "ama_acp.client.errors" if name == "RpcError" else "ama_acp.client.connection" for name in __all__}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # once: the next lookup is a plain attribute
    return value
