"""An MCP tool call's arguments as the person is shown them when asked to allow it: pretty JSON, without secrets,
clipped.

ama's own tools show the command or the diff; an MCP tool's effect is only in its arguments (what `write_note`
will write). They come from the model, which may have read the session's MCP secrets (a token in a server's
URL or arguments, registered by `scrub.py`) or copied a key from a file: a value under a secret-looking name, a
key-shaped value and any registered secret are replaced with `[redacted]` before the text leaves ama.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ama_acp.mcp.scrub import REDACTED, looks_like_key
from ama_acp.redact import redact
from ama_acp.secrets import is_secret_name

__all__ = ["MAX_SHOWN", "shown_arguments", "shown_input"]

# A dialog, not a file viewer: enough to judge the call by; the rest is counted.
MAX_SHOWN = 4000


def shown_arguments(args: Mapping[str, object], limit: int = MAX_SHOWN) -> str:
    text = json.dumps(_scrubbed(dict(args)), indent=2, ensure_ascii=False, default=str)
    text = redact(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [{len(text) - limit} more characters not shown]"


def shown_input(name: str, args: object) -> object:
    """A tool call's `rawInput` as it goes to the editor: an MCP tool's arguments scrubbed the same way as in the
    dialog (every string through the redactor too), ama's own tools' as they are (their arguments are paths,
    commands and edits the person is shown anyway)."""
    if not name.startswith("mcp__") or not isinstance(args, Mapping):
        return args
    return _redacted(_scrubbed(dict(args)))


def _redacted(value: object) -> object:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def _scrubbed(value: object, depth: int = 0) -> object:
    if depth > 50:  # deeper than any real argument: shown as a marker rather than walked
        return "…"
    if isinstance(value, str):
        return REDACTED if looks_like_key(value) else value
    if isinstance(value, Mapping):
        return {
            str(k): REDACTED if isinstance(v, str) and is_secret_name(str(k)) else _scrubbed(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_scrubbed(v, depth + 1) for v in value]
    return value
