"""What `ama setup` offers and what it accepts.

Every value here comes from a person typing or a script passing flags, or from a server's model list: each is
checked before it is used, and a bad one is a `SetupError` that says what is wrong without quoting a key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from ama_acp.errors import ConfigError
from ama_acp.providers.endpoints import BUILTIN_ENDPOINTS, Dialect

CUSTOM = "custom"  # the choice "an OpenAI-compatible server at a URL"

# How each built-in provider is called in the list; one added to endpoints.py without a label shows its name.
LABELS = {
    "anthropic": "Anthropic",
    "openai": "OpenAI",
    "deepseek": "DeepSeek",
    "qwen": "Qwen (Alibaba Cloud Model Studio)",
    "moonshot": "Moonshot (Kimi)",
    "zhipu": "Z.ai (GLM)",
    "gemini": "Google Gemini",
}
# Where a refused key can be replaced.
KEY_PAGES = {
    "anthropic": "https://console.anthropic.com/settings/keys",
    "openai": "https://platform.openai.com/api-keys",
    "deepseek": "https://platform.deepseek.com/api_keys",
    "qwen": "https://modelstudio.console.alibabacloud.com/",
    "moonshot": "https://platform.moonshot.ai/console/api-keys",
    "zhipu": "https://z.ai/manage-apikey/apikey-list",
    "gemini": "https://aistudio.google.com/apikey",
}
RESERVED_NAMES = frozenset({*BUILTIN_ENDPOINTS, "scripted", CUSTOM})

_NAME = re.compile(r"[a-z0-9_-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_NAME = 32
MAX_URL = 2048
MAX_KEY = 8192
MAX_MODEL = 256


class SetupError(ConfigError):
    """`ama setup` cannot go on: a bad flag or answer (exit 2), or a key or server that failed the check
    (exit 1). Nothing has been written when it is raised."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ProviderOption:
    """A provider `ama setup` can configure."""

    name: str  # the provider part of model ids: "openai", or the custom server's name
    label: str
    kind: Dialect
    base_url: str
    key_variable: str | None  # the variable its key is stored under; None: a custom server without a key
    builtin: bool

    @property
    def key_page(self) -> str | None:
        return KEY_PAGES.get(self.name) if self.builtin else None


def builtin_names() -> list[str]:
    """Anthropic and OpenAI first (the brief's order), then the OpenAI-compatible built-ins as endpoints.py lists
    them."""
    rest = [n for n in BUILTIN_ENDPOINTS if n not in ("anthropic", "openai")]
    return ["anthropic", "openai", *rest]


def builtin_option(name: str, env: Mapping[str, str]) -> ProviderOption:
    """A built-in provider, at the URL ama would call: its base-URL variable (OPENAI_BASE_URL) wins when set,
    as it does for the provider itself."""
    endpoint = BUILTIN_ENDPOINTS[name]
    override = env.get(endpoint.base_url_env) if endpoint.base_url_env else None
    base = endpoint.base_url
    if override:
        try:
            base = check_url(override)
        except SetupError as exc:
            raise SetupError(f"{endpoint.base_url_env}: {exc}") from None
    return ProviderOption(name, LABELS.get(name, name), endpoint.kind, base, endpoint.api_key_env, True)


def custom_option(name: str, base_url: str, key_variable: str | None) -> ProviderOption:
    return ProviderOption(name, f"the server at {base_url}", "openai", base_url, key_variable, False)


def check_url(text: str) -> str:
    """A base URL: http or https, a host, no user:password (a key belongs in the credentials file), no query or
    fragment (paths are appended to it). Returned without a trailing slash."""
    url = text.strip()
    if not url:
        raise SetupError("the URL is empty")
    if len(url) > MAX_URL or any(ord(c) <= 32 or not c.isprintable() for c in url):  # lone surrogates too
        raise SetupError("the URL holds spaces or control characters, or is too long")
    _check_url_parts(url)
    return url.rstrip("/")


def _check_url_parts(url: str) -> None:
    try:
        parts = urlsplit(url)
        port = parts.port  # raises for a port that is not a number in range
    except ValueError as exc:
        raise SetupError(f"not a URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise SetupError("the URL must start with http:// or https:// (e.g. http://127.0.0.1:8080/v1)")
    if not parts.hostname:
        raise SetupError("the URL names no host (e.g. http://127.0.0.1:8080/v1)")
    if parts.username is not None or parts.password is not None:
        raise SetupError("the URL carries a user or password: give the key when asked, not in the URL")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise SetupError("the URL has a query or fragment: give the base URL only (e.g. http://127.0.0.1:8080/v1)")
    del port


def check_name(text: str) -> str:
    """A custom provider's name: what model ids start with (`local/qwen3-coder`) and its config table."""
    name = text.strip()
    if not _NAME.fullmatch(name) or len(name) > MAX_NAME:
        raise SetupError(f"a provider name is 1–{MAX_NAME} of a-z, 0-9, _ and - (e.g. local)")
    if name in RESERVED_NAMES:
        raise SetupError(f"{name!r} is a built-in provider's name: choose another (e.g. local)")
    return name


def key_variable_for(name: str) -> str:
    """`local` → LOCAL_API_KEY: the variable a custom provider's key is stored under (an environment variable
    name, so a person can also set it there)."""
    stem = re.sub(r"[^A-Z0-9_]", "_", name.upper())
    return ("AMA_" if stem[:1].isdigit() else "") + stem + "_API_KEY"


def check_env_name(text: str) -> str:
    name = text.strip()
    if not _ENV_NAME.fullmatch(name) or len(name) > 64:
        raise SetupError("a key variable is an environment variable name: letters, digits and _ (e.g. LOCAL_API_KEY)")
    return name


def check_key(text: str) -> str:
    """A key as pasted: surrounding whitespace dropped; it must fit an HTTP header. Never quoted back."""
    key = text.strip()
    if not key:
        raise SetupError("the key is empty")
    if len(key) > MAX_KEY:
        raise SetupError(f"the key is longer than {MAX_KEY} characters: was something else pasted?")
    if any(not (33 <= ord(c) <= 126) for c in key):
        raise SetupError("the key holds spaces, control or non-ASCII characters, which no API key has")
    return key


def check_model_name(text: str) -> str:
    """A model's name as a server or a person spells it (`gpt-4.1`, `qwen2.5-coder:7b`, `Qwen/Qwen3-8B`)."""
    name = text.strip()
    if not name or len(name) > MAX_MODEL or any(ord(c) <= 32 or ord(c) == 127 or not c.isprintable() for c in name):
        raise SetupError(f"a model name is 1–{MAX_MODEL} printable characters without spaces")
    return name


def model_id(option: ProviderOption, text: str) -> str:
    """The ama model id for what was typed: `gpt-4.1` or `openai/gpt-4.1` → `openai/gpt-4.1`. For a built-in
    provider, a name that starts with another one (`anthropic/…` for openai) is a mistake, not a model called
    that; a custom server's names are its own (`Qwen/Qwen3-8B` → `local/Qwen/Qwen3-8B`)."""
    provider = option.name
    name = check_model_name(text)
    head, sep, rest = name.partition("/")
    if sep and head == provider:
        name = check_model_name(rest)
    elif sep and option.builtin and head in RESERVED_NAMES - {CUSTOM}:
        raise SetupError(f"{text.strip()} is a model of {head}, not of {provider}")
    return f"{provider}/{name}"


def check_context_window(text: str) -> int:
    """A model's context window in tokens, as typed or passed (`32768`, `32_768`, `128k` are not guessed at:
    digits only), within the bound a server's own figure must meet (model_list.MAX_CONTEXT_LENGTH)."""
    from ama_acp.providers.model_list import MAX_CONTEXT_LENGTH

    word = text.strip()
    if not word.isascii() or not word.isdigit() or not 0 < int(word) <= MAX_CONTEXT_LENGTH:
        raise SetupError(f"a context window is a whole number of tokens from 1 to {MAX_CONTEXT_LENGTH} (e.g. 32768)")
    return int(word)
