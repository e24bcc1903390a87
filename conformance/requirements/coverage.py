"""The requirements the coverage groups (conformance/groups/coverage_*.py) decide, as plain rows that
`requirements.py` turns into registry entries (kept apart so the registry module stays one sitting long, and plain
so this module imports nothing of the registry's).

Each row: (id, tier name, section, text, gate). A `.1` id checks a part of a digest item that its plain id does
not (R30's "lines start at 1", R53's "each session keeps its own history", …). `used:` gates name what the agent
chose to do (put line numbers on the wire, send message ids, cancel its own requests): where it never did, there
is nothing to judge and the requirement is SKIPPED.
"""

from __future__ import annotations

Row = tuple[str, str, str, str, str | None]

COVERAGE: tuple[Row, ...] = (
    (
        "R24",
        "CAPABILITY",
        "cancellation § $/cancel_request",
        """A `$/cancel_request` the agent sends is a notification naming a request the agent itself sent the
        client, and the agent takes the -32800 answer to it in its stride: the turn still ends with a stop
        reason.""",
        "used:cancel_request",
    ),
    (
        "R30.1",
        "CAPABILITY",
        "overview § argument requirements",
        """Line numbers the agent puts on the wire (the `line` of fs/read_text_file, of tool-call locations)
        start at 1: never 0.""",
        "used:lines",
    ),
    (
        "R49",
        "ADVISORY",
        "authentication",
        "After a successful `authenticate`, `session/new` no longer answers `auth_required` (-32000).",
        "authMethods.agent",
    ),
    (
        "R51",
        "ADVISORY",
        "authentication § logout (derived)",
        """After `logout`, a new session of an agent whose sessions need sign-in answers `auth_required` (-32000)
        again (an agent whose sessions never needed sign-in is not judged).""",
        "auth.logout",
    ),
    (
        "R53.1",
        "ADVISORY",
        "session setup (derived)",
        """Each session keeps its own history: what was said in one session reaches neither the model requests
        nor the `session/load` replay of another.""",
        None,
    ),
    (
        "R64",
        "CAPABILITY",
        "session setup § additional roots (RFD)",
        """A `session/load` or `session/resume` without `additionalDirectories` leaves the session's stored roots
        out: they are not reactivated (session/list shows none for it).""",
        "sessionCapabilities.additionalDirectories",
    ),
    (
        "R65.1",
        "CAPABILITY",
        "session setup § additional roots (RFD)",
        """`additionalDirectories` is validated wherever it comes: a value that is not an array of strings is
        rejected by `session/new`, and a relative or empty entry by `session/load` too (by `session/resume` when the agent cannot load).""",
        "sessionCapabilities.additionalDirectories",
    ),
    (
        "R66.1",
        "CAPABILITY",
        "session setup § loading sessions",
        """The `session/load` replay carries a turn's tool calls too, as `tool_call` updates under the ids it
        announces (and its thoughts and plans, when the live turn had them), in the shapes of a live turn.""",
        "loadSession",
    ),
    (
        "R68",
        "CAPABILITY",
        "session setup § loading sessions; RFD message-id",
        "Message ids in a `session/load` replay are unique per replayed message: no two messages share one.",
        "used:messageId",
    ),
    (
        "R82",
        "ADVISORY",
        "session list",
        """`nextCursor` comes only when more sessions exist: a cursor never leads to an empty last page.""",
        "sessionCapabilities.list",
    ),
    (
        "R84",
        "ADVISORY",
        "session list; schema: SessionInfo",
        """`session/list` shows `additionalDirectories` only when the agent advertises them, and then as the
        session's complete list, in order.""",
        "sessionCapabilities.list",
    ),
    (
        "R85",
        "ADVISORY",
        "session list; RFD session-info-update",
        """A title the agent set with `session_info_update` shows in later `session/list` results (the RFD's
        should*; its other points — whose sessions are listed, stable cursors — are the agent's own store).""",
        "sessionCapabilities.list",
    ),
    (
        "R98",
        "ADVISORY",
        "session config options § modes during the transition",
        """An agent that returns both `modes` and a config option of category `mode` keeps them consistent: the
        same mode at session/new, and the option follows a `session/set_mode`.""",
        "modes",
    ),
    (
        "R117",
        "CAPABILITY",
        "prompt turn § message ids",
        """A `messageId` names one message: the chunks of one message share it and no other message of the session
        (another turn's, or a message of another kind) reuses it.""",
        "used:messageId",
    ),
    (
        "R128",
        "CAPABILITY",
        "session config options",
        """Every `config_option_update` carries the complete config state: every option the session has, with
        its current value, as the `set_config_option` response does.""",
        "configOptions",
    ),
    (
        "R143",
        "ADVISORY",
        "client methods (derived)",
        """When the client fails one of the agent's requests (a file it cannot open: -32002), the turn still
        ends with a stop reason, not an error, and the agent goes on serving.""",
        None,
    ),
)
