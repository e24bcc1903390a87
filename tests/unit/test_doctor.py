"""`ama doctor` (ama_acp/doctor.py): each fact from tmp dirs and an explicit environment, never the real home;
the provider check against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from ama_acp import doctor
from ama_acp.config import ProviderConfig
from ama_conformance.servers.background import BackgroundServer
from ama_conformance.servers.model import ScriptedModel

KEY = "sk-doctor-unit-0123456789abcdef"


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    """An environment with nothing of the person's: config, credentials and data all under tmp."""
    return {"XDG_CONFIG_HOME": str(tmp / "xdg-config"), "XDG_DATA_HOME": str(tmp / "xdg-data"), **extra}


def write_credentials(tmp: Path, keys: dict[str, str], mode: int = 0o600) -> Path:
    path = tmp / "xdg-config" / "ama" / "credentials.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[keys]\n" + "".join(f'{k} = "{v}"\n' for k, v in keys.items()))
    path.chmod(mode)
    return path


def write_config(tmp: Path, text: str) -> Path:
    path = tmp / "xdg-config" / "ama" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Refuses(BaseHTTPRequestHandler):
    """401 for every request, echoing the key it was sent (as careless servers do)."""

    def do_GET(self) -> None:
        sent = self.headers.get("authorization", "") + self.headers.get("x-api-key", "")
        body = json.dumps({"error": {"message": f"invalid key {sent!r}"}}).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class RefusingServer(BackgroundServer):
    handler_class = _Refuses


class _NotFound(_Refuses):
    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("content-length", "9")
        self.end_headers()
        self.wfile.write(b"not here!")


class NotFoundServer(BackgroundServer):
    handler_class = _NotFound


class _Garbage(_Refuses):
    """200 with a body that is no model list (and not even JSON)."""

    def do_GET(self) -> None:
        body = b"\xff\xfe[1, 2"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class GarbageServer(BackgroundServer):
    handler_class = _Garbage


@pytest.fixture
def model_server():
    with ScriptedModel() as server:
        yield server


# --- config file ---------------------------------------------------------------------------------------------


def test_no_config_file_means_the_defaults(tmp_path):
    report = doctor.diagnose(env=env_for(tmp_path), network=False)
    assert report.config.path == str(tmp_path / "xdg-config" / "ama" / "config.toml")
    assert not report.config.found and report.config.error is None
    assert "not found: the defaults apply" in "\n".join(doctor.render(report))


def test_a_malformed_config_names_the_line_and_no_prompt_would_work(tmp_path):
    write_config(tmp_path, 'model = "openai/gpt-5"\n[providers.x\n')
    report = doctor.diagnose(env=env_for(tmp_path, OPENAI_API_KEY=KEY), network=False)
    assert report.config.found and "line 2" in (report.config.error or "")
    assert report.model.id is None and not report.promptWouldWork
    assert "config file" in (report.problem or "")


def test_an_explicit_config_that_is_missing_is_an_error(tmp_path):
    report = doctor.diagnose(config=str(tmp_path / "nope.toml"), env=env_for(tmp_path), network=False)
    assert "no such config file" in (report.config.error or "") and not report.promptWouldWork


def test_a_parsed_config_names_its_model(tmp_path):
    write_config(tmp_path, 'model = "scripted/demo"\n')
    report = doctor.diagnose(env=env_for(tmp_path), network=False)
    assert report.config.found and report.config.error is None
    assert report.model.id == "scripted/demo" and report.model.source == "config"
    assert report.promptWouldWork


# --- credentials file and keys -------------------------------------------------------------------------------


def test_credentials_file_names_its_keys_and_mode_never_values(tmp_path):
    path = write_credentials(tmp_path, {"OPENAI_API_KEY": KEY})
    report = doctor.diagnose(env=env_for(tmp_path), network=False)
    assert report.credentials.path == str(path) and report.credentials.found
    assert report.credentials.keys == ["OPENAI_API_KEY"] and report.credentials.mode == "0600"
    assert not report.credentials.tooOpen
    text = "\n".join(doctor.render(report))
    assert "holds OPENAI_API_KEY" in text and "warning" not in text
    assert KEY not in text and KEY not in json.dumps(report.to_json())


def test_a_credentials_file_others_can_read_is_a_warning(tmp_path):
    path = write_credentials(tmp_path, {"OPENAI_API_KEY": KEY}, mode=0o644)
    report = doctor.diagnose(env=env_for(tmp_path), network=False)
    assert report.credentials.tooOpen and report.credentials.mode == "0644"
    assert f"chmod 600 {path}" in "\n".join(doctor.render(report))


def test_a_malformed_credentials_file_is_an_error_without_its_values(tmp_path):
    path = tmp_path / "creds.toml"
    path.write_text(f'[keys]\nOPENAI_API_KEY = "{KEY}\n')  # unterminated string
    report = doctor.diagnose(env=env_for(tmp_path, AMA_CREDENTIALS=str(path)), network=False)
    assert report.credentials.path == str(path) and "line 2" in (report.credentials.error or "")
    assert KEY not in (report.credentials.error or "") and report.model.id is None


def test_each_key_says_where_it_comes_from(tmp_path):
    write_credentials(tmp_path, {"ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": KEY + "-file"})
    write_config(tmp_path, '[providers.local]\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "LOCAL_KEY"\n')
    report = doctor.diagnose(env=env_for(tmp_path, OPENAI_API_KEY=KEY + "-env"), network=False)
    keys = {k.name: k for k in report.keys}
    assert keys["OPENAI_API_KEY"].source == "environment" and keys["OPENAI_API_KEY"].alsoInFile
    assert keys["ANTHROPIC_API_KEY"].source == "credentials file" and not keys["ANTHROPIC_API_KEY"].alsoInFile
    assert keys["DEEPSEEK_API_KEY"].source is None
    assert keys["LOCAL_KEY"].source is None  # configured api_key_env names are listed too
    text = "\n".join(doctor.render(report))
    assert "key ANTHROPIC_API_KEY: set in the credentials file" in text
    assert "key LOCAL_KEY: not set" in text and KEY not in text


# --- model ---------------------------------------------------------------------------------------------------


def test_no_usable_model_says_exactly_what_to_do(tmp_path):
    report = doctor.diagnose(env=env_for(tmp_path), network=False)
    assert report.model.id is None and "ama setup" in report.model.why
    assert not report.promptWouldWork and report.problem == "no usable model"
    assert "ama setup" in "\n".join(doctor.render(report))


def test_a_key_in_the_credentials_file_chooses_the_model(tmp_path):
    write_credentials(tmp_path, {"OPENAI_API_KEY": KEY})
    report = doctor.diagnose(env=env_for(tmp_path), network=False)
    assert report.model.id == "openai/gpt-5" and report.model.keyFromFile
    assert "credentials file" in report.model.why and report.promptWouldWork
    assert "not checked (--no-network)" in "\n".join(doctor.render(report))


def test_model_flag_is_checked_like_ama_would(tmp_path):
    report = doctor.diagnose(model="anthropic/claude-sonnet-4-5", env=env_for(tmp_path), network=False)
    assert report.model.id is None and "ANTHROPIC_API_KEY" in report.model.why and report.model.source == "--model"


# --- where things are, and nothing written -------------------------------------------------------------------


def test_data_dir_sessions_and_log_paths(tmp_path):
    data = tmp_path / "data"
    (data / "logs").mkdir(parents=True)
    (data / "logs" / "ama.log").write_text("")
    report = doctor.diagnose(data_dir=str(data), env=env_for(tmp_path), network=False)
    assert report.dataDir.path == str(data) and report.dataDir.found
    assert report.sessionsDir.path == str(data / "sessions") and not report.sessionsDir.found
    assert report.logFile.path == str(data / "logs" / "ama.log") and report.logFile.found
    default = doctor.diagnose(env=env_for(tmp_path, AMA_DATA_DIR=str(tmp_path / "d2")), network=False)
    assert default.dataDir.path == str(tmp_path / "d2") and not default.dataDir.found


def _tree(root: Path) -> dict[str, tuple[int, float]]:
    return {str(p): (p.stat().st_mode, p.stat().st_mtime) for p in root.rglob("*")}


def test_doctor_writes_nothing(tmp_path, model_server, capsys):
    write_credentials(tmp_path, {"LOCAL_KEY": KEY})
    write_config(
        tmp_path,
        f'model = "local/gpt-4.1"\n[providers.local]\nbase_url = "{model_server.openai_url}"\napi_key_env = "LOCAL_KEY"\n',
    )
    before = _tree(tmp_path)
    assert doctor.run_doctor([], env_for(tmp_path)) == 0
    assert _tree(tmp_path) == before
    assert not (tmp_path / "xdg-data").exists()


# --- the provider check --------------------------------------------------------------------------------------


def test_a_provider_that_answers(tmp_path, model_server):
    pcfg = ProviderConfig(kind="openai", base_url=model_server.openai_url, api_key_env="LOCAL_KEY")
    fact = doctor.check_provider("local", pcfg, {"LOCAL_KEY": KEY}, chosen_model="gpt-4.1")
    assert fact.result == "ok" and fact.status == 200 and fact.models == 5 and fact.listsModel is True
    assert fact.baseUrl == model_server.openai_url
    sent = model_server.requests[-1]
    assert sent.path == "/v1/models" and sent.headers["authorization"] == f"Bearer {KEY}"
    other = doctor.check_provider("local", pcfg, {"LOCAL_KEY": KEY}, chosen_model="no-such-model")
    assert other.listsModel is False


def test_anthropic_is_sent_its_key_as_anthropic_wants(model_server):
    pcfg = ProviderConfig(kind="anthropic", base_url=model_server.anthropic_url, api_key_env="ANTHROPIC_API_KEY")
    fact = doctor.check_provider("anthropic", pcfg, {"ANTHROPIC_API_KEY": KEY})
    assert fact.result == "ok"
    sent = model_server.requests[-1]
    assert sent.path == "/v1/models" and sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] and "authorization" not in sent.headers


def test_built_in_provider_base_url_comes_from_its_variable(model_server):
    keys = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": model_server.openai_url}
    fact = doctor.check_provider("openai", ProviderConfig(kind="openai", api_key_env="OPENAI_API_KEY"), keys)
    assert fact.result == "ok" and fact.baseUrl == model_server.openai_url


def test_a_refused_key_says_401_and_never_quotes_the_key():
    with RefusingServer() as server:
        pcfg = ProviderConfig(kind="openai", base_url=server.url + "/v1", api_key_env="LOCAL_KEY")
        fact = doctor.check_provider("local", pcfg, {"LOCAL_KEY": KEY})
    assert fact.result == "refused" and fact.status == 401
    assert "invalid key" in fact.detail and KEY not in fact.detail
    assert "refused (HTTP 401)" in doctor._provider_text(fact)


def test_a_server_that_wants_a_key_nobody_configured_says_so():
    with RefusingServer() as server:
        fact = doctor.check_provider("local", ProviderConfig(kind="openai", base_url=server.url), {})
    assert fact.result == "refused" and "api_key_env" in doctor._provider_text(fact)


def test_an_unused_port_cannot_be_reached():
    pcfg = ProviderConfig(kind="openai", base_url=f"http://127.0.0.1:{unused_port()}/v1")
    fact = doctor.check_provider("local", pcfg, {})
    assert fact.result == "unreachable" and doctor._provider_text(fact).startswith("cannot reach it")


def test_another_status_is_reported_with_the_servers_text():
    with NotFoundServer() as server:
        fact = doctor.check_provider("local", ProviderConfig(kind="openai", base_url=server.url), {})
    assert fact.result == "status" and fact.status == 404 and "not here!" in fact.detail


def test_a_200_that_is_no_model_list_is_still_an_answer():
    with GarbageServer() as server:
        fact = doctor.check_provider("local", ProviderConfig(kind="openai", base_url=server.url), {}, chosen_model="m")
    assert fact.result == "ok" and fact.models is None and fact.listsModel is None
    assert doctor._model_ids(b'{"data": [{"id": 5}, "x", {"id": "m1"}, null]}') == ["m1"]
    assert doctor._model_ids(b'{"data": {"id": "m1"}}') is None and doctor._model_ids(b"[" * 100_000) is None


def test_a_provider_without_its_key_is_not_asked():
    pcfg = ProviderConfig(kind="openai", base_url=f"http://127.0.0.1:{unused_port()}", api_key_env="LOCAL_KEY")
    fact = doctor.check_provider("local", pcfg, {})
    assert fact.result == "no-key" and "LOCAL_KEY" in fact.detail


@pytest.mark.parametrize(
    "base_url", ["ftp://127.0.0.1/v1", "http://127.0.0.1:notaport/v1", "not a url at all", "http://[::1"]
)
def test_a_hostile_base_url_is_a_result_not_a_crash(base_url):
    fact = doctor.check_provider("local", ProviderConfig(kind="openai", base_url=base_url), {})
    assert fact.result in ("not-sent", "unreachable")


def test_a_key_httpx_refuses_to_send_is_a_result_that_does_not_quote_it(model_server):
    pcfg = ProviderConfig(kind="openai", base_url=model_server.openai_url, api_key_env="LOCAL_KEY")
    for bad in (KEY + "\nx-injected: 1", KEY + "é"):
        fact = doctor.check_provider("local", pcfg, {"LOCAL_KEY": bad})
        assert fact.result == "not-sent" and KEY not in fact.detail, fact


def test_the_chosen_models_provider_decides_the_exit_code(tmp_path, model_server):
    write_credentials(tmp_path, {"OPENAI_API_KEY": KEY})
    env = env_for(tmp_path, OPENAI_BASE_URL=model_server.openai_url)
    report = doctor.diagnose(env=env)
    assert report.promptWouldWork and [p.name for p in report.providers] == ["openai"]
    assert report.providers[0].listsModel is False  # gpt-5 is not in the scripted model's list: a note only
    assert doctor.run_doctor([], env) == 0
    dead = env_for(tmp_path, OPENAI_BASE_URL=f"http://127.0.0.1:{unused_port()}/v1")
    assert doctor.run_doctor([], dead) == 1
    assert doctor.run_doctor(["--no-network"], dead) == 0


def test_every_configured_provider_is_checked(tmp_path, model_server):
    write_config(
        tmp_path,
        f'model = "scripted/demo"\n[providers.up]\nbase_url = "{model_server.openai_url}"\n'
        f'[providers.down]\nbase_url = "http://127.0.0.1:{unused_port()}/v1"\n',
    )
    report = doctor.diagnose(env=env_for(tmp_path))
    results = {p.name: p.result for p in report.providers}
    assert results == {"up": "ok", "down": "unreachable", "scripted": "local"}
    assert report.promptWouldWork  # the scripted model needs neither


# --- output --------------------------------------------------------------------------------------------------


def test_json_is_one_object_with_every_fact_and_no_key(tmp_path, model_server, capsys):
    write_credentials(tmp_path, {"OPENAI_API_KEY": KEY})
    env = env_for(
        tmp_path,
        OPENAI_BASE_URL=model_server.openai_url,
        ANTHROPIC_API_KEY=KEY + "-env",
        ANTHROPIC_BASE_URL=model_server.anthropic_url,
    )
    assert doctor.run_doctor(["--json"], env) == 0
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert set(data) >= {"config", "credentials", "keys", "model", "dataDir", "sessionsDir", "logFile", "providers"}
    assert data["promptWouldWork"] is True and data["model"]["id"] == "anthropic/claude-sonnet-4-5"
    assert KEY not in out.out + out.err
    assert data["providers"][0]["result"] == "ok" and data["model"]["keyVariable"] == "ANTHROPIC_API_KEY"


def test_text_is_one_fact_a_line(tmp_path, capsys):
    assert doctor.run_doctor(["--no-network"], env_for(tmp_path)) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("config file: ") and lines[-1].startswith("result: a prompt would not work")
    assert any(line.startswith("model: none usable.") for line in lines)


def test_the_safety_net_removes_a_key_from_anything_printed(tmp_path, capsys):
    # A key pasted into a base URL's query string: the URL is shown without its query, and never the key.
    write_config(tmp_path, f'[providers.local]\nbase_url = "http://127.0.0.1:{unused_port()}/v1?k={KEY}"\n')
    env = env_for(tmp_path, LOCAL_TOKEN=KEY)
    doctor.run_doctor(["--json"], env)
    doctor.run_doctor([], env)
    out = capsys.readouterr()
    assert KEY not in out.out + out.err


# --- paths others can change (issue 23) ----------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
@pytest.mark.parametrize(
    ("mode", "problem"),
    [
        (0o666, "writable by group and others"),
        (0o620, "writable by group"),
        (0o602, "writable by others"),
        (0o644, None),
        (0o600, None),
    ],
)
def test_a_config_others_can_write_is_reported(tmp_path, mode, problem):
    config = tmp_path / "config.toml"
    config.write_text("")
    os.chmod(tmp_path, 0o700)
    os.chmod(config, mode)
    found = doctor.open_paths([config, tmp_path])
    assert [(f.path, f.problem) for f in found] == ([(str(config), problem)] if problem else [])


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
def test_a_directory_others_can_write_and_a_file_of_another_user(tmp_path):
    folder = tmp_path / "ama"
    folder.mkdir()
    (folder / "credentials.toml").write_text("")
    os.chmod(folder, 0o777)
    found = doctor.open_paths([folder / "credentials.toml", folder, tmp_path / "missing.toml"])
    assert [(f.path, f.mode, f.problem) for f in found] == [(str(folder), "0777", "writable by group and others")]
    # A file that belongs to someone else (as root: given away; else: seen as another user would see ours).
    file = folder / "credentials.toml"
    if os.getuid() == 0:
        os.chown(file, 54321, -1)
        found = doctor.open_paths([file])
    else:
        found = doctor.open_paths([file], uid=os.getuid() + 1)
    assert [(f.problem, f.owner) for f in found] == [("owned by another user", file.stat().st_uid)]
    assert doctor.open_paths([Path("/")], uid=54321) == []  # root's is fine: a system-wide config


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
def test_diagnose_and_render_warn_about_a_writable_config(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('model = "scripted/demo"\n')
    os.chmod(config, 0o666)
    env = {"AMA_CREDENTIALS": str(tmp_path / "credentials.toml"), "HOME": str(tmp_path)}
    report = doctor.diagnose(str(config), str(tmp_path / "data"), env=env, network=False)
    assert [o.path for o in report.openPaths] == [str(config)]
    text = "\n".join(doctor.render(report))
    assert f"warning: {config} is writable by group and others (mode 0666)" in text
    assert report.to_json()["openPaths"][0]["problem"] == "writable by group and others"
