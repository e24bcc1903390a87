"""Requirements added for what public agents did that the suite misjudged or let through (issue 43), as plain
rows that `registry.py` turns into registry entries (the same form as `coverage.py`).

R26.1 splits from R26 the root fields an earlier published schema defines (conformance/schema/published.py): no
custom field, so reported, never failed. R101 is the digest's "report output as `session/update` notifications for
the same `sessionId`", which the suite once listed as covered by R115: R115 sees only that an update names a session
the client knows, not that it names the session the update belongs to.
"""

from __future__ import annotations

Row = tuple[str, str, str, str, str | None]

WIRE_MORE: tuple[Row, ...] = (
    (
        "R26.1",
        "ADVISORY",
        "extensibility; earlier published schemas",
        """A field at the root of a spec type that the pinned schema does not define but an earlier published
        version of the official schema does (`models` on the session results, from the unstable schema of SDK
        0.17.0) is reported with the version that defines it, not failed under R26: it is no custom field.""",
        None,
    ),
    (
        "R101",
        "MANDATORY",
        "prompt turn § agent reports output; schema: SessionNotification.sessionId",
        """Each `session/update` goes out under the id of the session it belongs to ("the ID of the session this
        update pertains to"): nothing of one session's turns, title or state under another session's id. Checked
        with two sessions of one process, each prompted with words of its own.""",
        None,
    ),
)
