"""Provider kind → implementation. Environment and config resolution belong to the caller (resolve.py);
this only builds the object. Implementations are imported on demand so the unused ones cost nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ama_acp.config import ConfigError
from ama_acp.providers.base import Provider
from ama_acp.providers.http import RetryPolicy

# The standard key variable of each kind, used when the caller names none for the built-in provider.
STANDARD_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def _openai(**kw: Any) -> Provider:
    from ama_acp.providers.openai import OpenAIProvider

    return OpenAIProvider(**kw)


def _anthropic(**kw: Any) -> Provider:
    from ama_acp.providers.anthropic import AnthropicProvider

    return AnthropicProvider(**kw)


# "scripted" is built by resolve.py from its script file; add HTTP dialects here.
FACTORIES: dict[str, Callable[..., Provider]] = {"openai": _openai, "anthropic": _anthropic}


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
    only named in error messages (the key itself comes in `api_key`); None for the built-in provider of
    that kind means its standard variable. `retry` overrides `max_retries` (tests pass a fast backoff)."""
    factory = FACTORIES.get(kind)
    if factory is None:
        raise ConfigError(f"provider kind {kind!r} is not one of {', '.join(sorted(FACTORIES))}")
    if api_key_env is None and name == kind:
        api_key_env = STANDARD_KEY_ENV.get(kind)
    return factory(
        name=name,
        base_url=base_url,
        api_key=api_key,
        api_key_env=api_key_env,
        reasoning=model_reasoning,
        timeout=timeout,
        max_retries=max_retries,
        retry=retry,
        headers=headers or None,
    )
