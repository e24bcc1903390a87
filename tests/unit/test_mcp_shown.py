"""An MCP call's arguments as shown in its permission request (mcp/shown.py)."""

from __future__ import annotations

import json

from ama_acp.mcp.shown import shown_arguments
from ama_acp.secrets import register_secret_values


def test_pretty_json_with_secrets_by_name_shape_and_registration_redacted() -> None:
    register_secret_values(["registered-value-9931"])
    args = {
        "path": "notes/a.md",
        "nested": {"password": "short", "items": ["sk-abcdefghijklmnop1234", 3, None]},
        "text": "see registered-value-9931 here",
    }
    shown = shown_arguments(args)
    assert json.loads(shown) == {
        "path": "notes/a.md",
        "nested": {"password": "[redacted]", "items": ["[redacted]", 3, None]},
        "text": "see [redacted] here",
    }
    assert '\n  "path": "notes/a.md"' in shown


def test_long_arguments_are_clipped_with_a_count() -> None:
    shown = shown_arguments({"text": "é" * 10_000}, limit=100)
    assert shown.startswith('{\n  "text": "éé') and shown.endswith("more characters not shown]")
    assert len(shown) < 160
