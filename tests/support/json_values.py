"""The JSON a peer sent, as a test reads it. ama's client hands on what an agent answered as a JSONValue (any JSON
at all); a test expects a shape. `as_object`, `as_list` and `as_str` assert that shape where the test reads it — a
wrong one fails there, saying what came instead — and hand the value on typed. An object's members are Any: the
test walks the JSON the way it expects it to be, and its own asserts are what check it.
"""

from __future__ import annotations

from typing import Any


def as_object(value: object) -> dict[str, Any]:
    assert isinstance(value, dict), f"not a JSON object: {value!r:.300}"
    return value


def as_list(value: object) -> list[Any]:
    assert isinstance(value, list), f"not a JSON array: {value!r:.300}"
    return value


def as_str(value: object) -> str:
    assert isinstance(value, str), f"not a JSON string: {value!r:.300}"
    return value


def session_id(result: object) -> str:
    """The `sessionId` of a session/new (or fork) result."""
    return as_str(as_object(result)["sessionId"])
