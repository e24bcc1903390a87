"""The ACP `mcpServers` items, decoded into typed specs; everything else is a person-worded problem.

The editor's list is hostile input like any other: each item is checked on its own, a bad item is refused
with a reason that names it (by position and name, never by an env or header value), and the good ones go on.

Duplicate names: the later item is refused. A server's name is part of its tools' names (`mcp__<server>__…`)
and of what a person allowed "always", so silently renaming one would make a grant or a log line point at
the wrong server.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

import msgspec

from ama_acp.mcp.scrub import arg_secrets, public_args, public_url, url_secrets

__all__ = ["MAX_SERVERS", "McpServerSpec", "parse_servers"]

MAX_SERVERS = 64  # more than any editor sends; bounds the processes one session/new can start
MAX_NAME_CHARS = 128
MAX_ARGS = 1024
MAX_PAIRS = 512  # env variables or headers on one server
MAX_TEXT_CHARS = 32_768  # one command, argument, URL, name or value
# RFC 9110 token: what an HTTP header name may be made of.
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")

Transport = Literal["stdio", "http", "sse"]


class McpServerSpec(msgspec.Struct, frozen=True):
    """One server as the editor gave it. `env` and `headers` hold values that may be credentials: they go
    to the server and nowhere else (repr shows their names only; `public()` is what may be stored or logged)."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def public(self) -> dict[str, object]:
        """What may be stored, shown or logged (mcp/scrub.py): env and header names only, the arguments with
        secret-looking values replaced, and the URL without userinfo, query, fragment or key-shaped path parts."""
        out: dict[str, object] = {"name": self.name, "transport": self.transport}
        if self.transport == "stdio":
            out["command"] = self.command
            out["args"] = public_args(self.args)
            out["env"] = [name for name, _ in self.env]
        else:
            out["url"] = public_url(self.url or "")
            out["headers"] = [name for name, _ in self.headers]
        return out

    def hidden_values(self) -> list[str]:
        """The values `public()` leaves out of the arguments and the URL, to be redacted wherever else they turn
        up (the log, the session file)."""
        return arg_secrets(self.args) + url_secrets(self.url or "")

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.public().items())
        return f"McpServerSpec({fields})"

    def __rich_repr__(self) -> list[tuple[str, object]]:
        # msgspec's own __rich_repr__ would list every field, values included.
        return list(self.public().items())


def parse_servers(raw: object) -> tuple[list[McpServerSpec], list[str]]:
    """Specs that decode, and a person-worded problem for each item that does not.

    A bare command name is accepted (it is looked up only in absolute PATH entries outside the workspace:
    tools/programs.py); an empty name, a wrong shape, a value with a NUL, a URL that is not http(s), or a second
    server of the same name is refused.
    """
    specs: list[McpServerSpec] = []
    problems: list[str] = []
    if not isinstance(raw, list):
        return [], ["mcpServers is not a list: no MCP servers were started"]
    seen: set[str] = set()
    for index, item in enumerate(raw):
        label = f"MCP server #{index + 1}"
        if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"].strip():
            label += f" ({_clip(item['name'])!r})"
        if index >= MAX_SERVERS:
            problems.append(f"{label}: ignored, at most {MAX_SERVERS} MCP servers are started per session")
            continue
        try:
            spec = _parse_one(item)
        except ValueError as exc:  # the item's reason for refusal: a line of the problems list
            problems.append(f"{label}: {exc}")
            continue
        if spec.name in seen:
            problems.append(f"{label}: ignored, an earlier MCP server has the same name")
            continue
        seen.add(spec.name)
        specs.append(spec)
    return specs, problems


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _parse_one(item: object) -> McpServerSpec:
    if not isinstance(item, dict):
        raise ValueError(f"is not an object (got {type(item).__name__})")
    kind = _transport(item)
    name = _name(item)
    if kind == "stdio":
        return _stdio_spec(item, name)
    return _remote_spec(item, name, kind)


def _transport(item: dict[str, object]) -> Transport:
    kind = item.get("type", "stdio")
    if kind is None or kind == "stdio":
        return "stdio"
    if kind == "http" or kind == "sse":
        return kind
    shown = _clip(kind) if isinstance(kind, str) else type(kind).__name__
    raise ValueError(f"unknown transport type {shown!r} (expected stdio, http or sse)")


def _name(item: dict[str, object]) -> str:
    name = _text(item, "name", required=True)
    if not name.strip():
        raise ValueError("has an empty name")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"has a name longer than {MAX_NAME_CHARS} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError("has a control character in its name")
    return name


def _stdio_spec(item: dict[str, object], name: str) -> McpServerSpec:
    command = _text(item, "command", required=True)
    if not command.strip():
        raise ValueError("has an empty command")
    args = _list(item, "args", MAX_ARGS)
    arg_values = []
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            raise ValueError(f"argument {i + 1} is not a string")
        _check_text(arg, f"argument {i + 1}")
        arg_values.append(arg)
    env = _pairs(item, "env", "environment variable")
    for env_name, _ in env:
        if "=" in env_name:
            raise ValueError(f"environment variable name {_clip(env_name)!r} contains '='")
    return McpServerSpec(name=name, transport="stdio", command=command, args=tuple(arg_values), env=env)


def _remote_spec(item: dict[str, object], name: str, kind: Transport) -> McpServerSpec:
    url = _text(item, "url", required=True)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        raise ValueError("has a URL that cannot be parsed") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"has a URL that is not http(s)://host/…: {public_url(url)!r}")
    headers = _pairs(item, "headers", "header")
    for header_name, value in headers:
        if not _HEADER_NAME.match(header_name):
            raise ValueError(f"header name {_clip(header_name)!r} is not a valid HTTP header name")
        if any(c in value for c in "\r\n"):
            raise ValueError(f"header {header_name!r} has a line break in its value")
    return McpServerSpec(name=name, transport=kind, url=url, headers=headers)


def _text(item: dict[str, object], key: str, *, required: bool) -> str:
    value = item.get(key)
    if value is None:
        if required:
            raise ValueError(f"has no {key!r}")
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{key!r} is not a string")
    _check_text(value, repr(key))
    return value


def _check_text(value: str, what: str) -> None:
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL character")
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"{what} is longer than {MAX_TEXT_CHARS} characters")


def _list(item: dict[str, object], key: str, limit: int) -> list[object]:
    value = item.get(key)
    if value is None:  # the schema: null deserialises to the default, an empty list
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key!r} is not a list")
    if len(value) > limit:
        raise ValueError(f"{key!r} has more than {limit} items")
    return value


def _pairs(item: dict[str, object], key: str, what: str) -> tuple[tuple[str, str], ...]:
    """[{name, value}] → ((name, value), ...). Problems name the entry, never its value."""
    out: list[tuple[str, str]] = []
    for i, entry in enumerate(_list(item, key, MAX_PAIRS)):
        if not isinstance(entry, dict):
            raise ValueError(f"{what} {i + 1} is not an object with a name and a value")
        name, value = entry.get("name"), entry.get("value")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{what} {i + 1} has no name")
        if not isinstance(value, str):
            raise ValueError(f"{what} {_clip(name)!r} has no string value")
        _check_text(name, f"{what} name {i + 1}")
        if "\x00" in value:
            raise ValueError(f"{what} {_clip(name)!r} has a NUL character in its value")
        if len(value) > MAX_TEXT_CHARS:
            raise ValueError(f"{what} {_clip(name)!r} has a value longer than {MAX_TEXT_CHARS} characters")
        out.append((name, value))
    return tuple(out)
