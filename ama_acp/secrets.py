"""One rule for which environment variables hold secrets, shared by everything that must keep them in.

Used by the session-file redactor, the log filter and the environment commands run with, so a name that is
kept out of one is kept out of all three (they used to disagree: `GITHUB_TOKEN_RW` reached session files,
`TOKEN` reached commands).

A name is secret when it *looks* secret — matched on its parts (split at `_`, `-`, `.` and camelCase), not
on substrings, so `PASSTHROUGH`, `TOKENIZERS_PARALLELISM`, `PWD` and `OLDPWD` stay ordinary — or when the
configuration names it as a provider's `api_key_env` (any name at all: `LOCAL_KEY`).

Kept cheap to import (standard library only): the CLI registers the configured names at startup.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Protocol

__all__ = [
    "configured_secret_names",
    "is_secret",
    "is_secret_name",
    "register_secret_names",
    "register_secret_values",
    "register_config",
    "secret_values",
]

# Parts that mark a secret wherever they stand: GITHUB_TOKEN_RW, AWS_SESSION_TOKEN, TOKEN, DB_PASS.
_SECRET_PARTS = frozenset(
    {
        "TOKEN",
        "APIKEY",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWORDS",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
        "PRIVATEKEY",
    }
)
# Parts that mark a secret only after another part: DB_PWD yes, PWD (the shell's working directory) no.
_SECRET_SUFFIX_PARTS = frozenset({"PWD", "PW"})
# Words run together inside one part: MYSECRET, DBPASSWORD, OPENAIAPIKEY — long and unambiguous enough.
_SECRET_INFIXES = ("SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "APIKEY", "PRIVATEKEY", "ACCESSTOKEN", "AUTHTOKEN")
# Two parts in a row: OPENAI_API_KEY, SSH_PRIVATE_KEY.
_SECRET_PAIRS = frozenset({("API", "KEY"), ("PRIVATE", "KEY"), ("ACCESS", "KEY"), ("SECRET", "KEY")})

_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _parts(name: str) -> list[str]:
    return [p.upper() for chunk in _SPLIT.split(name) for p in _CAMEL.split(chunk) if p]


def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name looks like it holds a credential (by its name alone)."""
    parts = _parts(name)
    for i, part in enumerate(parts):
        if part in _SECRET_PARTS or (i > 0 and part in _SECRET_SUFFIX_PARTS):
            return True
        if len(part) > 6 and any(word in part for word in _SECRET_INFIXES):
            return True
        if i > 0 and (parts[i - 1], part) in _SECRET_PAIRS:
            return True
    return False


# Names the configuration declares secret (providers' api_key_env), whatever they look like.
_configured: set[str] = set()
# Bumped when `_configured` grows, so a cache of secret values (the redactor's) knows to collect them again
# without this module importing it.
_generation = 0


class _ProviderLike(Protocol):
    @property
    def api_key_env(self) -> str | None: ...


class _ConfigLike(Protocol):
    @property
    def providers(self) -> Mapping[str, _ProviderLike]: ...


def register_secret_names(names: Iterable[str | None]) -> None:
    """Treat these variable names as secret from now on (in this process)."""
    global _generation
    added = {n for n in names if n}
    if added - _configured:
        _configured.update(added)
        _generation += 1


# Secret values that are in no environment variable of ours: the tokens an editor passes in an MCP server's env
# or headers. Collected by the same redactor as the environment's.
_extra_values: set[str] = set()


def register_secret_values(values: Iterable[str]) -> None:
    """Treat these values as secret from now on (in this process): redacted from logs and session files."""
    global _generation
    added = {v for v in values if v}
    if added - _extra_values:
        _extra_values.update(added)
        _generation += 1


def names_generation() -> int:
    """A number that changes whenever the set of secret names grows."""
    return _generation


def register_config(config: _ConfigLike) -> None:
    """Every configured provider's `api_key_env` is a secret name (built-in providers' keys match by name)."""
    register_secret_names(p.api_key_env for p in config.providers.values())


def configured_secret_names() -> frozenset[str]:
    return frozenset(_configured)


def is_secret(name: str) -> bool:
    """The one predicate: a secret-looking name, or one the configuration declared a key variable."""
    return name in _configured or is_secret_name(name)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the secret variables set in `environ` (default: this process's environment)."""
    env = os.environ if environ is None else environ
    return [value for name, value in env.items() if value and is_secret(name)] + sorted(_extra_values)
