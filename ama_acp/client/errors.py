"""The client's errors: all in the protocol family (`ama_acp/errors.py`), the JSON-RPC one the server's own.

`RpcError` is `rpc.errors.AcpError` as the client meets it: the agent's error answer to one of the client's
requests, or the client's error answer to one of the agent's (a handler raises it, the connection sends its
`to_dict()`). Every other `AcpError` a handler raises is answered the same way.
"""

from __future__ import annotations

from ama_acp.errors import ProtocolError
from ama_acp.rpc.errors import INTERNAL_ERROR, AcpError


class RpcError(AcpError):
    """A JSON-RPC error between the client and an agent. Shown as sentences: `message (code)`, then the words
    its `data` carries for people (`details`, `reason` — where toad and others look), then the sign-in methods an
    `auth_required` offers; never the `data` object itself (a Python dict repr is no message)."""

    def __str__(self) -> str:
        words = _data_words(self.message, self.data)
        if not words:
            return f"{self.message} ({self.code})"
        return " ".join([f"{_sentence(self.message)} ({self.code}).", *words])

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


def _sentence(text: str) -> str:
    return text.rstrip().rstrip(".")


def _data_words(message: str, data: object) -> list[str]:
    """What an error's `data` says to a person: its string `details`/`reason` (each once, and not when the
    message already says it), a string `data`, and the names of the sign-in methods it offers."""
    if isinstance(data, str):
        return [f"{_sentence(data)}."] if data.strip() and data.strip() not in message else []
    if not isinstance(data, dict):
        return []
    return [*_reasons(message, data), *_sign_in_methods(data)]


def _reasons(message: str, data: dict[str, object]) -> list[str]:
    said, words = [message], []
    for key in ("details", "reason"):
        text = data.get(key)
        if isinstance(text, str) and text.strip() and not any(text.strip() in s for s in said):
            said.append(text)
            words.append(f"{_sentence(text)}.")
    return words


def _sign_in_methods(data: dict[str, object]) -> list[str]:
    methods = data.get("authMethods")
    listed = methods if isinstance(methods, list) else []
    names = [str(m.get("name") or m.get("id")) for m in listed if isinstance(m, dict)]
    return [f"Sign-in methods: {', '.join(names)}."] if names else []
