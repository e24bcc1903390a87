"""Drive ama's ACP server with ama's own client, validating every line it writes against the pinned ACP schema
(per method) and checking that nothing else reached its stdout.

`run_ama` runs the server in the test's own process by default (tests/support/inprocess_agent.py: the same
startup code as `ama --mode acp`, the same client, in-memory pipes instead of OS ones); `process=True` starts
the real `ama --mode acp` subprocess, for the tests that exercise the process itself (docs/testing.md). With
AMA_TEST_PROCESSES=1 in the environment every `run_ama` starts a real process (to tell whether a failure is
the in-process harness's).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.client.demo import DEMO_MODEL
from ama_conformance.schema.validate import WireRecorder, load_validator
from tests.support.inprocess_agent import InProcessAgent, environment, start_in_process
from tests.support.json_values import as_object

SECRET_ENV = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "AMA_MODEL",
    "AMA_CONFIG",
    "AMA_SCRIPT",
    "AMA_DATA_DIR",
)


def clean_env(tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
    env["XDG_CONFIG_HOME"] = str(tmp / "xdg-config")
    env["XDG_DATA_HOME"] = str(tmp / "xdg-data")
    env.update(extra or {})
    return env


def write_script(path: Path, replies: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"reply": replies}), encoding="utf-8")
    return path


class Ama:
    """Paths of one test's ama: workspace, data dir, config file."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.workspace = tmp / "ws"
        self.data = tmp / "data"
        self.config = tmp / "config.toml"
        self.stderr = tmp / "stderr.log"
        self.workspace.mkdir(parents=True, exist_ok=True)
        if not self.config.exists():
            # ama never falls back to its demo script by itself (with no usable model it asks to sign in):
            # a test that wants the demo names it, as `ama demo` does. Tests that write their own config
            # replace this line.
            self.config.write_text(f'model = "{DEMO_MODEL}"\n', encoding="utf-8")

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "ama_acp", *self.argv(*args)]

    def argv(self, *args: str) -> list[str]:
        """The options of `ama` in `command` (what the in-process server parses)."""
        return [
            "--mode",
            "acp",
            "--data-dir",
            str(self.data),
            "--config",
            str(self.config),
            "--log-level",
            "info",
            *args,
        ]

    def log_text(self) -> str:
        p = self.data / "logs" / "ama.log"
        return p.read_text(encoding="utf-8") if p.exists() else ""


def check_transcript(conn: AgentProcess) -> None:
    """Every line ama wrote is a schema-valid message of its method; nothing else reached stdout."""
    recorder = WireRecorder(load_validator())
    for entry in conn.transcript:
        if entry.direction == "out":
            recorder.sent(json.loads(entry.raw))
        else:
            recorder.received(entry.raw)
    recorder.assert_clean()
    bad = [v for v in conn.violations if v.kind not in ("unanswered",)]
    assert not bad, f"client saw protocol violations: {bad}"


@asynccontextmanager
async def run_ama(
    ama: Ama,
    *args: str,
    options: ClientOptions | None = None,
    env: dict[str, str] | None = None,
    validate: bool = True,
    process: bool = False,
) -> AsyncIterator[AgentProcess]:
    """ama serving ACP to ama's client, in this process unless `process` (a real `ama --mode acp` subprocess).
    Either way its stderr goes to `ama.stderr`, its log to `ama.log` under `ama.data`, and `env` (over the
    test's environment without provider keys, XDG dirs under `ama.tmp`) is the environment it runs with."""
    full_env = clean_env(ama.tmp, env)
    in_process = not process and os.environ.get("AMA_TEST_PROCESSES") != "1"
    conn = AgentProcess(
        ama.command(*args),
        options or ClientOptions(),
        cwd=str(ama.workspace),
        env=full_env,
        stderr=str(ama.stderr),
        launch=partial(start_in_process, ama.argv(*args), full_env, ama.stderr) if in_process else None,
    )
    async with conn:
        yield conn
    if validate:
        check_transcript(conn)


def kinds(conn: AgentProcess, session_id: str) -> list[str]:
    return [u["sessionUpdate"] for u in conn.updates_for(session_id)]


def permission_asks(conn: AgentProcess) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """`conn.permission_log` as a test reads it: each request's params and the answer given, both objects."""
    return [(as_object(params), as_object(outcome)) for params, outcome in conn.permission_log]


def usage_updates(conn: AgentProcess, session_id: str) -> list[dict[str, Any]]:
    return conn.updates_for(session_id, "usage_update")


def local_config(
    url: str,
    kind: str = "openai",
    *,
    retries: int = 0,
    timeout: float | None = None,
    window: int = 100_000,
    key_env: str = "LOCAL_TEST_KEY",
    top: str = "",
    tail: str = "",
) -> str:
    """A config with one model, `local/m`, served by the tests' model server at `url` in dialect `kind`.
    `top` goes before the tables (e.g. `mode = ...`), `tail` after them (e.g. a `[compaction]` table)."""
    timeout_line = f"timeout = {timeout}\n" if timeout is not None else ""
    return (
        f'model = "local/m"\n{top}\n'
        f'[providers.local]\nkind = "{kind}"\nbase_url = "{url}"\napi_key_env = "{key_env}"\n'
        f"max_retries = {retries}\n{timeout_line}"
        f'[[models]]\nid = "local/m"\ncontext_window = {window}\n{tail}'
    )


def agent_text(conn: AgentProcess, session_id: str) -> str:
    """Everything the agent said in a session, as one string."""
    return "".join(u["content"]["text"] for u in conn.updates_for(session_id, "agent_message_chunk"))


@contextmanager
def client_agents_in_process(ama: Ama) -> Iterator[None]:
    """While open, ama's terminal client called in this process (`ama_acp.client.terminal.cli.run_acp_client`) runs an agent
    command of `ama.command(...)` in this process too (`start_in_process`, as `run_ama` does) instead of starting
    `ama --mode acp`: for the tests of the client whose subject is not ama's process. The agent's stderr goes to
    `ama.stderr` instead of the client's stderr pipe; its environment is this process's when it starts. Other
    commands (the fixture agent) still start a process, and so does every agent with AMA_TEST_PROCESSES=1."""
    from ama_acp.client.terminal import cli

    if os.environ.get("AMA_TEST_PROCESSES") == "1":
        yield
        return
    prefix = ama.command()[:3]  # the interpreter, -m, ama_acp

    def agent_process(command: Sequence[str], *args: Any, **kwargs: Any) -> AgentProcess:
        if list(command[:3]) == prefix and kwargs.get("launch") is None:

            async def launch() -> InProcessAgent:
                return await start_in_process(list(command[3:]), dict(os.environ), ama.stderr)

            kwargs["launch"] = launch
        return AgentProcess(command, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "AgentProcess", agent_process)
        yield


def acp_client_in_process(
    args: Sequence[str], env: Mapping[str, str], *, stdin: str = "", agents_of: Ama | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`ama acp-client ARGS` with `stdin` piped in, run in this process (`run_acp_client`, the command's own entry,
    given a pipe's stand-ins: not a terminal) in the environment `env`, as `subprocess.run(..., capture_output=True,
    env=env)` would give it: the exit code, stdout and stderr (bytes, UTF-8). With `agents_of`, an agent command of
    `agents_of.command(...)` runs in-process too (`client_agents_in_process`)."""
    from ama_acp.client.terminal.cli import run_acp_client

    out, err = io.StringIO(), io.StringIO()
    with environment(env), client_agents_in_process(agents_of) if agents_of is not None else nullcontext():
        code = run_acp_client(list(args), out, err, io.StringIO(stdin))
    return subprocess.CompletedProcess(
        ["ama", "acp-client", *args], code, out.getvalue().encode(), err.getvalue().encode()
    )
