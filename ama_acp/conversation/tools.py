"""Tool declarations: a tool as the model sees it (what providers put in a request's tool list)."""

from __future__ import annotations

from typing import Any

import msgspec


class ToolSpec(msgspec.Struct, frozen=True):
    """A tool as the model sees it."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
