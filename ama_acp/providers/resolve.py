"""Model id → catalog entry and a provider instance (docs/configuration.md "Models and providers")."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator, Callable, Mapping

from ama_acp.config import Config, ConfigError, ProviderConfig
from ama_acp.providers import base as pb
from ama_acp.providers.catalog import ModelInfo
from ama_acp.providers.endpoints import BUILTIN_ENDPOINTS, key_env

log = logging.getLogger(__name__)

# The model to start with when a built-in provider's key is set and nothing names a model, in this order.
DEFAULT_MODELS = {"anthropic": "anthropic/claude-sonnet-4-5", "openai": "openai/gpt-5"}
FALLBACK_MODEL = "scripted/demo"


class ModelError(ConfigError):
    """A model id that is not `provider/model`; resolve.py makes it a "config" failure."""


def split_model_id(model_id: str) -> tuple[str, str]:
    provider, sep, name = model_id.partition("/")
    if not sep or not provider or not name:
        raise ModelError(f"model id {model_id!r} must look like provider/model (e.g. openai/gpt-4.1)")
    return provider, name


def provider_config(cfg: Config, provider: str) -> ProviderConfig | None:
    if provider in cfg.providers:
        return cfg.providers[provider]
    if provider == "scripted":
        return ProviderConfig(kind=provider)
    endpoint = BUILTIN_ENDPOINTS.get(provider)
    if endpoint is not None:
        # base_url stays None for the home providers: their base_url_env may still override the default.
        base_url = None if endpoint.kind == provider else endpoint.base_url
        return ProviderConfig(kind=endpoint.kind, base_url=base_url, api_key_env=endpoint.api_key_env)
    return None


def api_key_env(provider: str, pcfg: ProviderConfig) -> str | None:
    return key_env(provider, pcfg.api_key_env)


def has_credentials(cfg: Config, provider: str, env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    pcfg = provider_config(cfg, provider)
    if pcfg is None:
        return False
    if pcfg.kind == "scripted":
        return True
    variable = api_key_env(provider, pcfg)
    if variable is None:  # a local endpoint configured without a key
        return provider in cfg.providers
    return bool(env.get(variable))


def choose_model(cfg: Config, cli_model: str | None, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The model to start with and where the choice came from."""
    env = os.environ if env is None else env
    if cli_model:
        return cli_model, "--model"
    if env.get("AMA_MODEL"):
        return env["AMA_MODEL"], "AMA_MODEL"
    if cfg.model:
        return cfg.model, "config"
    for provider, model in DEFAULT_MODELS.items():
        variable = BUILTIN_ENDPOINTS[provider].api_key_env
        if env.get(variable):
            return model, f"{variable} is set"
    return FALLBACK_MODEL, "no model configured and no API key found: using the bundled offline demo script"


def make_provider(
    cfg: Config,
    model_id: str,
    info: ModelInfo | None = None,
    estimate_request: Callable[[pb.ModelRequest], int] | None = None,
    env: Mapping[str, str] | None = None,
) -> pb.Provider:
    """A provider for the model; configuration problems come back as a provider that fails with a message."""
    env = os.environ if env is None else env
    try:
        provider, name = split_model_id(model_id)
    except ModelError as exc:
        return FailingProvider("config", str(exc))
    pcfg = provider_config(cfg, provider)
    if pcfg is None:
        return FailingProvider(
            "config",
            f"Unknown provider {provider!r} in model id {model_id!r}. Built-in providers: "
            f"{', '.join([*BUILTIN_ENDPOINTS, 'scripted'])}; others go in the config file under [providers.{provider}].",
        )
    if pcfg.kind == "scripted":
        from ama_acp.providers.scripted import ScriptedProvider, ScriptError, load_script, resolve_script

        try:
            script = load_script(
                resolve_script(name, {**cfg.scripts, **({name: pcfg.script} if pcfg.script else {})}, env)
            )
        except ScriptError as exc:
            return FailingProvider("config", str(exc))
        return ScriptedProvider(script, estimate_request)
    from ama_acp.providers.registry import make_provider as make_http_provider

    variable = api_key_env(provider, pcfg)
    api_key = env.get(variable) if variable else None
    endpoint = BUILTIN_ENDPOINTS.get(provider)
    base_env = endpoint.base_url_env if endpoint else None
    base_url = pcfg.base_url or (env.get(base_env) if base_env else None) or None
    return make_http_provider(
        pcfg.kind,
        name=provider,
        base_url=base_url,
        api_key=api_key,
        api_key_env=variable,
        model_reasoning=bool(info and info.reasoning),
        timeout=pcfg.timeout,
        max_retries=pcfg.max_retries,
        headers=dict(info.extra_headers) if info else None,  # e.g. the 1M-context beta header
    )


class FailingProvider:
    """Stands in for a provider that cannot be built, so the person reads why in the conversation."""

    name = "unavailable"

    def __init__(self, kind: pb.FailureKind, message: str) -> None:
        self._failure = pb.Failure(kind, message)

    async def stream(self, request: pb.ModelRequest) -> AsyncGenerator[pb.ProviderEvent, None]:
        yield self._failure
