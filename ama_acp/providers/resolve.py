"""Model id → catalog entry and a provider instance (interface.md "Models and providers")."""

from __future__ import annotations

import logging
import os

from ama_acp.config import Config, ConfigError, ProviderConfig
from ama_acp.providers import base as pb
from ama_acp.providers.catalog import BUILTIN_COMPAT_PROVIDERS, ModelInfo

log = logging.getLogger(__name__)

BUILTIN_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
BUILTIN_BASE_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
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
    if provider in ("openai", "anthropic", "scripted"):
        return ProviderConfig(kind=provider)
    if provider in BUILTIN_COMPAT_PROVIDERS:
        base_url, key_env = BUILTIN_COMPAT_PROVIDERS[provider]
        return ProviderConfig(kind="openai", base_url=base_url, api_key_env=key_env)
    return None


def api_key_env(provider: str, pcfg: ProviderConfig) -> str | None:
    return pcfg.api_key_env or BUILTIN_KEYS.get(provider)


def has_credentials(cfg: Config, provider: str, env: dict[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    pcfg = provider_config(cfg, provider)
    if pcfg is None:
        return False
    if pcfg.kind == "scripted":
        return True
    key_env = api_key_env(provider, pcfg)
    if key_env is None:  # a local endpoint configured without a key
        return provider in cfg.providers
    return bool(env.get(key_env))


def choose_model(cfg: Config, cli_model: str | None, env: dict[str, str] | None = None) -> tuple[str, str]:
    """The model to start with and where the choice came from."""
    env = dict(os.environ) if env is None else env
    if cli_model:
        return cli_model, "--model"
    if env.get("AMA_MODEL"):
        return env["AMA_MODEL"], "AMA_MODEL"
    if cfg.model:
        return cfg.model, "config"
    for provider in ("anthropic", "openai"):
        if env.get(BUILTIN_KEYS[provider]):
            return DEFAULT_MODELS[provider], f"{BUILTIN_KEYS[provider]} is set"
    return FALLBACK_MODEL, "no model configured and no API key found: using the bundled offline demo script"


def make_provider(
    cfg: Config,
    model_id: str,
    info: ModelInfo | None = None,
    estimate_request=None,
    env: dict[str, str] | None = None,
) -> pb.Provider:
    """A provider for the model; configuration problems come back as a provider that fails with a message."""
    env = dict(os.environ) if env is None else env
    try:
        provider, name = split_model_id(model_id)
    except ModelError as exc:
        return FailingProvider("config", str(exc))
    pcfg = provider_config(cfg, provider)
    if pcfg is None:
        return FailingProvider(
            "config",
            f"Unknown provider {provider!r} in model id {model_id!r}. Built-in providers: openai, anthropic, "
            f"scripted, {', '.join(sorted(BUILTIN_COMPAT_PROVIDERS))}; others go in the config file under "
            f"[providers.{provider}].",
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

    key_env = api_key_env(provider, pcfg)
    api_key = env.get(key_env) if key_env else None
    base_url = pcfg.base_url or env.get(BUILTIN_BASE_ENV.get(provider, ""), "") or None
    return make_http_provider(
        pcfg.kind,
        name=provider,
        base_url=base_url,
        api_key=api_key,
        api_key_env=key_env,
        model_reasoning=bool(info and info.reasoning),
        timeout=pcfg.timeout,
        max_retries=pcfg.max_retries,
        headers=dict(info.extra_headers) if info else None,  # e.g. the 1M-context beta header
    )


class FailingProvider:
    """Stands in for a provider that cannot be built, so the person reads why in the conversation."""

    name = "unavailable"

    def __init__(self, kind: str, message: str) -> None:
        self._failure = pb.Failure(kind, message)  # type: ignore[arg-type]

    async def stream(self, request: pb.ModelRequest):
        yield self._failure
