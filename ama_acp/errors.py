"""Every exception ama defines belongs to one family, one family per layer; this module is the whole tree.

It imports nothing of ama (it is the ground floor), so any module may import it. The classes below are the
family roots; each layer defines its own members next to the code that raises them (the names stay where
callers import them from), and `tests/unit/test_error_families.py` checks that every exception class in
`ama_acp/` derives from exactly one root. `docs/errors.md` says what each becomes on the wire or for the
person, with the table of JSON-RPC codes (their names are in `rpc/errors.py`). `causes`, at the end, walks down
what an exception wraps, for the callers that look for the error a library wrapped.

    AmaError
    ├── ProtocolError             transport and protocol: JSON-RPC 2.0 / ACP over stdio
    │   ├── rpc.errors.AcpError            a JSON-RPC error ama answers a request with (handlers raise it,
    │   │   │                              the dispatcher turns it into the error object)
    │   │   └── client.errors.RpcError     (ama's own client) a JSON-RPC error from or for the agent
    │   ├── rpc.errors.ClientError         the client answered one of ama's requests with an error
    │   ├── rpc.framing.LineTooLong        an incoming line longer than the limit (the connection closes)
    │   ├── mcp.lines.LineTooLong          an MCP server's stdio line longer than the limit (the server fails)
    │   ├── rpc.peer.PeerClosed            the connection ended before the client answered
    │   ├── session.editor.client.MalformedAnswer  the client answered one of ama's requests with a shape its schema
    │   │                                  does not allow (a tool call fails, a permission is refused)
    │   ├── client.errors.AgentExited      (ama's own client) the agent's stdout ended
    │   ├── client.errors.AgentStartError  (ama's own client) the agent could not be started
    │   ├── client.terminal.sessions.NotOffered     (ama's own client) --load/--resume/--list the agent did not offer
    │   └── client.terminal.slash.CommandError      (ama's own client) a /mode, /model or /option it cannot carry out
    ├── ConfigError               configuration: the TOML file, the environment, the command line
    │   ├── providers.resolve.ModelError   a model id that is not provider/model
    │   ├── providers.scripted.ScriptError a script file for the scripted provider that cannot be used
    │   ├── shaping.front_matter.FrontMatterError  a Markdown file's front matter ama cannot read (with its line)
    │   ├── shaping.commands.CommandFileError      a command file that is not a command (with its line)
    │   ├── shaping.hooks.HookError        a `[[hooks]]` entry that is not a hook (skipped, with its line)
    │   ├── credentials.CredentialsError   the credentials file exists but cannot be used
    │   └── setup.choices.SetupError       `ama setup` cannot go on (a bad flag or answer, a refused key)
    ├── ProviderError             a model request; never escapes a provider (see below)
    │   ├── providers.failures.StreamError  the server broke the stream or the dialect
    │   ├── providers.stream._DeadlineExceeded  the whole-request deadline passed
    │   ├── providers.window_probe.ProbeFailed  asking a server the window it serves got no answer
    │   └── agent.compaction.CompactionFailed  the model could not write the handoff
    ├── ToolError                 a tool failed in a way the model should hear about (tools.base.ToolError)
    │   ├── tools.search.globs.GlobError          (also ValueError) an unusable glob
    │   ├── tools.workspace.BinaryFileError  (also ValueError) a file that is not UTF-8 text
    │   ├── tools.regular.NotRegularFileError  (also OSError) a FIFO, a device, a file under /proc ...
    │   └── tools.web.isolated.ConversionFailed  the child converting a deep page gave no Markdown back
    ├── StoreError                the session files (session.store.session_store.StoreError)
    │   ├── session.store.errors.SessionNotFound  (session.store.session_store re-exports these)
    │   │   └── session.store.errors.InvalidSessionId  (also ValueError)
    │   ├── session.store.errors.SessionExists
    │   ├── session.store.errors.SessionBusy
    │   ├── session.store.errors.SessionFormatError
    │   │   └── session.store.errors.NotASessionFile  a FIFO, link, device or directory under a session's name
    │   ├── session.store.errors.SessionWriteError  (also OSError)
    │   ├── session.store.files.NotRegularFile  (also OSError)
    │   ├── session.store.checkpoint_files.Unreadable  a file whose before-state /rewind cannot copy (the write goes on)
    │   ├── session.store.listing.InvalidCursor  (also ValueError) a session/list cursor this store did not issue
    │   └── ownfiles.OwnFileRefused  (also OSError) a link, FIFO, device or oversized file in ama's own folders
    │       ├── ownfiles.LinkRefused
    │       ├── ownfiles.NotRegular
    │       └── ownfiles.TooLarge
    └── ControlFlow               not errors: exceptions that unwind a stack on purpose
        ├── agent.loop.TurnEnd              the turn is over; carries the ACP stop reason
        ├── client.terminal.turn.Interrupted         (ama's own client) Ctrl-C twice
        ├── client.terminal.tty_input.LineInterrupted  (ama's own client) Ctrl-C while a line is read
        ├── doctor._Unreachable             `ama doctor`: a provider that did not answer (a line of the report)
        ├── doctor._Untrusted               `ama doctor`: a provider whose TLS certificate failed verification
        └── doctor._NotSent                 `ama doctor`: a check that could not be sent (a line of the report)

Who raises, who catches:
- ProtocolError: `rpc/` and the handlers raise `AcpError`; `rpc/dispatch.py` answers it as a JSON-RPC error
  (any other exception out of a handler is a bug: logged under `UNEXPECTED` and answered -32603).
  `ClientError` is raised by `rpc/peer.py` to the code that sent the request (a tool, the permission prompt),
  which shows the client's own words; `MalformedAnswer` by `session/editor/client.py` to the same code, which fails
  the tool call or refuses the permission with the reason.
- ConfigError: `config.py` raises it while loading; `cli.py` prints it and exits 2. `ModelError` and
  `ScriptError` are caught by `providers/resolve.py` and become a provider that fails with kind "config".
- ProviderError: providers do not raise for a failed request. Every failure reaches the agent loop as a
  `providers.base.Failure` event (retries first announced as `Retrying`), so the loop has one place that
  decides what the person sees. `StreamError` and `_DeadlineExceeded` are raised inside the providers and
  caught in `providers/stream.py` to become that event; `CompactionFailed` is caught by `session/turn/compacting.py`.
- ToolError: tools raise it; the agent loop catches it and the tool call ends failed with its message, which
  the model reads as the tool's result. Any other exception out of a tool is logged as a bug and reported as
  "<tool> failed unexpectedly".
- StoreError: the store (`session/store/session_store.py`, `reader.py`, `writer.py`, `locks.py`, `listing.py`) raises it; the session layer turns it into an
  `AcpError` (not found, invalid params) or, for `SessionWriteError`, a notice that the session is not saved.
- ControlFlow: caught by the code that raised it (the loop, the client's main), never reported.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["AmaError", "ConfigError", "ControlFlow", "ProtocolError", "ProviderError", "StoreError", "ToolError"]


class AmaError(Exception):
    """Base of every exception ama defines."""


class ProtocolError(AmaError):
    """Transport and protocol: a JSON-RPC 2.0 / ACP message that is wrong, an error answered, a closed pipe."""


class ConfigError(AmaError):
    """The configuration cannot be used; the message says where and why."""


class ProviderError(AmaError):
    """A model request failed. Internal to the provider layer: what leaves a provider is a `Failure` event."""


class ToolError(AmaError):
    """A tool failed in a way the model should hear about (bad arguments, missing file, ...)."""


class StoreError(AmaError):
    """The session store's errors: a session file that is missing, busy, unreadable or unwritable; and any file
    of ama's own folders refused by the one opener (ownfiles.py)."""


class ControlFlow(AmaError):
    """Not an error: raised to unwind to a known handler (the end of a turn, an interrupt), never reported."""


def causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what it wraps (`raise ... from`, else the exception being handled when it was raised), each
    once: a chain that loops back ends. Libraries wrap the error a person can act on (httpx wraps the socket's and
    the TLS handshake's), and the callers look for it here."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        yield cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
