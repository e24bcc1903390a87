"""Typed configuration: the TOML file, the environment and the command line, resolved once.

The names are promises to users (docs/configuration.md). A missing config file is fine; a malformed one is a
`ConfigError` naming the line.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

# Re-exported (`as`): callers import it from here.
from ama_acp.errors import ConfigError as ConfigError


class Price(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """USD per million tokens. A cache rate left out is unknown (the request is then unpriced if it used it)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


class ProviderConfig(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    kind: str = "openai"  # openai | anthropic | scripted
    base_url: str | None = None
    api_key_env: str | None = None
    # For `scripted`: the script file (else $AMA_SCRIPT, else the bundled script of the model's name).
    script: str | None = None
    timeout: float = 600.0
    max_retries: int = 4


class ModelEntry(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    id: str
    context_window: int | None = None
    max_output: int | None = None
    price: Price | None = None
    reasoning: bool | None = None
    name: str | None = None  # display name


class CompactionConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    enabled: bool = True
    reserve_tokens: int = 16384
    keep_tokens: int = 20000
    # Days a handoff folder of another session is kept after its session was last touched (docs/sessions.md
    # "Handoff retention"); 0 keeps none.
    retention_days: int = 2


MAX_RETENTION_DAYS = 36_500  # a century: past it, seconds-since-the-epoch arithmetic would not mean anything


class ContextConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    estimator: str = "heuristic"  # heuristic | tiktoken


class TiersConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    caps: list[float] = msgspec.field(default_factory=lambda: [50.0, 60.0, 70.0, 74.0])


class McpConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The editor's MCP servers (docs/tools.md "MCP servers")."""

    start_timeout: float = 10.0  # the first model request waits this long for servers still starting
    call_timeout: float = 120.0  # one MCP tool call
    # Names of the editor's MCP servers whose `readOnlyHint` is believed (their read-only tools then run like
    # reads). Annotations are the server's own claim: from any other server every tool may write.
    trusted_servers: list[str] = msgspec.field(default_factory=list)


class StreamConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How streamed text reaches the editor (docs/configuration.md "Streaming")."""

    coalesce_window_ms: float = 20.0  # deltas faster than this are merged into one chunk; 0: one chunk each
    coalesce_max_chars: int = 16_384  # a merged chunk goes out once it holds this much


class ClientConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`ama acp-client` (docs/configuration.md "The terminal client")."""

    program_status: str = "auto"  # auto | on | off: OSC 7501 reports to the terminal


PROGRAM_STATUS_MODES = ("auto", "on", "off")


class Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    model: str | None = None
    mode: str = "manual"
    max_turn_requests: int = 50
    providers: dict[str, ProviderConfig] = {}
    models: list[ModelEntry] = []
    scripts: dict[str, str] = {}
    compaction: CompactionConfig = CompactionConfig()
    context: ContextConfig = ContextConfig()
    tiers: TiersConfig = TiersConfig()
    mcp: McpConfig = McpConfig()
    client: ClientConfig = ClientConfig()
    stream: StreamConfig = StreamConfig()
    # Filled from the command line / environment, not from the file:
    data_dir: str = ""
    config_path: str = ""


MODES = ("manual", "accept_edits", "read_only", "full_access")


def default_config_path(env: dict[str, str]) -> Path:
    if env.get("AMA_CONFIG"):
        return Path(env["AMA_CONFIG"])
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ama" / "config.toml"


def default_data_dir(env: dict[str, str]) -> Path:
    if env.get("AMA_DATA_DIR"):
        return Path(env["AMA_DATA_DIR"])
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ama"


def parse_config(text: str, origin: str = "config") -> Config:
    import tomllib  # ~20 ms: only when there is a config file to read (startup matters)

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message names line and column
        raise ConfigError(f"{origin}: {exc}") from None
    try:
        cfg = msgspec.convert(raw, Config, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{origin}: {exc}") from None
    if cfg.mode not in MODES:
        raise ConfigError(f"{origin}: mode must be one of {', '.join(MODES)}, not {cfg.mode!r}")
    days = cfg.compaction.retention_days
    if not 0 <= days <= MAX_RETENTION_DAYS:
        raise ConfigError(f"{origin}: compaction.retention_days must be a whole number of days, 0–36,500, not {days!r}")
    if cfg.context.estimator not in ("heuristic", "tiktoken"):
        raise ConfigError(f"{origin}: context.estimator must be 'heuristic' or 'tiktoken'")
    for name, prov in cfg.providers.items():
        if prov.kind not in ("openai", "anthropic", "scripted"):
            raise ConfigError(f"{origin}: providers.{name}.kind must be openai, anthropic or scripted")
    if not (0 <= cfg.mcp.start_timeout <= 3600 and 0 < cfg.mcp.call_timeout <= 86400):
        raise ConfigError(f"{origin}: mcp.start_timeout must be 0–3600 s and mcp.call_timeout 0–86400 s")
    if cfg.client.program_status not in PROGRAM_STATUS_MODES:
        raise ConfigError(f"{origin}: client.program_status must be auto, on or off, not {cfg.client.program_status!r}")
    st = cfg.stream
    if not (0 <= st.coalesce_window_ms <= 1000 and 1 <= st.coalesce_max_chars <= 10_000_000):
        raise ConfigError(f"{origin}: stream.coalesce_window_ms must be 0–1000 and stream.coalesce_max_chars 1–10,000,000")
    caps = cfg.tiers.caps
    if len(caps) != 4 or list(caps) != sorted(caps):
        raise ConfigError(f"{origin}: tiers.caps must be four rising percentages")
    return cfg


def load_config(
    path: str | None = None,
    data_dir: str | None = None,
    env: dict[str, str] | None = None,
) -> Config:
    env = dict(os.environ) if env is None else env
    explicit = path is not None or bool(env.get("AMA_CONFIG"))
    cfg_path = Path(path) if path else default_config_path(env)
    if cfg_path.is_file():
        try:
            text = cfg_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{cfg_path}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{cfg_path}: not UTF-8 text (byte {exc.start})") from None
        cfg = parse_config(text, str(cfg_path))
    elif explicit:
        raise ConfigError(f"{cfg_path}: no such config file")
    else:
        cfg = Config()
    ddir = Path(data_dir) if data_dir else default_data_dir(env)
    return msgspec.structs.replace(cfg, data_dir=str(ddir), config_path=str(cfg_path))
