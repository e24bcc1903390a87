"""ama's own ACP client: drives any ACP agent over stdio (`ama acp-client`, `ama demo`, the tests)."""

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
