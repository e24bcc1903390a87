"""A safety net that keeps secrets from the environment out of session files and logs.

ama never puts an API key into a message on purpose; this catches the accidents (a tool printing its
environment, a person pasting a token). Which variables are secret is decided by `ama_acp.secrets.is_secret`
(the same rule commands' environments use); their values are collected once; each encoded line is checked
with a plain substring test, so the cost is nothing when no secret is set and a few `in` tests per line
otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from ama_acp.secrets import names_generation, secret_values

MIN_SECRET_LENGTH = 8  # shorter values match too much ordinary text to be worth replacing
REDACTED = "[redacted]"


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = {s for s in secrets if len(s) >= MIN_SECRET_LENGTH}
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets = sorted(values, key=len, reverse=True)
        # The forms a secret takes inside an encoded JSON line: raw UTF-8, and escaped if it needs escaping.
        needles: set[bytes] = set()
        for s in self._secrets:
            needles.add(s.encode())
            needles.add(msgspec.json.encode(s)[1:-1])
        self._needles = tuple(needles)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Redactor:
        return cls(secret_values(environ))

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def redact(self, text: str) -> str:
        for s in self._secrets:
            if s in text:
                text = text.replace(s, REDACTED)
        return text

    def redact_line(self, line: bytes) -> bytes:
        """Redact one encoded JSON line. The rare line that holds a secret is decoded and every string in it
        redacted, rather than patching bytes, so the line stays valid JSON whatever the secret looks like."""
        if not self._needles or not any(n in line for n in self._needles):
            return line
        try:
            return msgspec.json.encode(self._walk(msgspec.json.decode(line)))
        except (msgspec.DecodeError, RecursionError):
            # Not JSON we can walk (too deep): patch the bytes instead. A secret's JSON-escaped form
            # contains no quote or backslash the replacement could break, so the line stays valid JSON.
            for needle in self._needles:
                line = line.replace(needle, REDACTED.encode())
            return line

    def _walk(self, value: object) -> object:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, dict):
            return {self.redact(k): self._walk(v) for k, v in value.items()}
        return value


_default: Redactor | None = None
_default_generation = -1


def default_redactor() -> Redactor:
    """The redactor for this process's environment, built on first use and again when the set of secret
    names grew (the config was read and declared a key variable)."""
    global _default, _default_generation
    generation = names_generation()
    if _default is None or generation != _default_generation:
        _default, _default_generation = Redactor.from_environ(), generation
    return _default


def redact(text: str) -> str:
    """Replace the values of secret-looking environment variables in `text` with `[redacted]`."""
    return default_redactor().redact(text)
