"""Sessions that always load and can be prompted again: tool calls paired on load (and written back), bad
lines and damaged meter states cost only themselves, handoff paths stay inside the session's folder, and a
file that cannot be written raises SessionWriteError without leaving a half line behind."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.config import Config
from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.redact import Redactor
from ama_acp.rpc.dispatch import JSONValue, after_response
from ama_acp.rpc.peer import Params
from ama_acp.session.lifecycle import Lifecycle
from ama_acp.session.live import Session
from ama_acp.session.manager import SessionManager
from ama_acp.session.restore import replay_updates
from ama_acp.session.store import entries as en
from ama_acp.session.store.repair import INTERRUPTED, pair_tool_calls, read_contained
from ama_acp.session.store.session_store import SessionStore, SessionWriteError, read_session
from ama_acp.wire import types as w
from tests.support.conversation import paired_everywhere
from tests.support.hypothesis_profiles import examples


class Peer:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    async def notify(self, method: str, params: Params) -> None:
        self.updates.append(msgspec.to_builtins(params)["update"])

    async def request(self, method: str, params: Params, timeout: float | None = None) -> JSONValue:
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


def call(cid: str, name: str = "run_command", args: str = '{"command": "sleep 5"}') -> ToolCallPart:
    return ToolCallPart(cid, name, args)


def asks(*calls: ToolCallPart) -> AssistantMessage:
    return AssistantMessage(content=[TextPart("on it"), *calls], stop="tool_use", usage=Usage(input=100, output=5))


def result(cid: str, text: str = "done") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=cid, name="run_command", content=[TextPart(text)])


# --- pair_tool_calls --------------------------------------------------------------------------------------


def test_a_dangling_call_at_the_end_gets_an_interrupted_result():
    msgs: list[Message] = [UserMessage([TextPart("go")]), asks(call("a"), call("b")), result("a")]
    out = pair_tool_calls(msgs)
    assert [c.id for c, _ in out.tail] == ["b"]
    last = out.messages[-1]
    assert isinstance(last, ToolResultMessage) and last.tool_call_id == "b" and last.is_error
    assert last.text == INTERRUPTED
    assert out.inserted == 0 and out.dropped == 0
    assert paired_everywhere(out.messages)


def test_a_dangling_call_in_the_middle_and_an_orphan_result():
    msgs: list[Message] = [
        UserMessage([TextPart("go")]),
        asks(call("a")),
        UserMessage([TextPart("next")]),  # the result of a was never written (a hand edit, a lost line)
        result("zzz"),  # a result nobody asked for
        asks(call("c")),
        result("c"),
        result("c"),  # a second result for the same call
    ]
    out = pair_tool_calls(msgs)
    assert out.inserted == 1 and out.dropped == 2 and not out.tail
    assert isinstance(out.messages[2], ToolResultMessage) and out.messages[2].tool_call_id == "a"
    assert paired_everywhere(out.messages)


def test_the_same_provider_id_in_two_turns_is_paired_per_assistant_message():
    msgs: list[Message] = [asks(call("a")), result("a"), asks(call("a"))]
    out = pair_tool_calls(msgs)
    assert len(out.tail) == 1 and paired_everywhere(out.messages)


_ids = st.sampled_from(["a", "b", "c"])
_message = st.one_of(
    st.builds(lambda: UserMessage([TextPart("u")])),
    st.lists(_ids, max_size=3).map(lambda ids: asks(*(call(i) for i in ids))),
    _ids.map(result),
)


@settings(max_examples=int(os.environ.get("AMA_FUZZ_EXAMPLES") or examples(300)), deadline=None)
@given(st.lists(_message, max_size=25))
def test_pairing_any_sequence_pairs_everything_and_keeps_every_other_message(msgs):
    out = pair_tool_calls(msgs)
    assert paired_everywhere(out.messages)
    assert [m for m in out.messages if not isinstance(m, ToolResultMessage)] == [
        m for m in msgs if not isinstance(m, ToolResultMessage)
    ]
    # Idempotent: a repaired context needs no more repair.
    again = pair_tool_calls(out.messages)
    assert again.messages == out.messages and not again.tail and again.inserted == again.dropped == 0


# --- load: repair written back, replayed, metered ---------------------------------------------------------


def make_session_file(data: Path, cwd: Path, entries: list[en.Entry], sid: str = "ses_test") -> Path:
    store = SessionStore(data, redactor=Redactor(), fsync="never")
    with store.create(en.Header(session_id=sid, cwd=str(cwd))) as writer:
        for e in entries:
            writer.append(e)
    return store.path(sid)


async def load(data: Path, cwd: Path, sid: str = "ses_test") -> tuple[Session, list[dict[str, Any]], SessionManager]:
    peer = Peer()
    manager = SessionManager(Config(data_dir=str(data)), peer, default_model="scripted/demo")
    life = Lifecycle(manager)
    after: list[Callable[[], Awaitable[None]]] = []
    token = after_response.set(after)  # as the RPC peer does around a handler
    try:
        await life.load(w.LoadSessionRequest(session_id=sid, cwd=str(cwd), mcp_servers=[]))
    finally:
        after_response.reset(token)
    for run in after:
        await run()
    return manager.sessions[sid], peer.updates, manager


def killed_mid_command(tmp_path: Path) -> tuple[Path, Path]:
    cwd = tmp_path / "ws"
    cwd.mkdir()
    meter = {"source": "usage", "usage_tokens": 105, "trailing_tokens": 0, "message_count": 2}
    entries: list[en.Entry] = [
        en.ModelEntry(model_id="scripted/demo"),
        en.MessageEntry(message=UserMessage([TextPart("run it")])),
        en.MessageEntry(message=asks(call("call_1"))),
        en.UsageEntry(model_id="scripted/demo", usage=Usage(input=100, output=5), meter=meter),
        # SIGKILL here: run_command was running; no ToolCallEntry, no result.
    ]
    return make_session_file(tmp_path / "data", cwd, entries), cwd


def test_load_repairs_a_call_killed_mid_command_and_writes_the_repair_back(tmp_path):
    path, cwd = killed_mid_command(tmp_path)

    async def main():
        session, updates, manager = await load(tmp_path / "data", cwd)
        assert paired_everywhere(session.conversation.messages)
        last = session.conversation.messages[-1]
        assert isinstance(last, ToolResultMessage) and last.text == INTERRUPTED
        assert session.conversation.message_total == 3
        # Replay shows the interrupted call, ended as failed.
        ends = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
        assert ends and ends[-1]["status"] == "failed" and ends[-1]["toolCallId"] == "call_1"
        assert INTERRUPTED in json.dumps(ends[-1])
        # The meter counts the added result on top of the stored figure (estimated, never 0 or lost).
        figures = session.ctx.figures()
        assert figures.used > 105
        await manager.close(session.id)

    anyio.run(main)
    loaded = read_session(path)
    kinds = [type(e).__name__ for e in loaded.entries]
    assert kinds[-2:] == ["ToolCallEntry", "MessageEntry"]
    assert paired_everywhere(loaded.messages)

    async def again():  # a second load finds nothing to repair and writes nothing
        session, updates, manager = await load(tmp_path / "data", cwd)
        await manager.close(session.id)
        return [u for u in updates if u["sessionUpdate"] == "tool_call_update"]

    size = path.stat().st_size
    ends = anyio.run(again)
    assert path.stat().st_size == size
    assert len(ends) == 1 and ends[0]["status"] == "failed"


def test_killed_after_the_tool_finished_but_before_its_result_keeps_the_live_record(tmp_path):
    cwd = tmp_path / "ws"
    cwd.mkdir()
    record = en.ToolCallEntry(
        wire_id="call_1", provider_id="call_1", name="run_command", title="sleep", kind="execute", status="completed"
    )
    entries: list[en.Entry] = [
        en.MessageEntry(message=UserMessage([TextPart("run it")])),
        en.MessageEntry(message=asks(call("call_1"))),
        record,
    ]
    path = make_session_file(tmp_path / "data", cwd, entries)

    async def main():
        session, updates, manager = await load(tmp_path / "data", cwd)
        await manager.close(session.id)
        return updates

    updates = anyio.run(main)
    ends = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert [u["status"] for u in ends] == ["completed"]  # what the person saw; no second record
    loaded = read_session(path)
    assert isinstance(loaded.entries[-1], en.MessageEntry) and paired_everywhere(loaded.messages)


def test_a_damaged_usage_line_falls_back_to_the_last_good_meter_state(tmp_path):
    cwd = tmp_path / "ws"
    cwd.mkdir()
    good = {"source": "usage", "usage_tokens": 500, "trailing_tokens": 0, "message_count": 2}
    entries: list[en.Entry] = [
        en.MessageEntry(message=UserMessage([TextPart("hi")])),
        en.MessageEntry(message=AssistantMessage(content=[TextPart("hello")], usage=Usage(input=490, output=10))),
        en.UsageEntry(model_id="scripted/demo", usage=Usage(input=490, output=10), meter=good),
    ]
    path = make_session_file(tmp_path / "data", cwd, entries)
    bad_states = [
        {"source": "usage", "usage_tokens": "lots", "message_count": 2},  # wrong type
        {"source": "usage", "usage_tokens": -7, "message_count": 2},  # impossible figure
        {"source": "usage", "usage_tokens": 10**300, "message_count": 2},  # an odd number
    ]
    with path.open("a") as f:
        for meter in bad_states:
            f.write(json.dumps({"t": "usage", "model_id": "scripted/demo", "usage": {}, "meter": meter}) + "\n")
        f.write('{"t":"usage","model_id":"scripted/demo","usage":{"input":"x"}}\n')  # a corrupt usage line

    async def main():
        session, _, manager = await load(tmp_path / "data", cwd)
        used = session.ctx.figures().used
        await manager.close(session.id)
        return used

    assert anyio.run(main) == 500


def test_arguments_nested_hundreds_deep_cost_the_line_not_the_session(tmp_path):
    cwd = tmp_path / "ws"
    cwd.mkdir()
    deep: dict[str, object] = {}
    for _ in range(950):
        deep = {"a": deep}
    store = SessionStore(tmp_path / "data", redactor=Redactor(), fsync="never")
    with store.create(en.Header(session_id="ses_deep", cwd=str(cwd))) as writer:
        writer.append(en.MessageEntry(message=UserMessage([TextPart("go")])))
        # The store keeps the record without input it could not read back.
        writer.append(
            en.ToolCallEntry(
                wire_id="x", provider_id="x", name="n", title="t", kind="other", status="failed", raw_input=deep
            )
        )
    path = store.path("ses_deep")
    kept = read_session(path).entries[-1]
    assert isinstance(kept, en.ToolCallEntry) and kept.raw_input is None
    with path.open("a") as f:  # a line written by something else, nested beyond any decoder
        f.write('{"t":"plan","entries":[' + "[" * 5000 + "]" * 5000 + "]}\n")
    loaded = read_session(path)
    assert loaded.skipped_lines == 1 and len(loaded.entries) == 2


# --- handoff paths ----------------------------------------------------------------------------------------


def test_handoff_paths_from_the_file_stay_inside_the_session_folder(tmp_path):
    folder = tmp_path / "sessions" / "ses_x"
    (folder / "compaction-1").mkdir(parents=True)
    (folder / "compaction-1" / "handoff.md").write_text("the handoff")
    outside = tmp_path / "outside.txt"
    outside.write_text("secret outside")
    (folder / "link-out").symlink_to(outside)
    (folder / "compaction-1" / "inner-link").symlink_to(folder / "compaction-1" / "handoff.md")
    os.mkfifo(folder / "fifo")
    (folder / "big").write_bytes(b"x" * 100)
    assert read_contained(folder, "compaction-1/handoff.md") == "the handoff"
    # No link is followed below ama's folders, even one that stays inside (ama_acp/ownfiles.py: ama makes none).
    for bad in ["/etc/passwd", "../../outside.txt", "../ses_y/x", "link-out", "fifo", "compaction-1", "", "a\0b"] + [
        "compaction-1/inner-link"
    ]:
        assert read_contained(folder, bad) is None, bad
    assert read_contained(folder, "big", limit=10) is None
    # The folder itself replaced by a link elsewhere.
    swapped = tmp_path / "sessions" / "ses_z"
    swapped.symlink_to(tmp_path)
    assert read_contained(swapped, "outside.txt") is None


def test_a_hand_edited_handoff_path_is_not_read_into_the_context(tmp_path):
    cwd = tmp_path / "ws"
    cwd.mkdir()
    entries: list[en.Entry] = [
        en.MessageEntry(message=UserMessage([TextPart("old")])),
        en.CompactionEntry(
            number=1, summary_path="/etc/passwd", inventory_path="../../../etc/hostname", kept_from_index=1
        ),
    ]
    make_session_file(tmp_path / "data", cwd, entries)

    async def main():
        session, _, manager = await load(tmp_path / "data", cwd)
        await manager.close(session.id)
        return session.conversation.messages

    text = json.dumps(msgspec.to_builtins(anyio.run(main)))
    assert "root:" not in text and "is missing" in text


# --- write failures ---------------------------------------------------------------------------------------


def test_a_failed_write_raises_session_write_error_and_leaves_no_half_line(tmp_path, monkeypatch):
    store = SessionStore(tmp_path, redactor=Redactor(), fsync="never")
    writer = store.create(en.Header(session_id="ses_w", cwd="/tmp"))
    writer.append(en.TitleEntry(title="before"))
    real_write = os.write
    calls = {"n": 0}

    def half_then_full(fd: int, data: bytes) -> int:  # the disk fills in the middle of a line
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("ama_acp.session.store.session_store.os.write", half_then_full)
    with pytest.raises(SessionWriteError) as err:
        writer.append(en.TitleEntry(title="lost " * 50))
    assert "the disk is full" in str(err.value) and err.value.errno == errno.ENOSPC
    assert isinstance(err.value, OSError)  # callers catching OSError keep working
    monkeypatch.setattr("ama_acp.session.store.session_store.os.write", real_write)
    writer.append(en.TitleEntry(title="after"))
    writer.close()
    lines = store.path("ses_w").read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1])
    titles = [e.title if isinstance(e, en.TitleEntry) else e for e in read_session(store.path("ses_w")).entries]
    assert titles == ["before", "after"]


def test_a_file_size_limit_is_efbig_not_a_killed_process(tmp_path):
    """RLIMIT_FSIZE with SIGXFSZ ignored (as the CLI does): the write fails with EFBIG, cleanly."""
    code = textwrap.dedent(
        f"""
        import resource, sys
        from ama_acp.cli import _ignore_file_size_signal
        from ama_acp.session.store import entries as en
        from ama_acp.redact import Redactor
        from ama_acp.session.store.session_store import SessionStore, SessionWriteError
        _ignore_file_size_signal()
        store = SessionStore({str(tmp_path)!r}, redactor=Redactor(), fsync="never")
        writer = store.create(en.Header(session_id="ses_big", cwd="/tmp"))
        resource.setrlimit(resource.RLIMIT_FSIZE, (4000, 4000))
        try:
            for i in range(1000):
                writer.append(en.TitleEntry(title="t" * 90))
        except SessionWriteError as exc:
            print("ERR", exc.errno, exc)
            sys.exit(0)
        sys.exit(3)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"ERR {errno.EFBIG} ") and "size limit" in proc.stdout
    data = (tmp_path / "sessions" / "ses_big.jsonl").read_bytes()
    assert data.endswith(b"\n") and len(data) <= 4000
    assert read_session(tmp_path / "sessions" / "ses_big.jsonl").skipped_lines == 0


def _as_nobody(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` as a user the permission bits apply to (root ignores them)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    kwargs: dict[str, Any] = {}  # subprocess.run's keyword arguments
    if os.geteuid() == 0:
        kwargs["user"] = 65534
        kwargs["group"] = 65534
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path, **kwargs
    )


def test_read_only_directory_and_file_raise_session_write_error(tmp_path):
    data = tmp_path / "data"
    sessions = data / "sessions"
    make_session_file(data, tmp_path, [en.TitleEntry(title="x")], sid="ses_ro")
    if os.geteuid() == 0:
        for p in (tmp_path, data, sessions, sessions / "ses_ro.jsonl"):
            os.chown(p, 65534, 65534)
    os.chmod(sessions / "ses_ro.jsonl", 0o400)
    os.chmod(sessions, 0o500)
    code = textwrap.dedent(
        f"""
        from ama_acp.session.store import entries as en
        from ama_acp.redact import Redactor
        from ama_acp.session.store.session_store import SessionStore, SessionWriteError
        store = SessionStore({str(data)!r}, redactor=Redactor(), fsync="never")
        for what, act in (
            ("create", lambda: store.create(en.Header(session_id="ses_new", cwd="/tmp"))),
            ("open", lambda: store.open_writer("ses_ro")),
        ):
            try:
                act()
                print(what, "WROTE")
            except SessionWriteError as exc:
                print(what, "ERR", exc.reason)
        print(len(store.read("ses_ro").entries))
        """
    )
    try:
        proc = _as_nobody(tmp_path, code)
    except PermissionError:
        pytest.skip("running as root, and the interpreter cannot be run by an unprivileged user (see the EACCES test)")
    finally:
        os.chmod(sessions, 0o700)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["create ERR permission denied", "open ERR permission denied", "1"]


def test_permission_errors_opening_the_file_are_session_write_errors(tmp_path, monkeypatch):
    """The same as the read-only test for a root test run: the open fails with EACCES/EROFS."""
    make_session_file(tmp_path, tmp_path, [en.TitleEntry(title="x")], sid="ses_ro")
    store = SessionStore(tmp_path, redactor=Redactor(), fsync="never")
    real_open = os.open

    def refuse(path, flags, *args, **kwargs):  # kwargs: ownfiles opens below a folder's descriptor (dir_fd)
        if flags & (os.O_RDWR | os.O_WRONLY):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr("ama_acp.session.store.session_store.os.open", refuse)
    with pytest.raises(SessionWriteError, match="read-only"):
        store.open_writer("ses_ro")
    with pytest.raises(SessionWriteError, match="read-only"):
        store.create(en.Header(session_id="ses_new", cwd="/tmp"))
    assert len(store.read("ses_ro").entries) == 1


def test_session_files_and_folder_are_private(tmp_path):
    sessions = tmp_path / "sessions"
    sessions.mkdir(mode=0o755)
    os.chmod(sessions, 0o755)  # made by an older ama, or by hand
    store = SessionStore(tmp_path, redactor=Redactor(), fsync="never")
    store.create(en.Header(session_id="ses_p", cwd="/tmp")).close()
    assert stat.S_IMODE(os.stat(sessions).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store.path("ses_p")).st_mode) == 0o600


def test_log_files_are_private(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o755)
    os.chmod(logs, 0o755)
    (logs / "ama.log").write_text("old\n")
    os.chmod(logs / "ama.log", 0o644)
    (logs / "ama.log.1").write_text("older\n")
    os.chmod(logs / "ama.log.1", 0o644)
    code = textwrap.dedent(
        f"""
        import logging
        from ama_acp.logs import setup_logging
        setup_logging({str(tmp_path)!r}, "error")
        logging.getLogger("t").warning("a line")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(os.stat(logs).st_mode) == 0o700
    for name in ("ama.log", "ama.log.1"):
        assert stat.S_IMODE(os.stat(logs / name).st_mode) == 0o600, name
    assert "a line" in (logs / "ama.log").read_text()
    fresh = tmp_path / "fresh"
    fresh_run = subprocess.run(
        [sys.executable, "-c", code.replace(repr(str(tmp_path)), repr(str(fresh)))], capture_output=True, timeout=60
    )
    assert fresh_run.returncode == 0
    assert stat.S_IMODE(os.stat(fresh / "logs" / "ama.log").st_mode) == 0o600


# --- replay of slash commands -----------------------------------------------------------------------------


def test_slash_command_output_is_recorded_and_replayed(tmp_path):
    cwd = tmp_path / "ws"
    cwd.mkdir()

    async def main():
        peer = Peer()
        manager = SessionManager(Config(data_dir=str(tmp_path / "data")), peer, default_model="scripted/demo")
        session = manager.new_session(str(cwd), None, [])
        await session.prompt([w.TextContent(text="/context")])
        live = [u["content"]["text"] for u in peer.updates if u["sessionUpdate"] == "agent_message_chunk"]
        await manager.close(session.id)
        return session.id, live

    sid, live = anyio.run(main)
    loaded = read_session(SessionStore(tmp_path / "data").path(sid))
    replay = [msgspec.to_builtins(u) for u in replay_updates(loaded)]
    assert replay[0]["sessionUpdate"] == "user_message_chunk" and replay[0]["content"]["text"] == "/context"
    assert [u["content"]["text"] for u in replay[1:] if u["sessionUpdate"] == "agent_message_chunk"] == live


def test_a_commands_output_replays_under_its_live_id_and_an_old_file_under_its_place(tmp_path):
    cwd = tmp_path / "ws"
    cwd.mkdir()

    async def main():
        peer = Peer()
        manager = SessionManager(Config(data_dir=str(tmp_path / "data")), peer, default_model="scripted/demo")
        session = manager.new_session(str(cwd), None, [])
        await session.prompt([w.TextContent(text="/context")])
        live = [u["messageId"] for u in peer.updates if u["sessionUpdate"] == "agent_message_chunk"]
        await manager.close(session.id)
        return session.id, live

    sid, live = anyio.run(main)
    assert len(live) == 1 and live[0].startswith("m-"), live
    path = SessionStore(tmp_path / "data").path(sid)
    replay = [msgspec.to_builtins(u) for u in replay_updates(read_session(path))]
    assert [u["messageId"] for u in replay] == ["r1", live[0]]  # the command as typed, then its output
    # A file written before the id was stored: the output replays as `r<n>`, its place among the shown
    # messages, the same on every load.
    lines = path.read_text(encoding="utf-8").splitlines()
    old = [json.dumps({k: v for k, v in json.loads(x).items() if k != "message_id"}) for x in lines]
    path.write_text("\n".join(old) + "\n", encoding="utf-8")
    again = [[msgspec.to_builtins(u)["messageId"] for u in replay_updates(read_session(path))] for _ in range(2)]
    assert again == [["r1", "r2"], ["r1", "r2"]]
