"""session/new answered before its Session is built (session/manager.py `open_session`, `finish_open`, `live`).

The answer comes from the request and the config alone; the Session, its file and its MCP servers come after
the response, or with the first request that names the id, whichever is first, and only once.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from ama_acp.config import Config
from ama_acp.rpc.dispatch import after_response
from ama_acp.rpc.errors import RESOURCE_NOT_FOUND, AcpError
from ama_acp.session import manager as manager_module
from ama_acp.session import options
from ama_acp.session.lifecycle import Lifecycle
from ama_acp.session.manager import SessionManager, new_session_id
from ama_acp.session.store import session_store as st
from ama_acp.wire import types as w
from tests.support.inprocess import ScriptedPeer

ID_SHAPE = re.compile(r"ses_[0-9a-f]{12}[0-9a-f]{12}")


def make(tmp_path: Path, mode: str = "manual") -> tuple[SessionManager, ScriptedPeer, Path]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    peer = ScriptedPeer()
    config = Config(data_dir=str(tmp_path / "data"), mode=mode)
    return SessionManager(config, peer, default_model="scripted/demo"), peer, ws


def files(tmp_path: Path) -> list[str]:
    folder = tmp_path / "data" / "sessions"
    return sorted(p.name for p in folder.glob("*.jsonl")) if folder.is_dir() else []


def kinds(peer: ScriptedPeer) -> list[str]:
    return [u["sessionUpdate"] for u in peer.updates]


# --- the id ----------------------------------------------------------------------------------------------------


def test_the_id_has_the_stores_format_and_the_store_accepts_it() -> None:
    ours, theirs = new_session_id(), st.new_session_id()
    assert ID_SHAPE.fullmatch(ours) and ID_SHAPE.fullmatch(theirs), (ours, theirs)
    assert st.is_valid_session_id(ours)
    assert ours[:16] <= st.new_session_id()[:16]  # the same clock: ids made later sort after


def test_ids_sort_by_creation_and_do_not_repeat() -> None:
    first = new_session_id()
    deadline = time.monotonic() + 5
    while (second := new_session_id())[:16] == first[:16]:  # the next millisecond
        assert time.monotonic() < deadline, "the clock did not move"
    assert first < second
    assert len({new_session_id() for _ in range(1000)}) == 1000


# --- the answer ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["manual", "read_only", "full_access"])
def test_the_answer_is_what_the_built_session_says(tmp_path: Path, mode: str) -> None:
    manager, _, ws = make(tmp_path, mode)
    opened = manager.open_session(str(ws), None, [])
    session = manager.get(opened.session_id)
    assert session.id == opened.session_id and session.mode == mode
    assert msgspec.to_builtins(opened.modes) == msgspec.to_builtins(options.mode_state(session.mode))
    assert msgspec.to_builtins(opened.config_options) == msgspec.to_builtins(session.config_options())


def test_the_answer_keeps_the_model_of_its_request(tmp_path: Path) -> None:
    """authenticate may change the default model between the answer and the build: the session is the one
    the answer described."""
    manager, _, ws = make(tmp_path)
    opened = manager.open_session(str(ws), None, [])
    manager.default_model = "scripted/other"
    assert manager.get(opened.session_id).model_id == "scripted/demo"
    assert opened.config_options is not None
    current = {o.id: o.current_value for o in opened.config_options}
    assert current["model"] == "scripted/demo"


@pytest.mark.parametrize(
    ("cwd", "additional", "field"),
    [
        ("relative/dir", None, "cwd"),
        ("/no/such/dir/anywhere", None, "cwd"),
        (None, ["relative"], "additionalDirectories[0]"),
        (None, ["/no/such/dir/anywhere"], "additionalDirectories[0]"),
    ],
)
def test_bad_directories_are_this_requests_error_and_open_nothing(
    tmp_path: Path, cwd: str | None, additional: list[str] | None, field: str
) -> None:
    manager, _, ws = make(tmp_path)
    with pytest.raises(AcpError) as caught:
        manager.open_session(cwd or str(ws), additional, [])
    assert caught.value.code == -32602 and caught.value.message.startswith(f"Invalid params: {field}")
    assert not manager.has_sessions() and files(tmp_path) == []


def test_only_the_file_is_made_before_the_response(tmp_path: Path) -> None:
    """Nothing built, nothing sent; the file with its header is there, so a process killed before the build
    leaves a session that loads (issue 39 point 6; session/store/early.py)."""
    manager, peer, ws = make(tmp_path)
    opened = manager.open_session(str(ws), None, [])
    assert manager.sessions == {} and manager.has_sessions()
    assert files(tmp_path) == [f"{opened.session_id}.jsonl"] and peer.updates == []
    assert ID_SHAPE.fullmatch(opened.session_id)
    header = st.SessionStore(tmp_path / "data").read(opened.session_id).header
    assert header.cwd == str(ws)
    anyio.run(manager.finish_open, opened.session_id)
    anyio.run(manager.close, opened.session_id)


# --- after the response ----------------------------------------------------------------------------------------


def test_finish_open_builds_the_session_and_announces_it(tmp_path: Path) -> None:
    manager, peer, ws = make(tmp_path)
    opened = manager.open_session(str(ws), None, [])
    anyio.run(manager.finish_open, opened.session_id)
    assert list(manager.sessions) == [opened.session_id]
    assert files(tmp_path) == [f"{opened.session_id}.jsonl"]
    assert kinds(peer) == ["available_commands_update", "config_option_update", "usage_update"]  # E4
    header = st.SessionStore(tmp_path / "data").read(opened.session_id).header
    assert header.cwd == str(ws)


def test_a_request_before_finish_open_builds_it_and_finish_open_does_not_build_again(tmp_path: Path) -> None:
    manager, peer, ws = make(tmp_path)
    opened = manager.open_session(str(ws), None, [])
    session = manager.get(opened.session_id)  # a prompt or set_mode that came first
    anyio.run(manager.finish_open, opened.session_id)
    assert manager.sessions == {opened.session_id: session}
    assert files(tmp_path) == [f"{opened.session_id}.jsonl"]
    assert kinds(peer) == ["available_commands_update", "config_option_update", "usage_update"]


def test_a_close_before_finish_open_leaves_a_closed_session_and_nothing_announced(tmp_path: Path) -> None:
    manager, peer, ws = make(tmp_path)
    opened = manager.open_session(str(ws), None, [])

    async def main() -> None:
        await Lifecycle(manager).close(w.SessionIdRequest(session_id=opened.session_id))
        await manager.finish_open(opened.session_id)

    anyio.run(main)
    assert manager.sessions == {} and not manager.has_sessions()
    assert files(tmp_path) == [f"{opened.session_id}.jsonl"]  # as after any session/new, then close
    assert peer.updates == []
    with pytest.raises(AcpError):
        manager.get(opened.session_id)


def test_a_load_of_an_id_still_opening_finds_its_file(tmp_path: Path) -> None:
    manager, _, ws = make(tmp_path)
    opened = manager.open_session(str(ws), None, [])

    async def main() -> None:
        after: list[Callable[[], Awaitable[None]]] = []
        token = after_response.set(after)  # as the RPC peer runs a request
        try:
            await Lifecycle(manager).resume(w.ResumeSessionRequest(session_id=opened.session_id, cwd=str(ws)))
        finally:
            after_response.reset(token)

    anyio.run(main)
    assert list(manager.sessions) == [opened.session_id]
    assert files(tmp_path) == [f"{opened.session_id}.jsonl"]


def test_shutdown_builds_what_is_still_opening(tmp_path: Path) -> None:
    """Every id session/new gave has its file, even when the connection ends before the build."""
    manager, _, ws = make(tmp_path)
    ids = [manager.open_session(str(ws), None, []).session_id for _ in range(2)]
    anyio.run(manager.shutdown)
    assert files(tmp_path) == sorted(f"{i}.jsonl" for i in ids)
    assert all(s.closed for s in manager.sessions.values())


def test_a_build_that_fails_is_reported_once_and_the_id_is_then_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager, _, ws = make(tmp_path)
    opened = manager.open_session(str(ws), None, [])

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(manager, "_build", broken)
    with pytest.raises(RuntimeError):
        anyio.run(manager.finish_open, opened.session_id)
    with pytest.raises(AcpError) as caught:
        manager.get(opened.session_id)
    assert caught.value.code == RESOURCE_NOT_FOUND  # never half-built twice
    assert not manager.has_sessions()


def test_new_session_still_builds_at_once(tmp_path: Path) -> None:
    """`ama -p` and the tests: one call, the Session built and its file written."""
    manager, peer, ws = make(tmp_path)
    session = manager.new_session(str(ws), None, [])
    assert manager.sessions == {session.id: session} and files(tmp_path) == [f"{session.id}.jsonl"]
    assert peer.updates == []


# --- what session/new's path costs -----------------------------------------------------------------------------


def test_model_choices_reads_the_credentials_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One stat of the credentials file for the whole list, not one per catalog model (each a GIL handover
    while the preload thread runs)."""
    import ama_acp.credentials as credentials

    manager, _, _ = make(tmp_path)
    calls = []
    real = credentials.key_source

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(credentials, "key_source", counting)
    choices = manager.model_choices("scripted/demo")
    assert len(calls) == 1
    assert "scripted/demo" in dict(choices)


def test_the_thought_level_of_the_answer_is_the_sessions_default() -> None:
    from ama_acp.session.options import SessionSetup

    default = SessionSetup._field_defaults["thought_level"]  # what a Session is built with unless told otherwise
    assert manager_module.OPENING_THOUGHT_LEVEL == default


# --- a file that cannot be made: a live, unsaved session, told once (issue 22, point 6) --------------------------


def unsaved(peer: ScriptedPeer) -> list[dict[str, Any]]:
    return [u for u in peer.updates if "can no longer be saved" in (u.get("title", "") + str(u.get("content", "")))]


def finish_and_use(manager: SessionManager, session_id: str) -> None:
    """After the response: the build, then what the editor does with the id (set_mode, a close)."""

    async def main() -> None:
        await manager.finish_open(session_id)
        await manager.get(session_id).set_mode("read_only")
        assert manager.get(session_id).ctx.stats()

    anyio.run(main)


def assert_unsaved_and_told_once(manager: SessionManager, peer: ScriptedPeer, session_id: str) -> None:
    session = manager.get(session_id)
    assert session.journal.writer is None and session.mode == "read_only"
    assert len(unsaved(peer)) == 1
    assert kinds(peer)[0] == "agent_message_chunk"  # the warning first, then what announce_open sends
    anyio.run(manager.close, session_id)
    assert manager.sessions == {}


def test_a_sessions_path_that_is_a_file_leaves_a_live_unsaved_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager, peer, ws = make(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sessions").write_text("not a folder\n", encoding="utf-8")
    opened = manager.open_session(str(ws), None, [])
    finish_and_use(manager, opened.session_id)
    assert "is not a directory" in unsaved(peer)[0]["content"]["text"]
    assert_unsaved_and_told_once(manager, peer, opened.session_id)
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and errors[0].exc_info is None  # logged once, no traceback


def test_a_name_already_taken_leaves_a_live_unsaved_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`SessionExists` (a directory where the file belongs) is a StoreError, not an OSError: it too."""
    manager, peer, ws = make(tmp_path)
    taken = new_session_id()
    monkeypatch.setattr(manager_module, "new_session_id", lambda: taken)
    (tmp_path / "data" / "sessions" / f"{taken}.jsonl").mkdir(parents=True)
    opened = manager.open_session(str(ws), None, [])
    finish_and_use(manager, opened.session_id)
    assert "already exists" in unsaved(peer)[0]["content"]["text"]
    assert_unsaved_and_told_once(manager, peer, opened.session_id)


def test_a_full_disk_at_the_header_leaves_a_live_unsaved_session_and_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    manager, peer, ws = make(tmp_path)
    real_write = os.write

    def full_disk(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("ama_acp.session.store.early.os.write", full_disk)  # the header, before the answer
    opened = manager.open_session(str(ws), None, [])
    monkeypatch.setattr("ama_acp.session.store.early.os.write", real_write)
    finish_and_use(manager, opened.session_id)
    assert "the disk is full" in unsaved(peer)[0]["content"]["text"]
    assert files(tmp_path) == []  # no header-less file to list or load
    assert_unsaved_and_told_once(manager, peer, opened.session_id)


def test_a_failure_after_the_header_closes_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The header is written but the next entry is not (EFBIG): the writer is closed, not leaked with its lock."""
    import errno

    manager, peer, ws = make(tmp_path)
    opened = manager.open_session(str(ws), None, [])
    closed: list[st.SessionWriter] = []
    real_append, real_close = st.SessionWriter.append, st.SessionWriter.close

    def too_big(self: st.SessionWriter, entry: Any) -> None:
        raise st.SessionWriteError(self.path, "the file reached the size limit for files", OSError(errno.EFBIG, "big"))

    def recording_close(self: st.SessionWriter) -> None:
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(st.SessionWriter, "append", too_big)
    monkeypatch.setattr(st.SessionWriter, "close", recording_close)
    anyio.run(manager.finish_open, opened.session_id)
    monkeypatch.setattr(st.SessionWriter, "append", real_append)
    assert len(closed) == 1 and closed[0].closed
    assert files(tmp_path) == [f"{opened.session_id}.jsonl"]  # the header is there: it loads
    assert len(unsaved(peer)) == 1


@pytest.mark.allow_traceback  # a missing SDK is a broken install: the log keeps its traceback
def test_mcp_servers_that_cannot_start_leave_a_live_session_and_are_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ama_acp.session import mcp

    def broken(*args: Any) -> None:
        raise ImportError("No module named 'mcp'")

    monkeypatch.setattr(mcp, "start", broken)
    manager, peer, ws = make(tmp_path)
    servers: list[dict[str, object]] = [{"name": "x", "command": "/bin/true", "args": [], "env": []}]
    opened = manager.open_session(str(ws), None, servers)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            manager.spawn = tg.start_soon  # the connection's task group, as server.py sets it
            await manager.finish_open(opened.session_id)
            await anyio.wait_all_tasks_blocked()  # the warning told; the handover socket waits for askers
            tg.cancel_scope.cancel()  # as the connection's end does

    anyio.run(main)
    session = manager.get(opened.session_id)
    assert session.tools.mcp is None and session.journal.writer is not None
    told = [u for u in peer.of("agent_message_chunk") if "MCP servers could not be started" in u["content"]["text"]]
    assert len(told) == 1 and "ImportError" in told[0]["content"]["text"]
    anyio.run(manager.close, opened.session_id)


def test_load_of_a_live_session_that_was_never_saved_is_not_found_and_leaves_it_live(tmp_path: Path) -> None:
    manager, peer, ws = make(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sessions").write_text("not a folder\n", encoding="utf-8")
    opened = manager.open_session(str(ws), None, [])
    anyio.run(manager.finish_open, opened.session_id)
    session = manager.get(opened.session_id)

    async def load() -> None:
        after: list[Callable[[], Awaitable[None]]] = []
        token = after_response.set(after)
        try:
            await Lifecycle(manager).load(
                w.LoadSessionRequest(session_id=opened.session_id, cwd=str(ws), mcp_servers=[])
            )
        finally:
            after_response.reset(token)

    with pytest.raises(AcpError) as caught:
        anyio.run(load)
    assert caught.value.code == RESOURCE_NOT_FOUND and "never saved" in caught.value.message
    assert manager.get(opened.session_id) is session and not session.closed
