"""Provider kind → implementation: the one place an HTTP provider object is built. Reading the config and
the environment belongs to the caller (resolve.py); this only builds. The dialect modules are imported on
demand so the unused one costs nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, get_args

from ama_acp.config import ConfigError
from ama_acp.providers.base import Provider
from ama_acp.providers.endpoints import Dialect
from ama_acp.providers.settings import ProviderSettings

if TYPE_CHECKING:
    from ama_acp.providers.anthropic import AnthropicProvider
    from ama_acp.providers.openai import OpenAIProvider

# "scripted" is built by resolve.py from its script file; add HTTP dialects to `Dialect` and `_dialect`.
KINDS: tuple[Dialect, ...] = get_args(Dialect)


def build_http_provider(kind: str, settings: ProviderSettings) -> Provider:
    """The HTTP provider of dialect `kind` ("openai", "anthropic") built from `settings`; `ConfigError` for a
    kind ama does not speak. Blanks in `settings` are the dialect's home provider's (`ProviderSettings`)."""
    return _dialect(kind)(settings)


def _dialect(kind: str) -> type[OpenAIProvider] | type[AnthropicProvider]:
    """The class of a dialect, imported now (both take a `ProviderSettings`)."""
    if kind == "anthropic":
        from ama_acp.providers.anthropic import AnthropicProvider

        return AnthropicProvider
    if kind == "openai":
        from ama_acp.providers.openai import OpenAIProvider

        return OpenAIProvider
    raise ConfigError(f"provider kind {kind!r} is not one of {', '.join(sorted(KINDS))}")
