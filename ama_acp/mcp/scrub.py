"""What of an MCP server's spec may be shown, logged or stored: URLs without their credentials, arguments without
the values that look like keys.

The editor's list carries secrets in more places than `env` and `headers`: a token in a URL's query
(`?token=…`), in its userinfo (`user:pass@`) or as a path segment (`/mcp/sk-…/sse`), and an API key on the
command line (`--api-key VALUE`, `--token=…`). Those parts are replaced with `[redacted]` in everything ama
writes, and their values are registered as secrets (`ama_acp.secrets.register_secret_values`), so the log's and
the session file's redactor also catches them where they turn up inside other text (an SDK's exception, a tool
echoing its command line).

Which names are secret is `ama_acp.secrets.is_secret_name`, the rule ama's own environment uses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit, urlunsplit

from ama_acp.secrets import is_secret_name

__all__ = ["REDACTED", "arg_secrets", "looks_like_key", "public_args", "public_url", "scrub_urls", "url_secrets"]

REDACTED = "[redacted]"

# Shapes of credentials that mean a key whatever their name: provider and platform key prefixes, JWTs.
_KEY_PREFIX = re.compile(
    r"^(sk|pk|rk)[-_][A-Za-z0-9_-]{8,}"
    r"|^(ghp|gho|ghu|ghs|ghr|github_pat|glpat|npm|hf|xox[abprse])[-_][A-Za-z0-9_-]{8,}"
    r"|^(AKIA|ASIA)[A-Z0-9]{12,}"
    r"|^AIza[A-Za-z0-9_-]{20,}"
    r"|^eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+"
)
# A long run of token characters mixing upper case, lower case and digits (a random key), or long hex.
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9_\-+/=]{20,}$")
_HEX = re.compile(r"^[0-9a-fA-F]{32,}$")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
# `Authorization: Bearer …`, `token: …` inside one argument (a header passed on the command line).
_HEADER_LIKE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_-]*)\s*:\s*(.+)$")


def looks_like_key(value: str) -> bool:
    """Whether a value has the shape of a credential (by its text alone, not its name)."""
    value = value.strip()
    if len(value) < 16:
        return False
    if _KEY_PREFIX.match(value) or _HEX.match(value):
        return True
    if _TOKEN_CHARS.match(value):
        return any(c.islower() for c in value) and any(c.isupper() for c in value) and any(c.isdigit() for c in value)
    return False


def _flag_name(arg: str) -> str:
    return arg.lstrip("-")


def _secret_flag(arg: str) -> bool:
    return arg.startswith("-") and "=" not in arg and is_secret_name(_flag_name(arg))


def _public_arg(arg: str) -> tuple[str, list[str]]:
    """One argument made fit to store, and the secret values taken out of it."""
    for rule in _ARG_RULES:
        public = rule(arg)
        if public is not None:
            return public
    return arg, []


def _url_arg(arg: str) -> tuple[str, list[str]] | None:
    if "://" not in arg or not _URL.search(arg):
        return None
    public = scrub_urls(arg)
    return public, ([arg] if public != arg else [])


def _assignment_arg(arg: str) -> tuple[str, list[str]] | None:
    """`--token=VALUE`, `KEY=VALUE`: the value, when the name is a secret's or the value looks like a key."""
    name, eq, value = arg.partition("=")
    if eq and value and (is_secret_name(_flag_name(name)) or looks_like_key(value)):
        return f"{name}={REDACTED}", [value]
    return None


def _header_arg(arg: str) -> tuple[str, list[str]] | None:
    header = _HEADER_LIKE.match(arg)
    if header is None:
        return None
    name, value = header.group(1), header.group(2)
    if name.lower() in ("authorization", "proxy-authorization", "cookie") or is_secret_name(name):
        return f"{name}: {REDACTED}", [value.strip(), *value.split()[1:]]
    return None


def _auth_scheme_arg(arg: str) -> tuple[str, list[str]] | None:
    """`Bearer TOKEN` and the like: the token."""
    scheme, space, token = arg.partition(" ")
    if space and scheme.lower() in ("bearer", "basic", "token") and token.strip():
        return f"{scheme} {REDACTED}", [token.strip()]
    return None


def _key_arg(arg: str) -> tuple[str, list[str]] | None:
    return (REDACTED, [arg]) if looks_like_key(arg) else None


# Tried in order; the first that finds a secret in an argument says how it is stored.
_ARG_RULES: tuple[Callable[[str], tuple[str, list[str]] | None], ...] = (
    _url_arg,
    _assignment_arg,
    _header_arg,
    _auth_scheme_arg,
    _key_arg,
)


def _args(args: Iterable[str]) -> tuple[list[str], list[str]]:
    out: list[str] = []
    secrets: list[str] = []
    after_secret_flag = False
    for arg in args:
        if after_secret_flag:
            after_secret_flag = False
            out.append(REDACTED)
            secrets.append(arg)
            continue
        public, found = _public_arg(arg)
        out.append(public)
        secrets.extend(found)
        after_secret_flag = _secret_flag(arg)
    return out, secrets


def public_args(args: Iterable[str]) -> list[str]:
    """The arguments with every secret-looking value replaced: the value after `--api-key`/`--token`/… (any
    flag whose name `is_secret_name`), after `=` in `--token=…`, a header's value, anything key-shaped, and a
    URL's credentials."""
    return _args(args)[0]


def arg_secrets(args: Iterable[str]) -> list[str]:
    """The values `public_args` takes out (to register as secrets)."""
    return _args(args)[1]


def _path(path: str) -> tuple[str, list[str]]:
    segments = path.split("/")
    out: list[str] = []
    secrets: list[str] = []
    after_secret_name = False
    for segment in segments:
        plain = unquote(segment)
        if segment and (after_secret_name or looks_like_key(plain)):
            out.append(REDACTED)
            secrets.extend({segment, plain})
            after_secret_name = False
            continue
        out.append(segment)
        after_secret_name = bool(segment) and is_secret_name(plain)
    return "/".join(out), secrets


def public_url(url: str) -> str:
    """A URL fit to show, log or store: scheme, host, port and path; no userinfo, no query (`?…` marks that
    there was one), no fragment, and a path segment that looks like a key (or follows one named like a secret,
    `/token/VALUE`) replaced."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "<unparsable url>"
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    if port is not None:
        host = f"{host}:{port}"
    path, _ = _path(parts.path)
    return urlunsplit((parts.scheme, host, path, "…" if parts.query else "", ""))


def url_secrets(url: str) -> list[str]:
    """The parts of a URL that `public_url` keeps out and that may be credentials, to register as secrets: the
    whole URL itself (when it has any), the password (or a user name shaped like a key), the query string and
    its credential values, the fragment, and the redacted path segments."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    out = [*_userinfo_secrets(parts), *_query_secrets(parts.query)]
    if parts.fragment:
        out.append(parts.fragment)
    out.extend(_path(parts.path)[1])
    if out:
        out.append(url)
    return [value for value in dict.fromkeys(out) if value]


def _userinfo_secrets(parts: SplitResult) -> list[str]:
    out: list[str] = []
    if parts.username and (parts.password is None or looks_like_key(unquote(parts.username))):
        out.extend((parts.username, unquote(parts.username)))  # `https://TOKEN@host/` is a token
    if parts.password:
        out.extend((parts.password, unquote(parts.password)))
    return out


def _query_secrets(query: str) -> list[str]:
    """The query string and the values in it that are credentials."""
    if not query:
        return []
    out = [query]
    for name, value in parse_qsl(query, keep_blank_values=False):
        # Only credentials: redacting `?workspace=my-project` everywhere would garble the session.
        if is_secret_name(name) or looks_like_key(value) or name.lower() in ("key", "auth", "sig", "signature"):
            out.append(value)
    return out


def scrub_urls(text: str) -> str:
    """Every URL inside a text (an exception's message, a log line) replaced by its public form."""
    return _URL.sub(lambda m: public_url(m.group(0)), text)
