"""The one settings struct an HTTP provider is built from (`ProviderSettings`), whichever its dialect.

resolve.py fills it from the config, the catalog and the environment; registry.py hands it to the dialect's
class; the dialect fills its blanks from its home provider (endpoints.py) and gives it to the transport
(stream.py). Standard library only at import: httpx is named for the type checker alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from ama_acp.providers.endpoints import DIALECT_HOME, Dialect, is_home_key, key_env
from ama_acp.providers.failures import KeyHint
from ama_acp.providers.retry import RetryPolicy

if TYPE_CHECKING:
    import httpx


class ProviderSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Where a provider sends its requests, with which key, and how patiently. A blank (`""`, None) means the
    dialect's home provider's value (`for_dialect`)."""

    name: str = ""  # the provider as model ids name it ("openai", "deepseek", a configured "local"); "": the dialect's
    base_url: str | None = None  # None: the dialect's public endpoint
    api_key: str | None = None  # the key itself; never logged, scrubbed from every message
    api_key_env: str | None = None  # the variable named in messages; None: the built-in provider's own, if any
    reasoning: bool = False  # a reasoning model: it is asked for thinking at the session's thought level
    timeout: float = 600.0  # seconds for a whole attempt, connecting to the last byte
    retry: RetryPolicy = RetryPolicy()
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)  # sent with every request (a beta header)
    transport: httpx.AsyncBaseTransport | None = None  # tests: httpx.MockTransport instead of the network

    def __repr__(self) -> str:  # the key never shows, not even in a traceback's locals
        return f"ProviderSettings(name={self.name!r}, base_url={self.base_url!r})"

    def for_dialect(self, dialect: Dialect) -> ProviderSettings:
        """These settings with the blanks filled: the dialect's name and endpoint, the key variable of the
        named provider (None for a configured endpoint without one), and no trailing slash on the URL."""
        home = DIALECT_HOME[dialect]
        name = self.name or dialect
        return msgspec.structs.replace(
            self,
            name=name,
            base_url=(self.base_url or home.base_url).rstrip("/"),
            api_key_env=key_env(name, self.api_key_env),
        )

    def key_hint(self, dialect: Dialect) -> KeyHint:
        """What a person is told to set when the key is missing or refused."""
        return KeyHint(
            env=self.api_key_env,
            has_key=bool(self.api_key),
            provider=self.name,
            builtin=is_home_key(dialect, self.api_key_env),
        )
