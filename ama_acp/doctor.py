"""`ama doctor`: what ama would use and why, one fact a line — for the person whose editor says "no model".

It reads what `ama --mode acp` reads (the config file, the credentials file, the environment), asks
`usable_model()` which model that gives (never choosing on its own), and sends each provider one cheap request
(GET /models) with its key sent the way the provider sends it. Exit 0 only when a prompt would work: a usable
model whose provider answered (with --no-network: a usable model).

It never writes anything (no log file, no data directory), and never prints the value of a key: key names only,
and every text that came from a server or an exception is scrubbed of the keys it could echo.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ama_acp.config import Config, ConfigError, ProviderConfig, default_config_path, default_data_dir, load_config
from ama_acp.credentials import CredentialsError, KeySource, credentials_path, read_credentials, too_open
from ama_acp.errors import ControlFlow
from ama_acp.providers.endpoints import BUILTIN_ENDPOINTS
from ama_acp.providers.model_list import model_list_items, models_request
from ama_acp.providers.resolve import (
    ModelError,
    api_key_env,
    base_url_for,
    provider_config,
    split_model_id,
    usable_model,
)
from ama_acp.providers.tls import CERTIFICATE_ADVICE, certificate_failure, tls_for
from ama_acp.redact import MIN_SECRET_LENGTH, REDACTED
from ama_acp.sandbox import sandbox_state
from ama_acp.secrets import register_config, register_secret_values
from ama_acp.textsafe import one_line

if TYPE_CHECKING:
    import httpx

TIMEOUT = 5.0  # seconds for one provider's check, connect to last byte
MAX_BODY = 256 * 1024  # a model list is a few KiB; a server that sends more is cut off here

Result = Literal["ok", "refused", "unreachable", "untrusted", "status", "not-sent", "no-key", "skipped", "local"]


@dataclass(frozen=True)
class FileFact:
    path: str
    found: bool
    error: str | None = None


@dataclass(frozen=True)
class CredentialsFact(FileFact):
    mode: str | None = None  # "0600"
    tooOpen: bool = False  # group or others may read it
    keys: list[str] = field(default_factory=list)  # names only


@dataclass(frozen=True)
class PathFact:
    """A config or credentials path someone else could change: ama would then run what they wrote."""

    path: str
    mode: str  # "0666"
    problem: str  # writable by group | writable by others | writable by group and others | owned by another user
    owner: int | None = None  # the owner's uid, when it is another user


@dataclass(frozen=True)
class KeyFact:
    name: str
    source: Literal["environment", "credentials file"] | None  # None: set in neither
    alsoInFile: bool = False  # set in both: the environment's wins


@dataclass(frozen=True)
class ModelFact:
    id: str | None
    why: str
    source: str
    keyVariable: str | None
    keyFromFile: bool


@dataclass(frozen=True)
class ProviderFact:
    name: str
    kind: str
    baseUrl: str | None
    keyVariable: str | None
    result: Result
    status: int | None = None
    detail: str = ""
    models: int | None = None  # how many models its list names, when it answered with one
    listsModel: bool | None = None  # whether that list names the chosen model (None: not the chosen provider)


@dataclass(frozen=True)
class SandboxFact:
    """How the commands ama runs itself are confined (sandbox/): `[sandbox]` and what the kernel offers."""

    mode: str  # as configured: workspace-write | read-only | off
    mechanism: str | None  # "landlock", "bubblewrap", or None when commands run unconfined
    abi: int  # the kernel's Landlock ABI; 0: none
    networkBlocked: bool
    summary: str


@dataclass
class Report:
    config: FileFact
    credentials: CredentialsFact
    keys: list[KeyFact]
    model: ModelFact
    dataDir: FileFact
    sessionsDir: FileFact
    logFile: FileFact
    providers: list[ProviderFact]
    network: bool
    openPaths: list[PathFact] = field(default_factory=list)  # config/credentials paths others can change
    sandbox: SandboxFact | None = None
    promptWouldWork: bool = False
    problem: str | None = None  # why a prompt would not work
    window: str | None = None  # the chosen model's window and where it comes from (docs/context.md)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# --- the facts -----------------------------------------------------------------------------------------------


def _present(path: Path, kind: Literal["any", "file"] = "any") -> bool:
    """Whether it exists; a directory we may not look into counts as not (Path.exists raises then)."""
    try:
        return path.is_file() if kind == "file" else path.exists()
    except OSError:
        return False


def _exists(path: Path) -> FileFact:
    return FileFact(str(path), _present(path))


def config_fact(path: str | None, data_dir: str | None, env: dict[str, str]) -> tuple[FileFact, Config | None]:
    cfg_path = Path(path) if path else default_config_path(env)
    try:
        cfg = load_config(path, data_dir, env)
    except ConfigError as exc:  # names the line (tomllib) or the field (msgspec)
        return FileFact(str(cfg_path), _present(cfg_path, "file"), str(exc)), None
    return FileFact(str(cfg_path), _present(cfg_path, "file")), cfg


def credentials_fact(env: Mapping[str, str]) -> tuple[CredentialsFact, dict[str, str]]:
    path = credentials_path(env)
    try:
        mode = f"{stat.S_IMODE(path.stat().st_mode):04o}"
    except OSError:
        mode = None
    try:
        keys = read_credentials(path)
    except CredentialsError as exc:  # never quotes a value
        return CredentialsFact(str(path), _present(path), str(exc), mode, too_open(path)), {}
    return CredentialsFact(str(path), _present(path), None, mode, too_open(path), sorted(keys)), keys


def key_names(cfg: Config) -> list[str]:
    """The built-in providers' key variables, then every configured `api_key_env`, each once."""
    names = [e.api_key_env for e in BUILTIN_ENDPOINTS.values()]
    names += [p.api_key_env for p in cfg.providers.values() if p.api_key_env]
    return list(dict.fromkeys(names))


def key_facts(names: list[str], env: Mapping[str, str], file_keys: Mapping[str, str]) -> list[KeyFact]:
    out = []
    for name in names:
        in_env, in_file = bool(env.get(name)), bool(file_keys.get(name))
        source: Literal["environment", "credentials file"] | None = (
            "environment" if in_env else "credentials file" if in_file else None
        )
        out.append(KeyFact(name, source, in_env and in_file))
    return out


def open_paths(paths: list[Path], uid: int | None = None) -> list[PathFact]:
    """Each path (file or directory, that exists) others than its owner may write, or that belongs to someone
    else (neither this user nor root): whoever can change the config or the credentials chooses the model, its
    URL and its key. A symlink is judged by what it points to (that is what ama reads)."""
    me = os.getuid() if uid is None and hasattr(os, "getuid") else uid
    out: list[PathFact] = []
    for path in dict.fromkeys(paths):
        try:
            st = path.stat()
        except OSError:
            continue
        mode = stat.S_IMODE(st.st_mode)
        shown = f"{mode:04o}"
        if (which := _writers(mode)) is not None:
            out.append(PathFact(str(path), shown, f"writable by {which}"))
        if me is not None and st.st_uid not in (me, 0):
            out.append(PathFact(str(path), shown, "owned by another user", st.st_uid))
    return out


_WRITERS = {(True, True): "group and others", (True, False): "group", (False, True): "others"}


def _writers(mode: int) -> str | None:
    """Who besides the owner may write a file of this mode: "group", "others", both, or None."""
    return _WRITERS.get((bool(mode & stat.S_IWGRP), bool(mode & stat.S_IWOTH)))


# --- the provider check --------------------------------------------------------------------------------------


def _scrub(text: str, secrets: list[str]) -> str:
    """A server may echo the key it refused, and an exception may quote a header: remove every key value."""
    for s in sorted(secrets, key=len, reverse=True):
        for form in {s, repr(s)[1:-1], json.dumps(s)[1:-1]}:
            if form:
                text = text.replace(form, REDACTED)
    return text


def _display_url(url: str) -> str:
    from ama_acp.providers.failures import safe_url

    try:
        return safe_url(url)
    except ValueError:  # a port that is not a number
        return "(not a valid URL)"


def _model_ids(body: bytes) -> list[str] | None:
    """The ids of an OpenAI or Anthropic model list, None when it is not one."""
    items = model_list_items(body)
    if items is None:
        return None
    return [m["id"] for m in items if isinstance(m, dict) and isinstance(m.get("id"), str)]


def check_provider(
    name: str,
    pcfg: ProviderConfig,
    keys: Mapping[str, str],
    *,
    network: bool = True,
    chosen_model: str | None = None,
    timeout: float = TIMEOUT,
) -> ProviderFact:
    """One GET /models to `name`, its key sent as the provider sends it; every failure is a result, never an
    exception. `chosen_model` (the model name without its provider) is looked for in the list it returns."""
    if pcfg.kind == "scripted":
        return ProviderFact(name, pcfg.kind, None, None, "local", detail="a script: nothing to reach")
    variable = api_key_env(name, pcfg)
    base = base_url_for(name, pcfg, keys)  # one rule for the provider and its checks
    fact = ProviderFact(name, pcfg.kind, _display_url(base), variable, "skipped")
    key = keys.get(variable) if variable else None
    if variable and not key:
        why = f"{variable} is set neither in the environment nor in the credentials file"
        return _with(fact, "no-key", detail=why)
    if not network:
        return _with(fact, "skipped", detail="--no-network")
    return _asked(fact, models_request(pcfg.kind, base, key), key, chosen_model, timeout)


def _asked(
    fact: ProviderFact, request: tuple[str, dict[str, str]], key: str | None, chosen_model: str | None, timeout: float
) -> ProviderFact:
    """`fact` with what the provider answered to `request` (its URL and headers)."""
    secrets = [key] if key else []
    url, headers = request
    try:
        status, body = _get(url, headers, timeout)
    except _Unreachable as exc:
        return _with(fact, "unreachable", detail=_scrub(str(exc), secrets))
    except _Untrusted as exc:
        return _with(fact, "untrusted", detail=_scrub(str(exc), secrets))
    except _NotSent as exc:
        return _with(fact, "not-sent", detail=_scrub(str(exc), secrets))
    from ama_acp.providers.failures import error_detail

    if 200 <= status < 300:
        ids = _model_ids(body)
        listed = None if chosen_model is None or ids is None else chosen_model in ids
        return _with(fact, "ok", status, models=None if ids is None else len(ids), listsModel=listed)
    detail = _scrub(error_detail(body), secrets)
    return _with(fact, "refused" if status in (401, 403) else "status", status, detail)


def _with(fact: ProviderFact, result: Result, status: int | None = None, detail: str = "", **more: Any) -> ProviderFact:
    return ProviderFact(**{**asdict(fact), "result": result, "status": status, "detail": detail, **more})


class _Unreachable(ControlFlow):
    """The provider check got no answer: it becomes that provider's line of the report."""


class _Untrusted(ControlFlow):
    """The provider's TLS certificate failed verification (why, in the ssl module's words): a line of the report."""


class _NotSent(ControlFlow):
    """The provider check could not even be sent (a URL or header httpx refuses): a line of the report."""


def _get(url: str, headers: dict[str, str], timeout: float) -> tuple[int, bytes]:
    """(status, the body's first MAX_BODY bytes) within about `timeout` seconds, or _Unreachable/_NotSent."""
    import httpx

    deadline = time.monotonic() + timeout
    try:
        # No redirect is followed, so the TLS context is the URL's own (providers/tls.py: none loaded for http).
        with httpx.Client(timeout=timeout, follow_redirects=False, verify=tls_for(url)) as client:
            with client.stream("GET", url, headers=headers) as response:
                return response.status_code, _body(response, deadline)
    except httpx.TimeoutException:
        raise _Unreachable(f"no answer within {timeout:g} s") from None
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise _NotSent(f"not a URL ama can reach: {exc}") from None
    except httpx.LocalProtocolError as exc:  # e.g. a key with a line break: h11 quotes the header, scrubbed later
        raise _NotSent(f"the request could not be sent: {exc}") from None
    except httpx.HTTPError as exc:
        if (why := certificate_failure(exc)) is not None:
            raise _Untrusted(why) from None
        raise _Unreachable(str(exc) or type(exc).__name__) from None
    except (ValueError, OSError) as exc:  # a header that is not ASCII, a socket error outside httpx's own
        raise _NotSent(f"the request could not be sent: {type(exc).__name__}: {exc}") from None


def _body(response: httpx.Response, deadline: float) -> bytes:
    """The body's first MAX_BODY bytes, or what came of it by the deadline."""
    import httpx

    body = bytearray()
    try:
        for chunk in response.iter_bytes():
            body += chunk
            # A server that trickles bytes must not hold the check past its deadline.
            if len(body) >= MAX_BODY or time.monotonic() > deadline:
                break
    except httpx.HTTPError:  # the body broke off or does not decode: the status is the answer
        pass
    return bytes(body[:MAX_BODY])


# --- the whole report ----------------------------------------------------------------------------------------


def _model_fact(cfg: Config | None, model: str | None, keys: KeySource) -> ModelFact:
    if cfg is None:
        why = "ama does not start until its config file can be used: fix the error above"
        return ModelFact(None, why, "none", None, False)
    choice = usable_model(cfg, model, keys)
    return ModelFact(choice.model_id, choice.why, choice.source, choice.key_variable, choice.key_from_file)


def _targets(cfg: Config | None, model_id: str | None) -> list[tuple[str, ProviderConfig]]:
    """Each configured provider, and the chosen model's provider when it is a built-in one (none without a
    config that can be used)."""
    if cfg is None:
        return []
    targets = dict(cfg.providers)
    if model_id is not None:
        try:
            provider, _ = split_model_id(model_id)
        except ModelError:
            provider = ""
        pcfg = provider_config(cfg, provider) if provider else None
        if pcfg is not None and provider not in targets:
            targets[provider] = pcfg
    return list(targets.items())


def diagnose(
    config: str | None = None,
    data_dir: str | None = None,
    model: str | None = None,
    env: Mapping[str, str] | None = None,
    network: bool = True,
    timeout: float = TIMEOUT,
) -> Report:
    """Every fact `ama doctor` prints, for the environment `env` (default: this process's)."""
    environ = dict(os.environ if env is None else env)
    cfg_fact, cfg = config_fact(config, data_dir, environ)
    cred_fact, file_keys = credentials_fact(environ)
    register_secret_values(file_keys.values())  # whatever else reports them, the redactor knows them
    if cfg is not None:
        register_config(cfg)
    keys = KeySource(environ, file_keys)
    effective = cfg or Config()
    ddir = Path(effective.data_dir or data_dir or default_data_dir(environ))
    model_fact = _model_fact(cfg, model, keys)
    chosen_provider, chosen_name = (None, None)
    if model_fact.id is not None:
        chosen_provider, _, chosen_name = model_fact.id.partition("/")
    providers = [
        check_provider(
            name,
            pcfg,
            keys,
            network=network,
            chosen_model=chosen_name if name == chosen_provider else None,
            timeout=timeout,
        )
        for name, pcfg in _targets(cfg, model_fact.id)
    ]
    report = Report(
        config=cfg_fact,
        credentials=cred_fact,
        keys=key_facts(key_names(effective), environ, file_keys),
        model=model_fact,
        dataDir=_exists(ddir),
        sessionsDir=_exists(ddir / "sessions"),
        logFile=_exists(ddir / "logs" / "ama.log"),  # where logs.setup_logging writes it
        providers=providers,
        network=network,
        openPaths=open_paths(_guarded_paths(Path(cfg_fact.path), Path(cred_fact.path))),
    )
    if cfg is not None and model_fact.id is not None:
        from ama_acp.providers.window_probe import describe_window

        chosen = next((p for p in providers if p.name == chosen_provider), None)
        answered = network and chosen is not None and chosen.result == "ok"  # else: asking more only waits
        report.window = describe_window(cfg, model_fact.id, keys, answered)
    box = sandbox_state(effective.sandbox)
    report.sandbox = SandboxFact(box.mode, box.mechanism, box.abi, box.network_blocked, box.summary())
    report.problem = _problem(report, chosen_provider)
    report.promptWouldWork = report.problem is None
    return report


def _guarded_paths(config: Path, credentials: Path) -> list[Path]:
    """The config file and its directory, the credentials file and its directory."""
    return [config, config.parent, credentials, credentials.parent]


def _problem(report: Report, chosen_provider: str | None) -> str | None:
    if report.config.error is not None:
        return "the config file cannot be used"
    if report.model.id is None:
        return "no usable model"
    fact = next((p for p in report.providers if p.name == chosen_provider), None)
    if fact is None or fact.result in ("ok", "local", "skipped"):
        return None
    if fact.result == "untrusted":  # the provider's line above says what to do; this one need not say it again
        return f"ama does not trust the TLS certificate of its provider {fact.name!r} ({fact.detail})"
    return f"its provider {fact.name!r} did not answer as it should ({_provider_text(fact)})"


# --- output --------------------------------------------------------------------------------------------------


# What the provider's line says after its name, by result (the ones that need more than a template are below).
_PROVIDER_TEXTS: dict[str, str] = {
    "unreachable": "cannot reach it: {detail}",
    "untrusted": "its TLS certificate failed verification ({detail}). {advice}",
    "status": "answered HTTP {status}: {detail}",
    "no-key": "not checked: {detail}",
    "skipped": "not checked (--no-network)",
}


def _provider_text(p: ProviderFact) -> str:
    if p.result == "ok":
        listed = f", {p.models} models listed" if p.models is not None else ""
        return f"answers (HTTP {p.status}{listed})"
    if p.result == "refused":
        hint = "" if p.keyVariable else ": it wants a key (set api_key_env for it in the config)"
        return f"refused (HTTP {p.status}) {p.detail}{hint}".rstrip()
    return _PROVIDER_TEXTS.get(p.result, "{detail}").format(status=p.status, detail=p.detail, advice=CERTIFICATE_ADVICE)


def _found(f: FileFact, missing: str = "not found") -> str:
    return f"{f.path} ({'found' if f.found else missing})"


def render(report: Report) -> list[str]:
    """The report for a person: one fact a line."""
    c = report.config
    lines = [f"config file: {_found(c, 'not found: the defaults apply')}" + (f": {c.error}" if c.error else "")]
    lines += _credentials_lines(report.credentials)
    lines += [_open_path_line(o) for o in report.openPaths]
    for k in report.keys:
        where = f"set in the {k.source}" if k.source else "not set"
        lines.append(f"key {k.name}: {where}" + (" (the credentials file holds one too)" if k.alsoInFile else ""))
    m = report.model
    if m.id is not None:
        lines.append(f"model: {m.id} ({m.why})")
    else:
        lines.append(f"model: none usable. {m.why}")
    if report.window is not None:
        lines.append(f"window: {report.window}")
    lines.append(f"data dir: {_found(report.dataDir, 'not created yet')}")
    lines.append(f"sessions: {_found(report.sessionsDir, 'none yet')}")
    lines.append(f"log: {_found(report.logFile, 'none yet')}")
    lines += _provider_lines(report.providers, m.id)
    if report.sandbox is not None:
        lines.append(f"sandbox: {report.sandbox.summary}")
    if report.promptWouldWork:
        lines.append("result: a prompt would work" + ("" if report.network else " (providers not checked)"))
    else:
        lines.append(f"result: a prompt would not work: {report.problem}")
    # Paths, server answers and error messages are other people's text: each line one line, controls visible.
    return [one_line(line) for line in lines]


def _credentials_lines(cred: CredentialsFact) -> list[str]:
    if cred.error:
        lines = [f"credentials file: {cred.path}: {cred.error}"]
    elif cred.found:
        names = ", ".join(cred.keys) or "no keys"
        lines = [f"credentials file: {cred.path} (found, mode {cred.mode}; holds {names})"]
    else:
        lines = [f"credentials file: {cred.path} (not found)"]
    if cred.tooOpen:
        lines.append(f"  warning: others than you may read it: run `chmod 600 {cred.path}`")
    return lines


def _open_path_line(o: PathFact) -> str:
    if o.problem == "owned by another user":
        return f"  warning: {o.path} belongs to another user (uid {o.owner}): they decide what ama runs"
    return (
        f"  warning: {o.path} is {o.problem} (mode {o.mode}): others could change what ama uses; "
        f"run `chmod go-w {o.path}`"
    )


def _provider_lines(providers: list[ProviderFact], model_id: str | None) -> list[str]:
    if not providers:
        return ["providers: none configured"]
    lines = []
    for p in providers:
        where = f"{p.kind}, {p.baseUrl}" if p.baseUrl else p.kind
        key = f", key {p.keyVariable}" if p.keyVariable else ""
        lines.append(f"provider {p.name} ({where}{key}): {_provider_text(p)}")
        if p.listsModel is False and model_id is not None:
            lines.append(f"  note: {model_id.partition('/')[2]} is not among the models it lists")
    return lines


def _safety_net(text: str, values: list[str]) -> str:
    """No key value in the output, whatever path it took (a base URL with a token in its query, a path)."""
    return _scrub(text, [v for v in values if len(v) >= MIN_SECRET_LENGTH])


def _key_values(report: Report, env: Mapping[str, str]) -> list[str]:
    from ama_acp.secrets import secret_values

    names = {k.name for k in report.keys}
    return [v for n, v in env.items() if v and n in names] + secret_values(env)


def run_doctor(argv: list[str], env: Mapping[str, str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="ama doctor", description="what ama would use and why; exit 0 when a prompt would work"
    )
    p.add_argument("--config", help="config file (TOML); default $AMA_CONFIG or ~/.config/ama/config.toml")
    p.add_argument("--data-dir", help="data directory; default $AMA_DATA_DIR or ~/.local/share/ama")
    p.add_argument("--model", help="check this model id instead of the one ama would choose")
    p.add_argument("--json", action="store_true", help="the same facts as one JSON object")
    p.add_argument("--no-network", action="store_true", help="do not send the providers their one request")
    args = p.parse_args(argv)
    environ = dict(os.environ if env is None else env)
    report = diagnose(args.config, args.data_dir, args.model, environ, network=not args.no_network)
    text = json.dumps(report.to_json(), indent=2) if args.json else "\n".join(render(report))
    sys.stdout.write(_safety_net(text, _key_values(report, environ)) + "\n")
    return 0 if report.promptWouldWork else 1
