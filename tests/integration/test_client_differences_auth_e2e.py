"""First run as each client sees it (issue 25): with no usable model, `auth_required` carries the sentence that
says what to do in `data.details` (toad shows only that) beside `authMethods`; the terminal sign-in method is
offered to a client that sets `clientCapabilities.auth.terminal` and to one that sets the older
`clientCapabilities._meta["terminal-auth"]` (Zed before it, the ACP registry's validator), the latter with the
command to run in the method's `_meta["terminal-auth"]`; a client that sets neither gets only the agent method."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.options import ClientOptions
from tests.integration.test_official_sdk import sdk_client
from tests.support.harness import Ama, clean_env, run_ama
from tests.support.json_values import as_object

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.anyio

# The capability shapes clients send, and the sign-in methods each gets.
SHAPES: dict[str, tuple[dict[str, Any], set[str]]] = {
    "auth.terminal": ({"auth": {"terminal": True}}, {"ama-credentials", "ama-setup"}),
    "_meta terminal-auth": ({"_meta": {"terminal-auth": True}}, {"ama-credentials", "ama-setup"}),
    "neither": ({}, {"ama-credentials"}),
    "_meta terminal-auth not true": ({"_meta": {"terminal-auth": "yes"}}, {"ama-credentials"}),
}


class Editor:
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        pass

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no permission is asked before a session opens")


def _no_model_env(tmp: Path) -> dict[str, str]:
    env = clean_env(tmp)
    env["AMA_CREDENTIALS"] = str(tmp / "no-credentials.toml")
    return env


def _check_refusal(code: int, message: str, data: Any, methods: set[str]) -> None:
    assert code == -32000
    assert isinstance(data, dict)
    # `message` is one short sentence (R14); toad reads `data.details`: the whole of it, which says to run `ama setup`.
    assert "\n" not in message and len(message) <= 200 and message.count(". ") == 0, message
    assert data["details"].startswith(message) and "ama setup" in message, data
    assert {m["id"] for m in data["authMethods"]} == methods


@pytest.mark.skipif(shutil.which("ama-acp", path=str(BIN)) is None, reason="ama-acp is not installed in this venv")
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_official_sdk_client_gets_details_and_the_methods_its_capabilities_ask_for(
    tmp_path: Path, shape: str
) -> None:
    from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process
    from acp.schema import ClientCapabilities

    caps, expected = SHAPES[shape]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with spawn_agent_process(
        sdk_client(Editor()), str(BIN / "ama-acp"), "--data-dir", str(tmp_path / "data"), env=_no_model_env(tmp_path),
        cwd=workspace,
    ) as (conn, _process):  # fmt: skip
        init = await asyncio.wait_for(
            conn.initialize(
                protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities.model_validate(caps)
            ),
            30,
        )
        assert init.auth_methods is not None
        methods = {m.id: m.model_dump(by_alias=True, exclude_none=True) for m in init.auth_methods}
        assert set(methods) == expected
        if "ama-setup" in methods:
            setup = methods["ama-setup"]
            assert setup["type"] == "terminal" and setup["args"] == ["setup"]
            legacy = setup.get("_meta", {}).get("terminal-auth")
            if shape == "_meta terminal-auth":  # the older client runs the command this names
                assert Path(legacy["command"]).parent == BIN and legacy["args"][-1] == "setup" and legacy["label"]
            else:
                assert legacy is None
        with pytest.raises(RequestError) as refused:
            await asyncio.wait_for(conn.new_session(cwd=str(workspace), mcp_servers=[]), 30)
        _check_refusal(refused.value.code, str(refused.value), refused.value.data, expected)
        with pytest.raises(RequestError) as again:  # authenticate finds no model either: the same data
            await asyncio.wait_for(conn.authenticate(method_id="ama-credentials"), 30)
        _check_refusal(again.value.code, str(again.value), again.value.data, expected)


@pytest.mark.parametrize("shape", ["auth.terminal", "_meta terminal-auth", "neither"])
async def test_ama_client_through_pipes_sees_the_same(tmp_path: Path, shape: str) -> None:
    """ama's own client, each capability shape merged into what it advertises; every message schema-checked."""
    from ama_acp.client.handlers import RpcError

    caps, expected = SHAPES[shape]
    ama = Ama(tmp_path)
    ama.config.write_text("", encoding="utf-8")  # no model anywhere
    options = ClientOptions(extra_capabilities=caps)
    async with run_ama(ama, options=options, env={"AMA_CREDENTIALS": str(tmp_path / "none.toml")}) as conn:
        init = as_object(await conn.initialize())
        assert {m["id"] for m in init["authMethods"]} == expected
        with pytest.raises(RpcError) as refused:
            await conn.new_session(ama.workspace)
        _check_refusal(refused.value.code, refused.value.message, refused.value.data, expected)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
def test_the_legacy_descriptor_runs_ama_setup(tmp_path: Path, anyio_backend: str) -> None:
    """What a `_meta["terminal-auth"]` client runs is `ama setup` (here without a terminal or flags: it stops at
    once, asking for them, and writes nothing)."""
    from ama_acp.handlers import LEGACY_TERMINAL_METHOD

    assert LEGACY_TERMINAL_METHOD.meta is not None
    legacy = LEGACY_TERMINAL_METHOD.meta["terminal-auth"]
    config = tmp_path / "c.toml"
    env = _no_model_env(tmp_path) | {"AMA_CONFIG": str(config)}
    out = subprocess.run(
        [legacy["command"], *legacy["args"]], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        env=env,
    )  # fmt: skip
    assert out.returncode == 2 and "--provider" in out.stderr, out.stderr
    assert not config.exists()
