"""Issue 25, sessions: what real editors tripped over, through real pipes.

- cwd spelling: Emacs's `default-directory` ends in `/`, other editors' never does; a session made under one
  spelling is stored, listed, filtered, loaded and resumed under the normal form (no trailing separator), and a
  file stored before (its header holding `/x/proj/`) opens under either spelling. Driven by ama's own client and
  by the official ACP Python SDK.
- Unprompted sessions: session/new writes a file at once, but session/list (and `ama sessions list`) shows only
  sessions someone spoke in; such a session still loads by its id.
- The title on open: a titled session sends `session_info_update` with its title when it is loaded (within the
  replay, before the response) or resumed (after the response).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess
from ama_acp.client.handlers import RpcError
from tests.integration.test_official_sdk import sdk_ama, step
from tests.support import json_values
from tests.support.harness import Ama, clean_env, run_ama
from tests.support.json_values import as_object

pytestmark = pytest.mark.anyio


def _slash(path: Path | str) -> str:
    return str(path).rstrip("/") + "/"


def _header(ama: Ama, sid: str) -> dict[str, Any]:
    first = (ama.data / "sessions" / f"{sid}.jsonl").read_text(encoding="utf-8").splitlines()[0]
    header: dict[str, Any] = json.loads(first)
    return header


def _old_file(ama: Ama, sid: str, cwd: str, *lines: dict[str, Any]) -> None:
    """A session file as an ama before the normal form wrote it: its header holds `cwd` as given."""
    folder = ama.data / "sessions"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    header = {
        "t": "header",
        "session_id": sid,
        "cwd": cwd,
        "additional_directories": [],
        "format": 1,
        "created_at": "2026-11-29T17:44:25.044Z",
        "ama_version": "0.1.0",
    }
    rows = [header, *lines]
    lines_out = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)  # compact, as ama writes
    (folder / f"{sid}.jsonl").write_text(lines_out, encoding="utf-8")


AT = "2026-11-29T17:44:26.000Z"
SPOKEN = (
    {"t": "msg", "message": {"type": "user", "content": [{"type": "text", "text": "fix the test"}]}, "at": AT},
    {"t": "title", "title": "Fix the test", "at": AT},
    {"t": "turn", "stop_reason": "end_turn", "at": AT},
)


async def _open(conn: AgentProcess, method: str, sid: str, cwd: str) -> dict[str, Any]:
    return as_object(
        await conn.request(f"session/{method}", {"sessionId": sid, "cwd": cwd, "mcpServers": []}, timeout=30)
    )


# --------------------------------------------------------------------------------------------------
# 1. cwd spelling
# --------------------------------------------------------------------------------------------------


async def test_a_session_made_with_a_trailing_slash_opens_under_either_spelling(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    plain, slashed = str(ama.workspace), _slash(ama.workspace)
    async with run_ama(ama) as conn:
        await conn.initialize()
        sid = json_values.session_id(await conn.new_session(slashed))  # Emacs
        await conn.prompt(sid, "/context", timeout=30)
        await conn.request("session/close", {"sessionId": sid})
        assert _header(ama, sid)["cwd"] == plain  # stored in normal form
        for want in (plain, slashed, plain + "/./"):
            listed = as_object(await conn.request("session/list", {"cwd": want}))
            assert [(s["sessionId"], s["cwd"]) for s in listed["sessions"]] == [(sid, plain)], want
        for method in ("load", "resume"):
            for cwd in (plain, slashed):  # the other editor, and Emacs again
                await _open(conn, method, sid, cwd)
                await conn.request("session/close", {"sessionId": sid})
        with pytest.raises(RpcError) as other:  # another folder is still refused, naming the normal form
            await _open(conn, "load", sid, str(tmp_path))
        assert other.value.code == -32602 and repr(plain) in other.value.message


async def test_a_session_stored_before_with_a_trailing_slash_still_works(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    plain, slashed = str(ama.workspace), _slash(ama.workspace)
    sid = "ses_0000000000000000000000b1"
    _old_file(ama, sid, slashed, *SPOKEN)
    async with run_ama(ama) as conn:
        await conn.initialize()
        for want in (plain, slashed, None):
            listed = as_object(await conn.request("session/list", {} if want is None else {"cwd": want}))
            assert [(s["sessionId"], s["cwd"]) for s in listed["sessions"]] == [(sid, plain)], want
        for method in ("load", "resume"):
            for cwd in (plain, slashed):
                await _open(conn, method, sid, cwd)
                await conn.request("session/close", {"sessionId": sid})


async def test_cwd_spelling_under_the_official_sdk(tmp_path: Path) -> None:
    from acp import PROTOCOL_VERSION, text_block
    from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

    ama = Ama(tmp_path)
    plain, slashed = str(ama.workspace.resolve()), _slash(ama.workspace.resolve())
    old = "ses_0000000000000000000000b2"
    _old_file(ama, old, slashed, *SPOKEN)
    async with sdk_ama(ama, "cwd") as (conn, client, _wire, _process):
        await step(
            conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True)),
                client_info=Implementation(name="acp-python-sdk-test", version="0"),
            ),
            "initialize",
        )
        new = await step(conn.new_session(cwd=slashed, mcp_servers=[]), "session/new")
        sid = new.session_id
        await client.wait_for(lambda: client.of(sid, "usage_update"), "the opening updates")
        await step(conn.prompt(session_id=sid, prompt=[text_block("/context")]), "session/prompt", timeout=30)
        await step(conn.close_session(session_id=sid), "session/close")
        assert _header(ama, sid)["cwd"] == plain
        listed = await step(conn.list_sessions(cwd=plain), "session/list")
        assert sorted((s.session_id, s.cwd) for s in listed.sessions) == sorted([(sid, plain), (old, plain)])
        for session_id in (sid, old):
            await step(conn.load_session(session_id=session_id, cwd=plain, mcp_servers=[]), "session/load", 30)
            await step(conn.close_session(session_id=session_id), "session/close")
            await step(conn.resume_session(session_id=session_id, cwd=slashed, mcp_servers=[]), "resume", 30)
            await step(conn.close_session(session_id=session_id), "session/close")


# --------------------------------------------------------------------------------------------------
# 5. unprompted sessions
# --------------------------------------------------------------------------------------------------


def _sessions_cli(ama: Ama, *args: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "ama_acp", "sessions", "list", "--json", "--data-dir", str(ama.data), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ama.workspace,
        env=clean_env(ama.tmp, {"AMA_CONFIG": str(ama.config)}),
        check=True,
    )
    rows: list[dict[str, Any]] = json.loads(out.stdout)
    return rows


async def test_only_sessions_someone_spoke_in_are_listed(tmp_path: Path) -> None:
    """55 opens and one prompt: the list holds the one (issue 25: the first page was 50 "(untitled)" rows)."""
    ama = Ama(tmp_path)
    async with run_ama(ama) as conn:
        await conn.initialize()
        spoken = json_values.session_id(await conn.new_session(ama.workspace))
        await conn.prompt(spoken, "hello", timeout=30)
        silent = [json_values.session_id(await conn.new_session(ama.workspace)) for _ in range(55)]
        for path in [ama.data / "sessions" / f"{sid}.jsonl" for sid in silent]:  # each one's written at once, as before
            await conn.wait_for(path.is_file, timeout=30)
        listed = as_object(await conn.request("session/list", {}))
        assert [s["sessionId"] for s in listed["sessions"]] == [spoken] and "nextCursor" not in listed
        assert listed["sessions"][0]["title"]
        # An unprompted session still loads and resumes by its id, and is listed once someone speaks in it.
        await _open(conn, "load", silent[0], str(ama.workspace))
        listed = as_object(await conn.request("session/list", {"cwd": str(ama.workspace)}))
        assert [s["sessionId"] for s in listed["sessions"]] == [spoken]
        await conn.prompt(silent[0], "/context", timeout=30)
        await _open(conn, "resume", silent[1], str(ama.workspace))
        await conn.prompt(silent[1], "now something", timeout=30)
        listed = as_object(await conn.request("session/list", {"cwd": str(ama.workspace)}))
        assert {s["sessionId"] for s in listed["sessions"]} == {spoken, silent[0], silent[1]}
    # The same in a fresh process (the listing's cache), and in `ama sessions list`; `--all` shows every file.
    async with run_ama(ama) as conn:
        await conn.initialize()
        listed = as_object(await conn.request("session/list", {}))
        assert {s["sessionId"] for s in listed["sessions"]} == {spoken, silent[0], silent[1]}
    assert {r["sessionId"] for r in _sessions_cli(ama)} == {spoken, silent[0], silent[1]}
    assert len(_sessions_cli(ama, "--all")) == 56


# --------------------------------------------------------------------------------------------------
# 8. the title on open
# --------------------------------------------------------------------------------------------------


def _received(conn: AgentProcess) -> list[dict[str, Any]]:
    return [json.loads(e.raw) for e in conn.transcript if e.direction == "in"]


def _titles(messages: list[dict[str, Any]], sid: str) -> list[tuple[int, str]]:
    return [
        (i, m["params"]["update"]["title"])
        for i, m in enumerate(messages)
        if m.get("method") == "session/update"
        and m["params"]["sessionId"] == sid
        and m["params"]["update"]["sessionUpdate"] == "session_info_update"
        and "title" in m["params"]["update"]
    ]


def _answer_at(messages: list[dict[str, Any]], method_id: object) -> int:
    return next(i for i, m in enumerate(messages) if m.get("id") == method_id and "method" not in m)


async def test_a_titled_session_tells_its_title_on_load_and_resume(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    async with run_ama(ama) as conn:
        await conn.initialize()
        sid = json_values.session_id(await conn.new_session(ama.workspace))
        await conn.prompt(sid, "name this thread", timeout=30)
        untitled = json_values.session_id(await conn.new_session(ama.workspace))
    title = json.loads(
        [line for line in (ama.data / "sessions" / f"{sid}.jsonl").read_text().splitlines() if '"t":"title"' in line][
            -1
        ]
    )["title"]
    for method in ("load", "resume"):
        async with run_ama(ama) as conn:
            await conn.initialize()
            await _open(conn, method, sid, str(ama.workspace))
            await conn.wait_for(lambda: bool(conn.updates_for(sid, "usage_update")), timeout=30)
            await _open(conn, method, untitled, str(ama.workspace))
            await conn.wait_for(lambda: bool(conn.updates_for(untitled, "usage_update")), timeout=30)
            await conn.prompt(sid, "/context", timeout=30)  # the next turn's end does not repeat it
            messages = _received(conn)
            titles = _titles(messages, sid)
            assert [t for _, t in titles] == [title], (method, titles)
            assert _titles(messages, untitled) == []
            opened = _answer_at(messages, next(m["id"] for m in _sent(conn) if m.get("method") == f"session/{method}"))
            if method == "load":  # with the replay, before the response
                assert titles[0][0] < opened
            else:  # no replay: after the response, with the other opening updates
                assert titles[0][0] > opened


def _sent(conn: AgentProcess) -> list[dict[str, Any]]:
    return [json.loads(e.raw) for e in conn.transcript if e.direction == "out"]
