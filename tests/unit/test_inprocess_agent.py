"""The in-process agent of the integration tests (tests/support/inprocess_agent.py): a run is ama's server as the
command starts it, and what a process owns is the run's alone: the environment, ama's module state, the log
handlers and the test runner's signals come back as they were."""

from __future__ import annotations

import ast
import importlib
import logging
import os
import signal
from pathlib import Path

import anyio
import pytest

import ama_acp
from ama_acp import secrets
from ama_acp.client.connection import AgentExited, AgentProcess
from tests.support import inprocess_agent
from tests.support.harness import Ama, clean_env, run_ama
from tests.support.inprocess_agent import CLEARED, FRESH, KEPT, OneAtATime, start_in_process
from tests.support.json_values import session_id

pytestmark = pytest.mark.anyio

_CACHES = {"cache", "lru_cache"}


def _name(decorator: ast.expr) -> str:
    if isinstance(decorator, ast.Call):
        decorator = decorator.func
    if isinstance(decorator, ast.Attribute):
        return decorator.attr
    return decorator.id if isinstance(decorator, ast.Name) else ""


def _empty_container(value: ast.expr | None) -> bool:
    if isinstance(value, ast.Set | ast.List):
        return not value.elts
    if isinstance(value, ast.Dict):
        return not value.keys
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in ("set", "dict", "list")
        and not value.args
        and not value.keywords
    )


def module_state() -> set[tuple[str, str]]:
    """(module, name) of what lives as long as ama's process: names a function rebinds (`global`), empty
    containers made at import (filled as ama runs) and cached functions."""
    root = Path(ama_acp.__file__).parent
    found: set[tuple[str, str]] = set()
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)  # a package's state is the package's
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {name for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names}
        for node in tree.body:
            if isinstance(node, ast.Assign) and _empty_container(node.value):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and _empty_container(node.value) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.FunctionDef) and any(_name(d) in _CACHES for d in node.decorator_list):
                names.add(node.name)
        found.update((module, name) for name in names)
    return found


def test_every_piece_of_module_state_is_reset_cleared_or_kept_on_purpose() -> None:
    """A new global in ama_acp/ must be put in one table: else one in-process run would leak into the next."""
    listed = {(m, a) for m, a, _ in FRESH} | set(CLEARED) | set(KEPT)
    missing = module_state() - listed
    assert not missing, f"module state the in-process agent does not know (tests/support/inprocess_agent.py): {missing}"
    for module, attr in listed:
        assert hasattr(importlib.import_module(module), attr), f"{module}.{attr} is gone: update the table"


async def _demo_session(ama: Ama, env: dict[str, str] | None = None) -> AgentProcess:
    async with run_ama(ama, "--model", "scripted/demo", env=env) as conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(str(ama.workspace)))
        assert (await conn.prompt(sid, "hello"))["stopReason"] == "end_turn"
        assert os.environ["XDG_DATA_HOME"] == str(ama.tmp / "xdg-data")  # the run's environment
        assert conn.returncode is None
    return conn


async def test_a_run_gives_back_the_environment_the_logging_the_secrets_and_the_signals(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    ama.config.write_text(
        ama.config.read_text(encoding="utf-8")
        + '[providers.local]\nkind = "openai"\nbase_url = "http://127.0.0.1:9"\napi_key_env = "ODD_KEY_NAME"\n',
        encoding="utf-8",
    )
    env_before = dict(os.environ)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    httpx_level = logging.getLogger("httpx").level
    sigint = signal.getsignal(signal.SIGINT)
    configured = secrets.configured_secret_names()

    conn = await _demo_session(ama, env={"ODD_KEY_NAME": "value-of-the-odd-key"})

    assert conn.returncode == 0 and conn.ended_by == "eof"
    assert dict(os.environ) == env_before
    assert root.handlers == handlers and root.level == level and logging.getLogger("httpx").level == httpx_level
    assert signal.getsignal(signal.SIGINT) is sigint
    assert secrets.configured_secret_names() == configured  # ODD_KEY_NAME was the run's secret only
    log = ama.log_text()
    assert "model scripted/demo (from --model)" in log and "input closed; exiting" in log
    assert "preloaded the session modules" in log or "preload stopped" in log
    assert "model scripted/demo" in ama.stderr.read_text(encoding="utf-8")  # --log-level info: stderr too
    assert inprocess_agent._running is None


async def test_each_run_starts_from_a_fresh_process_state(tmp_path: Path) -> None:
    """A secret name registered by one run is unknown to the next, as in a new process."""
    seen: list[frozenset[str]] = []
    original = inprocess_agent._Borrowed.__init__

    def spy(self: inprocess_agent._Borrowed, env: dict[str, str]) -> None:
        original(self, env)
        seen.append(secrets.configured_secret_names())

    secrets.register_secret_names(["A_NAME_OF_THE_TEST_PROCESS"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(inprocess_agent._Borrowed, "__init__", spy)
        await _demo_session(Ama(tmp_path / "one"))
        await _demo_session(Ama(tmp_path / "two"))
    assert seen == [frozenset(), frozenset()]
    assert "A_NAME_OF_THE_TEST_PROCESS" in secrets.configured_secret_names()


async def test_a_bad_config_exits_2_with_its_message_on_stderr(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    ama.config.write_text("model = [\n", encoding="utf-8")
    env_before = dict(os.environ)
    agent = await start_in_process(ama.argv(), clean_env(ama.tmp), ama.stderr)
    assert await agent.wait() == 2
    assert "config.toml" in ama.stderr.read_text(encoding="utf-8")
    assert dict(os.environ) == env_before and inprocess_agent._running is None
    await agent.aclose()


async def test_a_second_agent_at_once_is_refused_and_a_pid_is_asked_for_in_vain(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    async with run_ama(ama, "--model", "scripted/demo") as conn:
        with pytest.raises(OneAtATime, match="process=True"):
            async with run_ama(ama, "--model", "scripted/demo"):
                pass
        with pytest.raises(RuntimeError, match="process=True"):
            _ = conn.pid
        await conn.initialize()


async def test_terminate_ends_the_input_as_sigterm_does_and_kill_cancels(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    agent = await start_in_process(ama.argv("--model", "scripted/demo"), clean_env(ama.tmp), ama.stderr)
    agent.terminate()
    assert await agent.wait() == 0
    await agent.aclose()
    agent = await start_in_process(ama.argv("--model", "scripted/demo"), clean_env(ama.tmp), ama.stderr)
    agent.kill()
    assert await agent.wait() == -signal.SIGKILL
    await agent.aclose()
    assert inprocess_agent._running is None


@pytest.mark.allow_traceback
async def test_a_server_that_raises_exits_1_with_its_traceback_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("the server broke")

    monkeypatch.setattr("ama_acp.server.serve", broken)
    ama = Ama(tmp_path)
    async with run_ama(ama, "--model", "scripted/demo", validate=False) as conn:
        with pytest.raises(AgentExited):
            await conn.initialize()
    assert conn.returncode == 1
    err = ama.stderr.read_text(encoding="utf-8")
    assert "Traceback" in err and "ZeroDivisionError: the server broke" in err


async def test_pipes_carry_bytes_in_reads_of_at_most_max_bytes() -> None:
    writer, reader = inprocess_agent._pipe()
    await writer.send(b"abcdef")
    writer.close()
    assert [await reader.receive(4), await reader.receive(4)] == [b"abcd", b"ef"]
    with pytest.raises(anyio.EndOfStream):
        await reader.receive()


# --- the raw line driver (tests/support/raw.py): in-process by default, on an event loop of its own


def test_a_raw_ama_runs_in_process_and_ends_with_the_commands_status(tmp_path: Path) -> None:
    from tests.support.raw import RawAma

    env_before = dict(os.environ)
    raw = RawAma(Ama(tmp_path), "--model", "scripted/demo")
    assert raw.in_process
    with pytest.raises(RuntimeError, match="process=True"):
        _ = raw.proc
    # Two requests in one write, and a line cut in two writes: read as lines, answered in order.
    init = b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}'
    raw.methods.update({1: "initialize", 2: "initialize", 3: "initialize"})  # for the answers' validation
    raw.send_line(init + b"\n" + init.replace(b'"id": 1', b'"id": 2'))
    assert [raw.recv()["id"], raw.recv()["id"]] == [1, 2]
    third = init.replace(b'"id": 1', b'"id": 3')
    raw._agent.write(third[:20])
    raw.send_line(third[20:])
    assert raw.recv()["id"] == 3
    assert raw.close() == 0 and raw.close() == 0 and not raw.alive()
    assert dict(os.environ) == env_before and inprocess_agent._running is None


def test_a_raw_ama_left_running_by_a_failed_test_is_ended_by_the_next_check(tmp_path: Path) -> None:
    from tests.support import raw as raw_module

    before = raw_module.live_in_process()
    raw = raw_module.RawAma(Ama(tmp_path), "--model", "scripted/demo")
    assert raw.request(1, "initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
    assert raw_module.close_leftovers(before) == 1  # what tests/conftest.py does after every test
    assert raw.returncode() == -signal.SIGKILL and inprocess_agent._running is None
    with pytest.raises(BrokenPipeError):
        raw.send({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": 1}})


def test_ama_test_processes_makes_every_raw_ama_a_real_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.raw import RawAma

    monkeypatch.setenv("AMA_TEST_PROCESSES", "1")
    raw = RawAma(Ama(tmp_path), "--model", "scripted/demo")
    assert not raw.in_process and raw.proc.pid > 0
    assert raw.request(1, "initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
    assert raw.close() == 0
