"""Root fields that a published version of the official ACP schema defines and the pinned one does not.

R26 fails a field at the root of a spec type that no schema defines. An agent built on an earlier SDK may send a
field that SDK's schema defined and a later one dropped: that is no custom field, so it is reported under R26.1
(ADVISORY), naming the version that has it, and never fails R26 (acp-tck keeps unknown root fields advisory for
the same reason). Only the pinned version is vendored (schema/pin.json), so the earlier ones are this table:
definition -> field -> the schema that defines it.

Source of each entry:

- `models` (`SessionModelState`, the session's current and available models, with the unstable
  `session/set_model`): the unstable schema (`schema.unstable.json`) of the npm package
  `@agentclientprotocol/sdk` 0.17.0, on the results of `session/new`, `session/load`, `session/resume` and
  `session/fork`; the Claude adapters, kimi-cli and others built on it send it (issue 43, seen on the wire).
"""

from __future__ import annotations

_SDK_0_17 = "the unstable schema of @agentclientprotocol/sdk 0.17.0"

PUBLISHED_ROOT_FIELDS: dict[str, dict[str, str]] = {
    "NewSessionResponse": {"models": _SDK_0_17},
    "LoadSessionResponse": {"models": _SDK_0_17},
    "ResumeSessionResponse": {"models": _SDK_0_17},
    "ForkSessionResponse": {"models": _SDK_0_17},
}


def published_in(definition: str, field: str) -> str | None:
    """The published schema that defines `field` at the root of `definition`, or None."""
    return PUBLISHED_ROOT_FIELDS.get(definition, {}).get(field)
