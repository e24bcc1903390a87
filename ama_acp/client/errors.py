"""The client's errors: all in the protocol family (`ama_acp/errors.py`), the JSON-RPC one the server's own.

`RpcError` is `rpc.errors.AcpError` as the client meets it: the agent's error answer to one of the client's
requests, or the client's error answer to one of the agent's (a handler raises it, the connection sends its
`to_dict()`). Every other `AcpError` a handler raises is answered the same way.
"""

from __future__ import annotations

from ama_acp.errors import ProtocolError
from ama_acp.rpc.errors import INTERNAL_ERROR, AcpError


class RpcError(AcpError):
    """A JSON-RPC error between the client and an agent. Shown as `message (code)`: the person reads both."""

    def __str__(self) -> str:
        return f"{self.message} ({self.code})"

    @classmethod
    def from_answer(cls, error: object) -> RpcError:
        """The `error` member of an agent's response, whatever its shape: its own code and words when it gave
        them (a code that is not an integer reads as -32603; the shape itself is judged by the caller)."""
        fields = error if isinstance(error, dict) else {}
        code = fields.get("code", INTERNAL_ERROR)
        return cls(
            code if isinstance(code, int) else INTERNAL_ERROR, str(fields.get("message", "")), fields.get("data")
        )


class AgentExited(ProtocolError):
    """The agent's stdout ended (it exited or closed it) while we still expected something."""

    def __init__(self, message: str, returncode: int | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode


class AgentStartError(ProtocolError):
    """The agent command could not be started at all."""
