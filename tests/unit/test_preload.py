"""server.py's preload thread and what session/new's own path imports (issue 15).

The preload imports PRELOAD in order, then runs the first prompt's preparation; it lowers the switch interval
only while it runs; it starts nothing once told to stop; a step that fails is logged, never raised. And the
answer to session/new needs none of the session machinery: checked in a fresh interpreter, where importing
the manager and answering a session/new leaves the heavy modules unimported.
"""

from __future__ import annotations

import gc
import importlib
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from ama_acp import server
from tests.support.harness import clean_env

ROOT = Path(__file__).resolve().parents[2]


def run(prepare: Callable[[], None] | None = None, stop: threading.Event | None = None) -> None:
    server._preload(prepare, stop or threading.Event())


def test_session_news_module_comes_first() -> None:
    assert server.PRELOAD[0] == "ama_acp.session.manager"
    assert len(set(server.PRELOAD)) == len(server.PRELOAD)


def test_every_preloaded_name_is_a_module_of_ama() -> None:
    import importlib.util

    for name in server.PRELOAD:
        assert name.startswith("ama_acp.") and importlib.util.find_spec(name) is not None, name


def test_steps_run_in_order_with_a_low_switch_interval_restored_after(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[str, float]] = []
    monkeypatch.setattr(server, "PRELOAD", ("json", "csv"))
    real = importlib.import_module

    def recording(name: str) -> ModuleType:
        seen.append((name, sys.getswitchinterval()))
        return real(name)

    monkeypatch.setattr("importlib.import_module", recording)
    before = sys.getswitchinterval()
    with caplog.at_level(logging.INFO, logger="ama_acp.server"):
        run(lambda: seen.append(("prepare", sys.getswitchinterval())))
    assert [name for name, _ in seen] == ["json", "csv", "prepare"]
    assert all(interval == min(before, server.PRELOAD_SWITCH_INTERVAL_S) for _, interval in seen)
    assert sys.getswitchinterval() == before
    assert server.PRELOADED in caplog.text


def test_what_a_first_answer_in_text_does_not_use_is_not_preloaded() -> None:
    """Imported on first use instead (issue 41): a preload of them would run beside the first request."""
    assert {"ama_acp.session.live", "ama_acp.tools.registry", "ama_acp.context.request_size"} <= set(server.PRELOAD)
    assert not {"ama_acp.session.editor.approval", "ama_acp.session.lifecycle"} & set(server.PRELOAD)


@pytest.mark.parametrize("paused", [True, False])
def test_the_collector_paused_for_the_start_is_resumed_when_the_preload_ends(
    monkeypatch: pytest.MonkeyPatch, paused: bool
) -> None:
    monkeypatch.setattr(server, "PRELOAD", ("json",))
    was = gc.isenabled()
    gc.disable()
    try:
        server._preload(None, threading.Event(), collector_paused=paused)
        assert gc.isenabled() is paused  # only a pause of the start's own is ended: anyone else's is theirs
    finally:
        gc.unfreeze()
        if was:
            gc.enable()


@pytest.mark.allow_traceback
def test_a_failing_step_is_logged_and_the_rest_still_runs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(server, "PRELOAD", ("ama_acp.no_such_module", "json"))
    ran = []
    with caplog.at_level(logging.INFO, logger="ama_acp.server"):
        run(lambda: ran.append(1))

        def broken() -> None:
            raise RuntimeError("a bug")

        run(broken)
    assert ran == [1]
    assert "preloading ama_acp.no_such_module failed" in caplog.text
    assert "preloading the first prompt's provider failed" in caplog.text
    assert caplog.text.count(server.PRELOADED) == 2


def test_once_stopped_nothing_more_is_started(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stop = threading.Event()
    seen = []
    monkeypatch.setattr(server, "PRELOAD", ("json", "csv"))
    real = importlib.import_module

    def stopping(name: str) -> ModuleType:
        seen.append(name)
        stop.set()  # the connection ends while the first step runs
        return real(name)

    monkeypatch.setattr("importlib.import_module", stopping)
    before = sys.getswitchinterval()
    with caplog.at_level(logging.INFO, logger="ama_acp.server"):
        run(lambda: seen.append("prepare"), stop)
    assert seen == ["json"]
    assert server.PRELOAD_STOPPED in caplog.text and server.PRELOADED not in caplog.text
    assert sys.getswitchinterval() == before


@pytest.mark.parametrize("model", [None, "", "not-a-model-id", "nosuch/model", "scripted/demo"])
def test_preparing_a_model_without_http_never_raises_nor_imports_httpx(model: str | None) -> None:
    code = (
        "import sys, json\n"
        "from ama_acp.config import Config\n"
        "from ama_acp.session.manager import prepare_first_prompt\n"
        f"prepare_first_prompt(Config(), {model!r})\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'httpcore'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60, check=True)
    assert json.loads(out.stdout) == []


@pytest.mark.parametrize(
    ("model", "env", "dialect"),
    [("openai/gpt-5", "OPENAI_API_KEY", "openai"), ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY", "anthropic")],
)
def test_preparing_an_http_model_imports_its_dialect_and_httpcore_not_httpx(
    tmp_path: Path, model: str | None, env: str, dialect: str
) -> None:
    code = (
        "import sys, json\n"
        "from ama_acp.config import Config\n"
        "from ama_acp.session.manager import prepare_first_prompt\n"
        f"prepare_first_prompt(Config(), {model!r})\n"
        "from ama_acp.providers import tls\n"
        "print(json.dumps([sorted(m for m in sys.modules if m in WANTED), tls.ssl_context.cache_info().hits]))\n"
    ).replace("WANTED", repr(("httpx", "httpcore", f"ama_acp.providers.{dialect}")))
    environment = clean_env(tmp_path, {env: "test-key-abcdefgh"})
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60, check=True, env=environment
    )
    modules, hits = json.loads(out.stdout)
    # A model request goes straight over httpcore (providers/exchange.py): httpx's client layer stays unimported.
    assert modules == sorted(("httpcore", f"ama_acp.providers.{dialect}"))
    assert hits == 0  # made once, by the preparation; a request's client then finds it cached


def test_an_http_model_without_its_key_prepares_nothing_to_send(tmp_path: Path) -> None:
    """No key: the session's provider only says what to do (resolve.FailingProvider), no HTTP client needed."""
    code = (
        "import sys, json\n"
        "from ama_acp.config import Config\n"
        "from ama_acp.session.manager import prepare_first_prompt\n"
        "prepare_first_prompt(Config(), 'openai/gpt-5')\n"
        "print(json.dumps('httpx' in sys.modules))\n"
    )
    environment = clean_env(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60, check=True, env=environment
    )
    assert json.loads(out.stdout) is False


# What answering session/new must not import: the session machinery, the store (and `secrets`, `shutil`),
# the tools, the provider modules and httpx. Imported in the fresh interpreter first: what `ama --mode acp`
# imports before it answers `initialize`. (The store's `entries` is imported since issue 39: the session's file
# and its header are made before the answer, session/store/early.py, with it and a few small modules only.)
STARTUP = ("ama_acp.cli", "ama_acp.server", "ama_acp.logs", "ama_acp.rpc.stdio", "ama_acp.providers.resolve")
HEAVY = (
    "ama_acp.session.live",
    "ama_acp.session.store.session_store",
    "ama_acp.session.lifecycle",
    "ama_acp.session.commands",
    "ama_acp.session.store.listing",
    "ama_acp.session.store.reader",
    "ama_acp.tools.registry",
    "ama_acp.agent.loop",
    "ama_acp.providers.stream",
    "httpx",
    "secrets",
    "shutil",
)


def test_answering_session_new_imports_none_of_the_session_machinery(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    code = f"""
import json, sys
for name in {STARTUP!r}:
    __import__(name)
already = sorted(m for m in {HEAVY!r} if m in sys.modules)
from ama_acp.config import Config
from ama_acp.session.manager import SessionManager

class Peer:
    async def notify(self, method, params): pass
    async def request(self, method, params, timeout=None): return None

manager = SessionManager(Config(data_dir={str(tmp_path / "data")!r}), Peer(), default_model="scripted/demo")
opened = manager.open_session({str(ws)!r}, None, [])
print(json.dumps({{"already": already, "after": sorted(m for m in {HEAVY!r} if m in sys.modules),
                  "id": opened.session_id}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60, check=True)
    result = json.loads(out.stdout)
    assert result["already"] == [], "startup itself imports these; the check below would prove nothing"
    assert result["after"] == []
    assert result["id"].startswith("ses_")
    # The file is there before the answer (a process killed now leaves a session that loads); its Session later.
    [made] = (tmp_path / "data" / "sessions").iterdir()
    assert made.name == f"{result['id']}.jsonl" and b'"cwd"' in made.read_bytes()
