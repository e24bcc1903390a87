"""Typed configuration: the TOML file, the environment and the command line, resolved once.

The names are promises to users (docs/configuration.md). A missing config file is fine; a malformed one is a
`ConfigError` naming the line.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import msgspec

# Re-exported (`as`): callers import it from here.
from ama_acp import ownfiles
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


MAX_CACHE_TTL_SECONDS = 30 * 86_400  # no provider keeps a prompt cache longer; a bigger figure is a typo
MAX_CACHE_MIN_TOKENS = 10_000_000


class CacheSettings(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """`[[models]] cache = {...}`: the model's prompt cache (docs/configuration.md "Models and providers").
    A figure left out keeps the catalog's (or stays unknown); the bounds are checked when the file is read."""

    # Seconds without a request after which the cached prefix is gone (the cache is cold).
    ttl_seconds: Annotated[int, msgspec.Meta(ge=1, le=MAX_CACHE_TTL_SECONDS)] | None = None
    # The shortest prompt prefix the provider caches at all.
    min_tokens: Annotated[int, msgspec.Meta(ge=1, le=MAX_CACHE_MIN_TOKENS)] | None = None


class ModelEntry(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    id: str
    context_window: int | None = None
    max_output: int | None = None
    price: Price | None = None
    reasoning: bool | None = None
    name: str | None = None  # display name
    cache: CacheSettings | None = None  # prompt-cache facts that override the catalog's


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


class WebConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """web_fetch (docs/configuration.md "Web pages")."""

    # Hosts (`localhost`, `*.corp.example`), addresses (`127.0.0.1`) and networks (`10.0.0.0/8`) web_fetch may
    # reach although they are loopback, private or link-local (docs/tools.md "web_fetch").
    allow_hosts: list[str] = msgspec.field(default_factory=list)


class InstructionsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Project instructions (docs/configuration.md "Project instructions", agent/instructions.py)."""

    enabled: bool = True
    # The instruction files' names, first found wins at each level (the workspace, each directory under it, the
    # person's config folder): `AGENTS.md` is the shared convention, `CLAUDE.md` Claude Code's.
    files: list[str] = msgspec.field(default_factory=lambda: ["AGENTS.md", "CLAUDE.md"])


MAX_INSTRUCTION_NAMES = 10


class TasksConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The `task` tool's tasks (docs/configuration.md "Delegation", docs/tools.md "Delegation")."""

    max_parallel: int = 3  # tasks of one session running at once; more wait for a free slot
    timeout: float = 600.0  # seconds one task may run; past it its task call fails with the reason


class BudgetConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`[budget]`: what a session may spend (docs/configuration.md "Budget", session/accounting/budget.py)."""

    session_usd: float | None = None  # USD; None: no budget. A malformed value is dropped before this is built.


class PermissionsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`[permissions]`: `TOOL(PATTERN)` rules (docs/tools.md "Permission rules"). Each entry is checked where the
    rules are read (session/rules/sources.py): a malformed one is reported with its line and left out."""

    allow: list[object] = msgspec.field(default_factory=list)
    ask: list[object] = msgspec.field(default_factory=list)
    deny: list[object] = msgspec.field(default_factory=list)


class SandboxConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`[sandbox]`: how the commands ama runs itself are confined (sandbox/, docs/configuration.md "Sandbox").
    A malformed table is dropped whole before this is built (the default applies): never half-applied."""

    mode: str = "workspace-write"  # or "read-only", "off"
    network: bool = False  # TCP connect and bind allowed


class AgentConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`[agents.NAME]`: an agent the `task` tool can hand work to (docs/configuration.md "Delegation")."""

    description: str = ""  # what it is for, shown to the model in the task tool's description
    model: str | None = None  # None: the session's model when the task starts
    tools: list[str] | None = None  # ama's own tools and MCP tools by name; None: the session's tools
    instructions: str = ""  # added to the system prompt of its tasks
    # An external ACP agent (session/tasks/external/agent.py): the program, its arguments, variables added to ama's
    # environment (which has every credential removed: pass the agent's own key here).
    command: str | None = None
    args: list[str] | None = None
    env: dict[str, str] | None = None


BUILT_IN_AGENTS = ("general", "explore")
_AGENT_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"


def agents_problem(agents: dict[str, AgentConfig]) -> str | None:
    """Why the `[agents]` tables cannot be used (a name, a reserved key, a tool list), or None."""
    for name, agent in agents.items():
        if (problem := _agent_problem(name, agent)) is not None:
            return problem
    return None


def _agent_problem(name: str, agent: AgentConfig) -> str | None:
    import re

    if not re.fullmatch(_AGENT_NAME, name):
        return f"agents.{name[:64]!r}: a name is 1–64 letters, digits, `_` or `-`, starting with a letter or digit"
    if name in BUILT_IN_AGENTS:
        return f"agents.{name}: `{name}` is a built-in agent and cannot be redefined; choose another name"
    if (problem := external_agent_problem(agent) or _agent_tools_problem(agent.tools)) is not None:
        return f"agents.{name}{problem}"
    if len(agent.description) > 1000 or len(agent.instructions) > 100_000:
        return f"agents.{name}: description is at most 1,000 characters and instructions 100,000"
    return None


def _agent_tools_problem(tools: list[str] | None) -> str | None:
    for i, tool in enumerate(tools or []):
        if tool == "task":
            return f".tools[{i}]: a task cannot start tasks of its own (`task` is refused)"
        if not tool or len(tool) > 200 or not tool.isprintable():
            return f".tools[{i}] must be a tool name"
    return None


MAX_AGENT_ARGS = 256
_ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,255}"


def external_agent_problem(agent: AgentConfig) -> str | None:
    """Why an external agent's `command`, `args` and `env` cannot start a program (the text after `agents.NAME`),
    or None. Values are never quoted back: an `env` value may be a key."""
    if agent.command is None:
        return _stray_external_keys(agent)
    if agent.model is not None or agent.tools is not None or agent.instructions:
        return ": an external agent (`command`) has its own model, tools and instructions; remove `model`, `tools` and `instructions`"
    return _command_problem(agent.command) or _args_problem(agent.args or []) or _env_problem(agent.env or {})


def _stray_external_keys(agent: AgentConfig) -> str | None:
    if agent.args is not None or agent.env is not None:
        return ": `args` and `env` belong to an external agent; add its `command`"
    return None


def _command_problem(command: str) -> str | None:
    if not command.strip() or len(command) > 4096 or "\0" in command:
        return ".command must be a program's name or path (1–4,096 characters, no NUL)"
    return None


def _args_problem(args: list[str]) -> str | None:
    if len(args) > MAX_AGENT_ARGS:
        return f".args holds {len(args)} entries; at most {MAX_AGENT_ARGS}"
    for i, arg in enumerate(args):
        if len(arg) > 100_000 or "\0" in arg:
            return f".args[{i}] must be text without NUL, at most 100,000 characters"
    return None


def _env_problem(env: dict[str, str]) -> str | None:
    import re

    for key, value in env.items():
        if not re.fullmatch(_ENV_NAME, key):
            return f".env: {key[:64]!r} is not an environment variable name (letters, digits, `_`)"
        if len(value) > 100_000 or "\0" in value:
            return f".env.{key}: a value is text without NUL, at most 100,000 characters"
    return None


def instruction_name_problem(name: str) -> str | None:
    """Why a `[instructions] files` entry is not a plain file name (no folder, nothing hidden in it)."""
    if not name or len(name) > 255:
        return "must be a file name of 1–255 characters"
    if name in (".", "..") or any(c in name for c in "/\\\0") or not name.isprintable():
        return "must be a plain file name (no folder, no control characters)"
    return None


MAX_ALLOW_HOSTS = 1000
_HOST_NAME = r"(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.?"


def allow_host_problem(entry: str) -> str | None:
    """Why a `[web] allow_hosts` entry is not a host name, `*.` and a name, an IP address or a network."""
    import ipaddress
    import re

    text = entry.strip().lower()
    try:
        ipaddress.ip_network(text[1:-1] if text.startswith("[") and text.endswith("]") else text, strict=False)
        return None
    except ValueError:
        pass
    name = text[2:] if text.startswith("*.") else text
    if 0 < len(name) <= 253 and re.fullmatch(_HOST_NAME, name):
        return None
    return "is not a host name, `*.` and a host name, an IP address or a network (no scheme, port or path)"


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
    web: WebConfig = WebConfig()
    instructions: InstructionsConfig = InstructionsConfig()
    tasks: TasksConfig = TasksConfig()
    agents: dict[str, AgentConfig] = {}
    budget: BudgetConfig = BudgetConfig()
    permissions: PermissionsConfig = PermissionsConfig()
    sandbox: SandboxConfig = SandboxConfig()
    hooks: list[object] = []  # `[[hooks]]`, each checked where they are read (shaping/hooks.py): a bad one left out
    # What was wrong in the file and ignored rather than refused (each names the file and the line); the command
    # line prints them (cli.py). Never from the file itself:
    warnings: tuple[str, ...] = ()
    # Filled from the command line / environment; a file that sets them is refused (_NOT_FROM_THE_FILE):
    data_dir: str = ""
    config_path: str = ""


MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a config file past this is refused, never read whole

MODES = ("manual", "accept_edits", "plan", "read_only", "full_access")


def default_config_path(env: dict[str, str]) -> Path:
    if env.get("AMA_CONFIG"):
        return Path(env["AMA_CONFIG"])
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ama" / "config.toml"


def config_dir(env: dict[str, str] | os._Environ[str]) -> Path:
    """ama's folder of the person's own files: `$XDG_CONFIG_HOME/ama` (`~/.config/ama`), where the default config
    file, the credentials and the global AGENTS.md live (`$AMA_CONFIG` moves the config file only)."""
    return Path(env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")) / "ama"


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
    if (problem := _not_in_the_file(raw, text)) is not None:
        raise ConfigError(f"{origin}: {problem}")
    warnings = _drop_bad_budget(raw, text, origin) + _drop_bad_sandbox(raw, text, origin)
    try:
        cfg = msgspec.convert(raw, Config, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{origin}: {exc}") from None
    for check in _CHECKS:
        if (problem := check(cfg)) is not None:
            raise ConfigError(f"{origin}: {problem}")
    return msgspec.structs.replace(cfg, warnings=warnings) if warnings else cfg


def _drop_bad_budget(raw: dict[str, object], text: str, origin: str) -> tuple[str, ...]:
    """A `[budget] session_usd` that is not a positive number of dollars is left out (no budget), and said: a typo
    in a spending limit must not keep ama from starting, nor pass for a limit it is not."""
    table = raw.get("budget")
    if not isinstance(table, dict) or "session_usd" not in table:
        return ()  # no budget, or a `budget` that is not a table (refused like any wrong type)
    value = table["session_usd"]
    if budget_usd(value) is not None:
        return ()
    del table["session_usd"]
    line = _line_of(text, _BUDGET_LINE)
    at = f" (at line {line})" if line is not None else ""
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:39] + "…"
    return (
        f"{origin}{at}: [budget] session_usd must be a positive number of US dollars, not {shown}; it is "
        "ignored: this config sets no budget",
    )


def _drop_bad_sandbox(raw: dict[str, object], text: str, origin: str) -> tuple[str, ...]:
    """A `[sandbox]` with an unknown key or a wrong value is dropped whole, and said: the default confinement
    applies rather than a part of what was meant, and a typo does not keep ama from starting."""
    table = raw.get("sandbox")
    if table is None:
        return ()
    problem = "must be a table" if not isinstance(table, dict) else _sandbox_problem(table)
    if problem is None:
        return ()
    del raw["sandbox"]
    line = _line_of(text, r"\s*(\[\s*\"?sandbox\"?\s*\]|\"?sandbox\"?\s*[.=])")
    at = f" (at line {line})" if line is not None else ""
    return (f"{origin}{at}: [sandbox] {problem}; it is ignored: commands get the default sandbox",)


def _sandbox_problem(table: dict[str, object]) -> str | None:
    for key, value in table.items():
        if key == "mode" and value not in ("workspace-write", "read-only", "off"):
            return f'mode must be "workspace-write", "read-only" or "off", not {repr(value)[:40]}'
        if key == "network" and not isinstance(value, bool):
            return f"network must be true or false, not {repr(value)[:40]}"
        if key not in ("mode", "network"):
            return f"has no setting {key[:40]!r} (only mode and network)"
    return None


MAX_BUDGET_USD = 1e9  # past it, a figure is a typo, not a limit


def budget_usd(value: object) -> float | None:
    """A budget in USD (a positive, finite number up to MAX_BUDGET_USD), or None when `value` is not one: not a
    number, a boolean, 0, negative, NaN or infinite."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    usd = float(value)
    return usd if 0 < usd <= MAX_BUDGET_USD else None  # NaN fails both comparisons


# A line that sets `session_usd`: under `[budget]`, as `budget.session_usd` or in an inline `budget = {…}`.
_BUDGET_LINE = r"\s*(?:(?:\"?budget\"?\s*\.\s*)?\"?session_usd\"?\s*=|\"?budget\"?\s*=\s*\{.*session_usd)"


def _line_of(text: str, pattern: str) -> int | None:
    """The number of the first line that matches `pattern`, or None."""
    import re

    looks = re.compile(pattern)
    return next((n for n, line in enumerate(text.split("\n"), 1) if looks.match(line)), None)


# Fields of `Config` that only the command line and the environment set, and what to use instead. A config file
# may be written by someone other than the person, and the data directory holds their sessions.
_NOT_FROM_THE_FILE = {
    "warnings": "it is ama's own list of what it ignored in the file",
    "data_dir": "use --data-dir or the environment variable AMA_DATA_DIR",
    "config_path": "name the file with --config or the environment variable AMA_CONFIG",
}


def _not_in_the_file(raw: dict[str, object], text: str) -> str | None:
    for key, instead in _NOT_FROM_THE_FILE.items():
        if key in raw:
            line = _line_setting(text, key)
            at = f" (at line {line})" if line is not None else ""
            return f"`{key}`{at} cannot be set in a config file: {instead}"
    return None


_MAX_LINE_TRIES = 4


def _line_setting(text: str, key: str) -> int | None:
    """The number of the line that sets the top-level `key`, or None. tomllib keeps no positions: a line that
    looks like it (the key, or a table header of that name) is the one when the text up to it already sets the
    key, which a line inside a multi-line string or a table does not. A few tries at most, so that a hostile
    file cannot make an error message cost a parse per line."""
    import re
    import tomllib

    names = f"(?:{key}|\"{key}\"|'{key}')"
    looks = re.compile(rf"\s*(?:\[{{1,2}}\s*{names}\s*[.\]]|{names}\s*[.=])")
    lines = text.split("\n")
    tries = [n for n, line in enumerate(lines, 1) if looks.match(line)][:_MAX_LINE_TRIES]
    for n in tries:
        try:
            if key in tomllib.loads("\n".join(lines[:n])):
                return n
        except tomllib.TOMLDecodeError:
            continue
    return None


def _mode_problem(cfg: Config) -> str | None:
    return None if cfg.mode in MODES else f"mode must be one of {', '.join(MODES)}, not {cfg.mode!r}"


def _retention_problem(cfg: Config) -> str | None:
    days = cfg.compaction.retention_days
    if 0 <= days <= MAX_RETENTION_DAYS:
        return None
    return f"compaction.retention_days must be a whole number of days, 0–36,500, not {days!r}"


def _estimator_problem(cfg: Config) -> str | None:
    if cfg.context.estimator in ("heuristic", "tiktoken"):
        return None
    return "context.estimator must be 'heuristic' or 'tiktoken'"


def _providers_problem(cfg: Config) -> str | None:
    for name, prov in cfg.providers.items():
        if prov.kind not in ("openai", "anthropic", "scripted"):
            return f"providers.{name}.kind must be openai, anthropic or scripted"
    return None


def _mcp_problem(cfg: Config) -> str | None:
    if 0 <= cfg.mcp.start_timeout <= 3600 and 0 < cfg.mcp.call_timeout <= 86400:
        return None
    return "mcp.start_timeout must be 0–3600 s and mcp.call_timeout 0–86400 s"


def _client_problem(cfg: Config) -> str | None:
    if cfg.client.program_status in PROGRAM_STATUS_MODES:
        return None
    return f"client.program_status must be auto, on or off, not {cfg.client.program_status!r}"


def _stream_problem(cfg: Config) -> str | None:
    st = cfg.stream
    if 0 <= st.coalesce_window_ms <= 1000 and 1 <= st.coalesce_max_chars <= 10_000_000:
        return None
    return "stream.coalesce_window_ms must be 0–1000 and stream.coalesce_max_chars 1–10,000,000"


def _web_problem(cfg: Config) -> str | None:
    hosts = cfg.web.allow_hosts
    if len(hosts) > MAX_ALLOW_HOSTS:
        return f"web.allow_hosts holds {len(hosts)} entries; at most {MAX_ALLOW_HOSTS}"
    for i, entry in enumerate(hosts):
        if (problem := allow_host_problem(entry)) is not None:
            return f"web.allow_hosts[{i}] = {entry[:100]!r} {problem}"
    return None


def _instructions_problem(cfg: Config) -> str | None:
    names = cfg.instructions.files
    if not 1 <= len(names) <= MAX_INSTRUCTION_NAMES:
        return f"instructions.files must list 1–{MAX_INSTRUCTION_NAMES} file names"
    for i, name in enumerate(names):
        if (problem := instruction_name_problem(name)) is not None:
            return f"instructions.files[{i}] = {name[:100]!r} {problem}"
    return None


def _tasks_problem(cfg: Config) -> str | None:
    if 1 <= cfg.tasks.max_parallel <= 32 and 1 <= cfg.tasks.timeout <= 86400:
        return None
    return "tasks.max_parallel must be 1–32 and tasks.timeout 1–86,400 s"


def _agents_problem(cfg: Config) -> str | None:
    return agents_problem(cfg.agents)


def _tiers_problem(cfg: Config) -> str | None:
    caps = cfg.tiers.caps
    return None if len(caps) == 4 and list(caps) == sorted(caps) else "tiers.caps must be four rising percentages"


# Checked in this order: the first problem is the one reported.
_CHECKS: tuple[Callable[[Config], str | None], ...] = (
    _mode_problem,
    _retention_problem,
    _estimator_problem,
    _providers_problem,
    _mcp_problem,
    _client_problem,
    _stream_problem,
    _web_problem,
    _instructions_problem,
    _tasks_problem,
    _agents_problem,
    _tiers_problem,
)


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
            # Its link is followed (the person named it, or a dotfiles checkout links it), but only a regular
            # file is opened, without blocking, and read up to the cap (a swap for a FIFO after the check).
            text = ownfiles.read_named(cfg_path, MAX_CONFIG_BYTES).decode("utf-8")
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
