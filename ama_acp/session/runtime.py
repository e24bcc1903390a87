"""What a session needs from the connection's shared runtime (the SessionManager), as a Protocol.

Sessions see the manager only through this seam, so they can be built in tests from anything that has these
members. The parts of a session each declare the narrower slice they use (compacting.py `CompactingRuntime`,
host.py `HostRuntime`, accounting.py `AccountingRuntime`, …), which this Protocol satisfies, built from the
slices here that several of them share; nothing here names a session, so the session package has no import
circle.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ama_acp.config import Config, Price
from ama_acp.conversation.messages import Usage
from ama_acp.conversation.tools import ToolSpec
from ama_acp.providers.base import Provider
from ama_acp.providers.catalog import ModelInfo
from ama_acp.rpc.peer import Params
from ama_acp.tools.base import Tool
from ama_acp.wire import types as w

if TYPE_CHECKING:  # only for annotations: imported lazily by the manager (startup)
    from ama_acp.session.commands import Commands
    from ama_acp.session.store.session_store import SessionStore


# Starts a task in a long-lived task group (the connection's): what a session's MCP servers run in.
Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]


class Configured(Protocol):
    """The configuration the connection started with."""

    @property
    def config(self) -> Config: ...


class KnowsClient(Protocol):
    """What the client advertised in `initialize` (ama calls nothing it did not)."""

    @property
    def client_caps(self) -> w.ClientCapabilities: ...


class Stores(Protocol):
    """Where the session files are kept."""

    @property
    def store(self) -> SessionStore: ...


class Runtime(Configured, KnowsClient, Stores, Protocol):
    @property
    def commands(self) -> Commands: ...

    def tool(self, name: str) -> Tool | None: ...

    def tool_specs(self) -> Sequence[ToolSpec]: ...

    def model_info(self, model_id: str) -> ModelInfo | None: ...

    def context_window(self, model_id: str) -> int | None: ...

    def price(self, model_id: str, usage: Usage | None) -> Price | None: ...

    def provider_for(self, model_id: str) -> Provider:
        """A new provider for this model (each session keeps its own)."""
        ...

    def model_choices(self, current: str) -> list[tuple[str, str]]:
        """(id, name) of the models worth offering in this session."""
        ...

    async def send_update(self, session_id: str, update: w.SessionUpdate) -> None: ...

    async def client_request(self, method: str, params: Params, timeout: float | None = None) -> object:
        """A request to the client (fs/*, terminal/*, session/request_permission): its raw JSON result, to be
        decoded by the caller (it is the client's input, so hostile until parsed)."""
        ...
