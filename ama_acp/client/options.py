"""`ClientOptions`: what the client advertises in `initialize` and how it answers the agent's requests."""

from __future__ import annotations

from dataclasses import dataclass, field

from ama_acp import __version__
from ama_acp.client.confine import Decide
from ama_acp.client.handlers import PermissionPolicy
from ama_acp.config import SandboxConfig
from ama_acp.rpc.dispatch import JSONObject
from ama_acp.sandbox import CONFINED_TERMINALS, sandbox_state

# The longest line the client takes from an agent. Lower than ama's own server cap (rpc/framing.py, 256 MiB): the
# client keeps what it reads in its transcript, and no ACP message a client has to take is near this size.
MAX_LINE = 64 * 1024 * 1024


def _client_info() -> JSONObject:
    return {"name": "ama-acp-client", "title": "ama ACP client", "version": __version__}


@dataclass
class ClientOptions:
    """What the client advertises in `initialize` and how it answers the agent's requests."""

    fs: bool = True  # fs.readTextFile and fs.writeTextFile
    terminal: bool = True
    permission: PermissionPolicy = "allow_once"
    # Unstable session capabilities (advertised as `{}` when true).
    notices: bool = False
    compaction: bool = False
    boolean_config: bool = False
    client_info: JSONObject = field(default_factory=_client_info)
    # Merged last into clientCapabilities, for tests of odd combinations.
    extra_capabilities: JSONObject = field(default_factory=dict)
    # Confinement (ama_acp/client/confine.py). `file_gate`: asked about an fs/* path outside the session's cwd
    # (None: every path is served). `terminal_gate`: asked before every terminal/create (None: every command runs).
    file_gate: Decide | None = None
    terminal_gate: Decide | None = None
    # The sandbox of terminal/create's commands (ama_acp/sandbox/): `[sandbox]` of the client's config (None: they
    # run unconfined), writable in the session's folders and `sandbox_roots` (conformance: the run's folders).
    sandbox: SandboxConfig | None = None
    sandbox_roots: tuple[str, ...] = ()
    # Whether the terminals served confine their commands though `sandbox` is None: the caller wraps them itself
    # (an external agent's, in ama's session). Said to the agent in `_meta` (`CONFINED_TERMINALS`), as an active
    # `sandbox` is, so that it does not send a launcher of its own.
    confined_terminals: bool = False
    # The longest stdout line taken; a longer one is a `line_too_long` violation and the connection ends.
    max_line: int = MAX_LINE
    # Whether the connection keeps what passed (`transcript`, `updates`, `notifications`, `requests_received`), for
    # the tests and the conformance suite to read. False: nothing is kept, and a flood costs no memory: for a
    # long-lived caller that takes the updates through `on_update` (an external agent carrying out a task).
    history: bool = True

    def capabilities(self) -> JSONObject:
        caps: JSONObject = {"fs": {"readTextFile": self.fs, "writeTextFile": self.fs}, "terminal": self.terminal}
        session: JSONObject = {}
        if self.notices:
            session["notices"] = {}
        if self.compaction:
            session["compaction"] = {}
        if self.boolean_config:
            session["configOptions"] = {"boolean": {}}
        if session:
            caps["session"] = session
        if self.terminal and self._confines():
            caps["_meta"] = {CONFINED_TERMINALS: True}
        caps.update(self.extra_capabilities)
        return caps

    def _confines(self) -> bool:
        return self.confined_terminals or (self.sandbox is not None and sandbox_state(self.sandbox).active)
