"""The built-in providers: the one table of each one's HTTP dialect, public endpoint and key variable.

A provider named here works with no `[providers.<name>]` section: its key comes from `api_key_env` (the
variable every SDK reads for it), its endpoint from `base_url`, overridable by `base_url_env` where the
vendor's SDKs have one. Everything that needs these names reads them here: the provider classes (their
defaults and the "set OPENAI_API_KEY" hint), `registry.py` and `resolve.py` (which model to start with,
whether a model has credentials). Standard library only: the CLI imports it to list models.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

Dialect = Literal["openai", "anthropic"]


class Endpoint(NamedTuple):
    kind: Dialect  # the HTTP dialect: OpenAI Chat Completions or Anthropic Messages
    base_url: str
    api_key_env: str  # the variable that holds the key
    base_url_env: str | None = None  # a variable that overrides base_url (the vendor SDKs' own name)


BUILTIN_ENDPOINTS: dict[str, Endpoint] = {
    "openai": Endpoint("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": Endpoint("anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    # OpenAI-compatible:
    "deepseek": Endpoint("openai", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    # International (Singapore) endpoint; mainland accounts use https://dashscope.aliyuncs.com/compatible-mode/v1
    "qwen": Endpoint("openai", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY"),
    # International endpoint; mainland accounts use https://api.moonshot.cn/v1
    "moonshot": Endpoint("openai", "https://api.moonshot.ai/v1", "MOONSHOT_API_KEY"),
    # Z.ai international; mainland (bigmodel.cn) accounts use https://open.bigmodel.cn/api/paas/v4
    "zhipu": Endpoint("openai", "https://api.z.ai/api/paas/v4", "ZAI_API_KEY"),
    "gemini": Endpoint("openai", "https://generativelanguage.googleapis.com/v1beta/openai", "GEMINI_API_KEY"),
}

# The provider each dialect is named after: its endpoint is the dialect's default, its key variable the one
# a hint may suggest replacing with `api_key_env` in the config.
DIALECT_HOME: dict[Dialect, Endpoint] = {
    "openai": BUILTIN_ENDPOINTS["openai"],
    "anthropic": BUILTIN_ENDPOINTS["anthropic"],
}


def key_env(provider: str, configured: str | None) -> str | None:
    """The variable that holds `provider`'s key: the configured one, else the built-in provider's own, else
    None (a configured endpoint without a key, e.g. a local server)."""
    if configured:
        return configured
    endpoint = BUILTIN_ENDPOINTS.get(provider)
    return endpoint.api_key_env if endpoint else None


def is_home_key(kind: Dialect, api_key_env: str | None) -> bool:
    """Whether `api_key_env` is the standard variable of the dialect's own provider (OPENAI_API_KEY for
    "openai"): the hint then also mentions `api_key_env` in the config."""
    return api_key_env == DIALECT_HOME[kind].api_key_env
