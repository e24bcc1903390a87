"""Reading the agent's JSON without trusting its shape: a field that should be an object or an array and is not
reads as empty, so a check goes on and the schema check (R4) is what reports the wrong type."""

from __future__ import annotations

from typing import Any


def obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def arr(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
