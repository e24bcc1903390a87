"""Writing TOML: the standard library reads it (tomllib) but does not write it, and the config must be written.

`dumps(data)` renders what `tomllib.loads` returns (tables, arrays of tables, strings, numbers, booleans, dates)
so that loading it gives the same data back; the tests check that over generated configs. `string` and `key`
are also what write.py uses to patch single lines of an existing file.

Why not tomlkit (tried in issue 24, measured): it would remove ~100 lines net (this module and write.py's line
patching), at +24 ms to import, but putting a new key where a person would (after the table's last key, not
under the comment that heads the next table) needs its private `Container._insert_after`/`_insert_at`, and its
in-place edits of inline tables come out uneven (`{ id = "a" }, {id = "b"}`, `kind = "x",base_url = …`).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from typing import Any

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def string(text: str) -> str:
    """A TOML basic string. A lone surrogate (undecodable bytes from argv) has no TOML form: ValueError."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError("a string with a lone surrogate cannot be written as TOML")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def key(name: str) -> str:
    return name if _BARE.fullmatch(name) else string(name)


def value(v: Any) -> str:
    """An inline value: what stands right of `=`."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, str):
        return string(v)
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    return _inline(v)


def _inline(v: Any) -> str:
    """An inline array or table."""
    if isinstance(v, list | tuple):
        return "[" + ", ".join(value(item) for item in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{key(k)} = {value(item)}" for k, item in v.items()) + "}"
    raise TypeError(f"no TOML form for {type(v).__name__}")


def _float(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)  # repr round-trips and is TOML: 1.0, 1e+16, 5e-324


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(item, Mapping) for item in v)


def dumps(data: Mapping[str, Any]) -> str:
    lines: list[str] = []
    _table(lines, [], data)
    return "\n".join(lines).lstrip("\n") + "\n"


def _table(lines: list[str], path: list[str], table: Mapping[str, Any]) -> None:
    # TOML wants a table's own keys before any sub-table header: scalars first, then tables, then arrays of them.
    for k, v in table.items():
        if not isinstance(v, Mapping) and not _is_table_array(v):
            lines.append(f"{key(k)} = {value(v)}")
    for k, v in table.items():
        if isinstance(v, Mapping):
            _sub_table(lines, [*path, k], v)
    for k, v in table.items():
        if _is_table_array(v):
            for item in v:
                lines.extend(["", "[[" + _dotted([*path, k]) + "]]"])
                _table(lines, [*path, k], item)


def _sub_table(lines: list[str], path: list[str], table: Mapping[str, Any]) -> None:
    # A table holding only tables needs no header of its own: `[providers.local]` defines `providers`.
    only_tables = bool(table) and all(isinstance(x, Mapping) or _is_table_array(x) for x in table.values())
    if not only_tables:
        lines.extend(["", "[" + _dotted(path) + "]"])
    _table(lines, path, table)


def _dotted(path: list[str]) -> str:
    return ".".join(key(p) for p in path)
