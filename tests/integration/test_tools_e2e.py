"""Tools, permissions and the editor's files and terminals, through the real subprocess (issue 4).

Each test runs twice: with a client that implements fs/* and terminal/* for real, and with one that
advertises neither (ama then uses the disk and subprocesses itself).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.rpc.dispatch import JSONObject
from tests.support.harness import Ama, permission_asks, run_ama, write_script
from tests.support.json_values import as_object, session_id

pytestmark = pytest.mark.anyio

EDITOR = pytest.param(True, id="editor-fs-terminal")
LOCAL = pytest.param(False, id="local")


def edit_script(tmp: Path, path: str = "app.py") -> dict[str, Any]:
    return {
        "reply": [
            {
                "tool_calls": [
                    {
                        "id": "e1",
                        "name": "edit_file",
                        "arguments": {"path": path, "edits": [{"old_text": "x = 1", "new_text": "x = 2"}]},
                    }
                ]
            },
            {"text": "done"},
        ]
    }


async def run_turn(
    ama: Ama,
    replies: list[dict[str, Any]],
    *,
    editor: bool,
    mode: str | None = None,
    permission: str = "allow_once",
    prompt: str = "go",
) -> tuple[AgentProcess, str, JSONObject]:
    script = write_script(ama.tmp / "script.json", replies)
    options = ClientOptions(fs=editor, terminal=editor, permission=permission)
    async with run_ama(ama, "--model", "scripted/t", env={"AMA_SCRIPT": str(script)}, options=options) as conn:
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        if mode:
            await conn.request("session/set_mode", {"sessionId": sid, "modeId": mode})
        result = await conn.prompt(sid, prompt, timeout=30)
        return conn, sid, result


def finals(conn: AgentProcess, sid: str) -> dict[str, dict[str, Any]]:
    out = {}
    for u in conn.updates_for(sid, "tool_call_update"):
        if u.get("status") in ("completed", "failed"):
            out[u["toolCallId"]] = u
    return out


@pytest.mark.parametrize("editor", [EDITOR, LOCAL])
@pytest.mark.parametrize(
    ("mode", "asked", "changed"),
    [
        ("manual", True, True),
        ("accept_edits", False, True),
        ("full_access", False, True),
        ("read_only", False, False),
    ],
)
async def test_edit_in_each_mode(tmp_path, editor, mode, asked, changed):
    ama = Ama(tmp_path)
    (ama.workspace / "app.py").write_text("x = 1\ny = 3\n")
    conn, sid, result = await run_turn(ama, edit_script(tmp_path)["reply"], editor=editor, mode=mode)
    assert result["stopReason"] == "end_turn"
    assert bool(conn.permission_log) == asked
    assert (ama.workspace / "app.py").read_text() == ("x = 2\ny = 3\n" if changed else "x = 1\ny = 3\n")
    final = finals(conn, sid)["e1"]
    if changed:
        diff = final["content"][0]
        assert final["status"] == "completed"
        assert diff == {
            "type": "diff",
            "path": str(ama.workspace / "app.py"),
            "oldText": "x = 1\ny = 3\n",
            "newText": "x = 2\ny = 3\n",
        }
        assert final["locations"] == [{"path": str(ama.workspace / "app.py"), "line": 1}]
    else:
        assert final["status"] == "failed" and "Read only" in final["content"][0]["content"]["text"]
    fs_writes = [m for m, _ in conn.requests_received if m == "fs/write_text_file"]
    assert bool(fs_writes) == (editor and changed)  # through the editor only when it advertised fs


@pytest.mark.parametrize("editor", [EDITOR, LOCAL])
async def test_rejected_permission_fails_the_call_and_the_turn_goes_on(tmp_path, editor):
    ama = Ama(tmp_path)
    (ama.workspace / "app.py").write_text("x = 1\n")
    conn, sid, result = await run_turn(ama, edit_script(tmp_path)["reply"], editor=editor, permission="reject_once")
    assert result["stopReason"] == "end_turn"
    assert (ama.workspace / "app.py").read_text() == "x = 1\n"
    assert finals(conn, sid)["e1"]["status"] == "failed"
    text = "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk"))
    assert text == "done"


async def test_new_file_diff_has_null_old_text(tmp_path):
    ama = Ama(tmp_path)
    replies: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "new/mod.py", "content": "a = 1\n"}}]},
        {"text": "ok"},
    ]
    conn, sid, _ = await run_turn(ama, replies, editor=False, mode="accept_edits")
    diff = finals(conn, sid)["w"]["content"][0]
    assert diff["type"] == "diff" and diff["oldText"] is None and diff["newText"] == "a = 1\n"
    assert (ama.workspace / "new" / "mod.py").read_text() == "a = 1\n"


@pytest.mark.parametrize("editor", [EDITOR, LOCAL])
async def test_command_runs_in_the_editor_terminal_or_locally(tmp_path, editor):
    ama = Ama(tmp_path)
    replies: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "c", "name": "run_command", "arguments": {"command": "echo hi-$((40+2)); exit 3"}}]},
        {"text": "ran"},
    ]
    conn, sid, _ = await run_turn(ama, replies, editor=editor, mode="full_access")
    final = finals(conn, sid)["c"]
    text = final["content"][-1]["content"]["text"]
    assert "hi-42" in text and "3" in text
    methods = [m for m, _ in conn.requests_received]
    if editor:
        assert methods[:1] == ["terminal/create"] and "terminal/release" in methods
        embedded = [
            u
            for u in conn.updates_for(sid, "tool_call_update")
            if any(c.get("type") == "terminal" for c in u.get("content") or [])
        ]
        assert embedded, "the terminal is embedded in the tool call"
    else:
        assert not any(m.startswith("terminal/") or m.startswith("fs/") for m in methods)


@pytest.mark.parametrize("editor", [EDITOR, LOCAL])
async def test_cancel_during_a_long_command_kills_it(tmp_path, editor):
    ama = Ama(tmp_path)
    pidfile = ama.workspace / "pid"  # inside: the sandbox blocks writes elsewhere
    script = write_script(
        tmp_path / "s.json",
        [
            {
                "tool_calls": [
                    {
                        "id": "c",
                        "name": "run_command",
                        "arguments": {"command": f"sleep 60 & echo $! > {pidfile}; wait"},
                    }
                ]
            },
            {"text": "never"},
        ],
    )
    options = ClientOptions(fs=editor, terminal=editor)
    async with run_ama(ama, "--model", "scripted/t", env={"AMA_SCRIPT": str(script)}, options=options) as conn:
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        await conn.request("session/set_mode", {"sessionId": sid, "modeId": "full_access"})
        pending = await conn.start_request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
        )
        with anyio.fail_after(10):  # the pid file appears without any message to wake wait_for
            while not (pidfile.exists() and pidfile.read_text().strip()):  # noqa: ASYNC110 - a file, no event to wait on
                await anyio.sleep(0.02)
        pid = int(pidfile.read_text())
        start = time.monotonic()
        await conn.cancel(sid)
        result = as_object(await pending.wait(timeout=3))
        assert result["stopReason"] == "cancelled"
        assert time.monotonic() - start < 1.0
        with anyio.move_on_after(2):  # the group gets SIGTERM, then SIGKILL after a short grace
            while _alive(pid):  # noqa: ASYNC110 - a pid, no event to wait on
                await anyio.sleep(0.05)
        assert not _alive(pid), "the command's child survived the cancel"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("how", ["dotdot", "symlink"])
@pytest.mark.parametrize("mode", ["accept_edits", "full_access"])
async def test_paths_escaping_the_workspace_ask_except_in_full_access(tmp_path, how, mode):
    ama = Ama(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("x = 1\n")
    if how == "symlink":
        (ama.workspace / "link").symlink_to(outside)
        path = "link/secret.txt"
    else:
        path = "../outside/secret.txt"
    replies: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {
                    "id": "e1",
                    "name": "edit_file",
                    "arguments": {"path": path, "edits": [{"old_text": "x = 1", "new_text": "x = 2"}]},
                }
            ]
        },
        {"text": "done"},
    ]
    conn, sid, _ = await run_turn(ama, replies, editor=False, mode=mode, permission="reject_once")
    if mode == "full_access":
        assert not conn.permission_log
        assert (outside / "secret.txt").read_text() == "x = 2\n"
    else:
        assert len(conn.permission_log) == 1  # accept_edits would not ask inside the workspace
        assert "outside the project" in permission_asks(conn)[0][0]["toolCall"]["title"]
        assert (outside / "secret.txt").read_text() == "x = 1\n"


async def test_reads_outside_ask_in_manual_and_read_only_refuses_commands(tmp_path):
    ama = Ama(tmp_path)
    (tmp_path / "elsewhere.txt").write_text("far away\n")
    replies: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"id": "r", "name": "read_file", "arguments": {"path": "../elsewhere.txt"}},
                {"id": "c", "name": "run_command", "arguments": {"command": "touch made"}},
            ]
        },
        {"text": "ok"},
    ]
    conn, sid, _ = await run_turn(ama, replies, editor=False, mode="read_only", permission="allow_once")
    f = finals(conn, sid)
    assert f["r"]["status"] == "completed" and "far away" in f["r"]["content"][-1]["content"]["text"]
    assert len(conn.permission_log) == 1  # the read outside asked; the command was refused outright
    assert f["c"]["status"] == "failed" and not (ama.workspace / "made").exists()


async def test_allow_always_is_remembered_for_the_session(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "a.py").write_text("x = 1\n")
    (ama.workspace / "b.py").write_text("x = 1\n")
    edit = {"edits": [{"old_text": "x = 1", "new_text": "x = 2"}]}
    replies: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "1", "name": "edit_file", "arguments": {"path": "a.py", **edit}}]},
        {"tool_calls": [{"id": "1", "name": "edit_file", "arguments": {"path": "b.py", **edit}}]},
        {"text": "ok"},
    ]
    conn, sid, _ = await run_turn(ama, replies, editor=False, permission="allow_always")
    assert len(conn.permission_log) == 1
    assert (ama.workspace / "b.py").read_text() == "x = 2\n"
    # The provider reused id "1": the wire ids stay unique.
    assert [u["toolCallId"] for u in conn.updates_for(sid, "tool_call")] == ["1", "1#2"]


async def test_bad_arguments_and_unknown_tools_fail_the_call_not_the_turn(tmp_path):
    ama = Ama(tmp_path)
    replies: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"id": "a", "name": "read_file", "arguments": "{not json"},
                {"id": "b", "name": "teleport", "arguments": {}},
                {"id": "c", "name": "read_file", "arguments": {}},
            ]
        },
        {"text": "recovered"},
    ]
    conn, sid, result = await run_turn(ama, replies, editor=False)
    assert result["stopReason"] == "end_turn"
    f = finals(conn, sid)
    text = {k: v["content"][-1]["content"]["text"] for k, v in f.items()}
    assert f["a"]["status"] == "failed" and "not a valid JSON object" in text["a"]
    assert f["b"]["status"] == "failed" and "no tool named 'teleport'" in text["b"]
    assert f["c"]["status"] == "failed" and "path" in text["c"]  # the missing required field is named
