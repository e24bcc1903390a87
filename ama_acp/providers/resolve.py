"""Model id → catalog entry and a provider instance (docs/configuration.md "Models and providers")."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Mapping

import msgspec

from ama_acp.config import Config, ConfigError, ProviderConfig
from ama_acp.credentials import KeySource, key_source
from ama_acp.providers import base as pb
from ama_acp.providers.catalog import ModelInfo
from ama_acp.providers.endpoints import BUILTIN_ENDPOINTS, DIALECT_HOME, key_env

log = logging.getLogger(__name__)

# The model to start with when a built-in provider's key is set and nothing names a model, in this order.
DEFAULT_MODELS = {"anthropic": "anthropic/claude-sonnet-4-5", "openai": "openai/gpt-5"}
FALLBACK_MODEL = "scripted/demo"


class ModelError(ConfigError):
    """A model id that is not `provider/model`; resolve.py makes it a "config" failure."""


def _keys(env: Mapping[str, str] | None) -> KeySource:
    """Where keys are looked up: the process environment over the credentials file, or — when a caller passes
    its own mapping (a test, a check of another environment) — that mapping alone."""
    if env is None:
        return key_source()
    return env if isinstance(env, KeySource) else KeySource(env, {})


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


def base_url_for(provider: str, pcfg: ProviderConfig, keys: Mapping[str, str]) -> str:
    """Where `provider`'s requests go: the configured base_url, the vendor's base URL variable, else the
    dialect's public endpoint (as provider_for_model and the provider classes do); no trailing slash."""
    endpoint = BUILTIN_ENDPOINTS.get(provider)
    from_env = keys.get(endpoint.base_url_env) if endpoint and endpoint.base_url_env else None
    home = DIALECT_HOME["anthropic" if pcfg.kind == "anthropic" else "openai"]
    return (pcfg.base_url or from_env or home.base_url).rstrip("/")


def has_credentials(cfg: Config, provider: str, env: Mapping[str, str] | None = None) -> bool:
    env = _keys(env)
    pcfg = provider_config(cfg, provider)
    if pcfg is None:
        return False
    if pcfg.kind == "scripted":
        return True
    variable = api_key_env(provider, pcfg)
    if variable is None:  # a local endpoint configured without a key
        return provider in cfg.providers
    return bool(env.get(variable))


# One sentence: an ACP error's message is one short sentence (the person reads it in the editor's sign-in prompt).
NO_MODEL_HINT = (
    "No model is configured for ama: run `ama setup` in a terminal, or give the agent OPENAI_API_KEY or "
    "ANTHROPIC_API_KEY, then sign in again."
)


class ModelChoice(msgspec.Struct, frozen=True):
    """The model ama would use and why; `model_id` None means no usable model (then `why` says what to do)."""

    model_id: str | None
    why: str
    source: str  # --model, AMA_MODEL, config, key, none
    key_variable: str | None = None  # the variable its key is read from, when it needs one
    key_from_file: bool = False  # that key comes from the credentials file, not the environment

    @property
    def usable(self) -> bool:
        return self.model_id is not None


def usable_model(cfg: Config, cli_model: str | None, env: Mapping[str, str] | None = None) -> ModelChoice:
    """The first of --model, AMA_MODEL, the config's `model`, or a built-in provider whose key is set — and only
    when its provider can be reached: a known provider with its key (environment, then credentials file) or a
    configured endpoint that needs none. Never the demo script: that takes `ama demo` or an explicit
    `--model scripted/…` (docs/configuration.md "Which model")."""
    keys = _keys(env)
    named = [(cli_model, "--model"), (keys.get("AMA_MODEL"), "AMA_MODEL"), (cfg.model, "config")]
    for model_id, source in named:
        if model_id:
            return _checked(cfg, model_id, source, keys)
    for provider, model in DEFAULT_MODELS.items():
        variable = BUILTIN_ENDPOINTS[provider].api_key_env
        if keys.get(variable):
            where = "the credentials file" if keys.from_file(variable) else "the environment"
            return ModelChoice(model, f"{variable} is set in {where}", "key", variable, keys.from_file(variable))
    return ModelChoice(None, NO_MODEL_HINT, "none")


def _checked(cfg: Config, model_id: str, source: str, keys: KeySource) -> ModelChoice:
    try:
        provider, _ = split_model_id(model_id)
    except ModelError as exc:
        return ModelChoice(None, f"{model_id!r} (from {source}) is not a model id: {exc}", source)
    pcfg = provider_config(cfg, provider)
    if pcfg is None:
        return ModelChoice(
            None,
            f"{model_id} (from {source}) names an unknown provider {provider!r}: add [providers.{provider}]",
            source,
        )
    variable = api_key_env(provider, pcfg) if pcfg.kind != "scripted" else None
    if variable is None:  # the scripted provider, or a configured endpoint without a key
        return ModelChoice(model_id, f"from {source}", source)
    if not keys.get(variable):
        return ModelChoice(
            None,
            f"{model_id} (from {source}) needs {variable}, which is set neither in the environment nor in the "
            "credentials file: run `ama setup`, or set it in the environment the editor gives the agent.",
            source,
            variable,
        )
    return ModelChoice(model_id, f"from {source}; key {variable}", source, variable, keys.from_file(variable))


def choose_model(cfg: Config, cli_model: str | None, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The model to start with and where the choice came from: `usable_model`, or the demo script for the one
    caller that wants it when nothing is usable (`ama demo`)."""
    choice = usable_model(cfg, cli_model, env)
    if choice.model_id is not None:
        return choice.model_id, choice.why
    return FALLBACK_MODEL, "no usable model: using the bundled offline demo script"


def provider_for_model(
    cfg: Config,
    model_id: str,
    info: ModelInfo | None = None,
    estimate_request: Callable[[pb.ModelRequest], int] | None = None,
    env: Mapping[str, str] | None = None,
) -> pb.Provider:
    """The provider that serves `model_id` (`provider/model`) under `cfg`: the scripted model, or an HTTP
    provider with its key from `env` (the environment over the credentials file) and its headers from the
    catalog entry `info`. A configuration problem comes back as a provider that fails with a message."""
    env = _keys(env)
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
        return _scripted(cfg, pcfg, name, estimate_request, env)
    return _http(provider, model_id, pcfg, info, env)


def _scripted(
    cfg: Config,
    pcfg: ProviderConfig,
    name: str,
    estimate_request: Callable[[pb.ModelRequest], int] | None,
    env: Mapping[str, str],
) -> pb.Provider:
    from ama_acp.providers.scripted import ScriptedProvider, ScriptError, load_script, resolve_script

    try:
        script = load_script(resolve_script(name, {**cfg.scripts, **({name: pcfg.script} if pcfg.script else {})}, env))
    except ScriptError as exc:
        return FailingProvider("config", str(exc))
    return ScriptedProvider(script, estimate_request)


def _http(
    provider: str, model_id: str, pcfg: ProviderConfig, info: ModelInfo | None, env: Mapping[str, str]
) -> pb.Provider:
    from ama_acp.providers.registry import build_http_provider
    from ama_acp.providers.retry import RetryPolicy
    from ama_acp.providers.settings import ProviderSettings

    variable = api_key_env(provider, pcfg)
    api_key = env.get(variable) if variable else None
    if variable and not api_key:
        # No request that can only be refused: the person reads in the conversation what to do.
        return FailingProvider(
            "auth",
            f"{model_id} needs an API key in {variable}, which is set neither in the environment ama was started "
            f"with nor in its credentials file. Run `ama setup` in a terminal (or set {variable} in the "
            "environment the editor gives ama), then send the prompt again.",
        )
    endpoint = BUILTIN_ENDPOINTS.get(provider)
    base_env = endpoint.base_url_env if endpoint else None
    settings = ProviderSettings(
        name=provider,
        base_url=pcfg.base_url or (env.get(base_env) if base_env else None) or None,
        api_key=api_key,
        api_key_env=variable,
        reasoning=bool(info and info.reasoning),
        timeout=pcfg.timeout,
        retry=RetryPolicy(max_retries=pcfg.max_retries),
        headers=dict(info.extra_headers) if info else {},  # e.g. the 1M-context beta header
    )
    return build_http_provider(pcfg.kind, settings)


class FailingProvider:
    """Stands in for a provider that cannot be built, so the person reads why in the conversation."""

    name = "unavailable"

    def __init__(self, kind: pb.FailureKind, message: str) -> None:
        self._failure = pb.Failure(kind, message)

    async def stream(self, request: pb.ModelRequest) -> AsyncGenerator[pb.ProviderEvent, None]:
        yield self._failure
