"""Provider kind → implementation: the one place an HTTP provider object is built. Reading the config and
the environment belongs to the caller (resolve.py); this only builds. The dialect modules are imported on
demand so the unused one costs nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, get_args

from ama_acp.config import ConfigError
from ama_acp.providers.base import Provider
from ama_acp.providers.endpoints import Dialect, key_env
from ama_acp.providers.http import RetryPolicy

if TYPE_CHECKING:
    from ama_acp.providers.anthropic import AnthropicProvider
    from ama_acp.providers.openai import OpenAIProvider

# "scripted" is built by resolve.py from its script file; add HTTP dialects to `Dialect` and `_dialect`.
KINDS: tuple[Dialect, ...] = get_args(Dialect)


def make_provider(
    kind: str,
    *,
    name: str,
    base_url: str | None = None,
    api_key: str | None = None,
    api_key_env: str | None = None,
    model_reasoning: bool = False,
    timeout: float = 600.0,
    max_retries: int = 4,
    retry: RetryPolicy | None = None,
    headers: dict[str, str] | None = None,
) -> Provider:
    """Build the provider for `kind`. `base_url` None means the kind's public endpoint. `api_key_env` is
    only named in error messages (the key itself comes in `api_key`); None for a built-in provider means its
    own variable (endpoints.py). `retry` overrides `max_retries` (tests pass a fast backoff)."""
    dialect = _dialect(kind)
    return dialect(
        name=name,
        base_url=base_url,
        api_key=api_key,
        api_key_env=key_env(name, api_key_env),
        reasoning=model_reasoning,
        timeout=timeout,
        retry=retry or RetryPolicy(max_retries=max_retries),
        headers=headers or None,
    )


def _dialect(kind: str) -> type[OpenAIProvider] | type[AnthropicProvider]:
    """The class of a dialect, imported now (both take the same keyword arguments)."""
    if kind == "anthropic":
        from ama_acp.providers.anthropic import AnthropicProvider

        return AnthropicProvider
    if kind == "openai":
        from ama_acp.providers.openai import OpenAIProvider

        return OpenAIProvider
    raise ConfigError(f"provider kind {kind!r} is not one of {', '.join(sorted(KINDS))}")
