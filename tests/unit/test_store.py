"""The session store: format, crash safety, listing, deletion, ids, redaction."""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ama_acp.conversation.messages import (
    AssistantMessage,
    ImagePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.redact import Redactor
from ama_acp.session.store.entries import (
    FORMAT_VERSION,
    REPLAY_TEXT_LIMIT,
    CompactionEntry,
    ConfigEntry,
    ContextEditEntry,
    DirectoriesEntry,
    Entry,
    Header,
    MessageEntry,
    ModeEntry,
    ModelEntry,
    PlanEntry,
    TitleEntry,
    ToolCallEntry,
    TurnEntry,
    UsageEntry,
)
from ama_acp.session.store.session_store import (
    InvalidCursor,
    InvalidSessionId,
    LoadedSession,
    SessionBusy,
    SessionExists,
    SessionFormatError,
    SessionNotFound,
    SessionStore,
    new_session_id,
)
from ama_acp.session.store.writer import FsyncPolicy
from ama_acp.tools.base import Location
from tests.support.conversation import first_text
from tests.support.waiting import poll_until

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path, redactor=Redactor())


def _header(session_id: str | None = None, cwd: str = "/work/proj", **kw: Any) -> Header:
    return Header(session_id=new_session_id() if session_id is None else session_id, cwd=cwd, **kw)


def _user(text: str) -> MessageEntry:
    return MessageEntry(message=UserMessage(content=[TextPart(text)]))


def _tool(**kw: Any) -> ToolCallEntry:
    return ToolCallEntry(wire_id="c", provider_id="c", name="sh", title="t", kind="execute", status="completed", **kw)


def every_entry_type() -> list[Entry]:
    return [
        MessageEntry(message=UserMessage(content=[TextPart("fix it"), ImagePart(data="aGk=", mime_type="image/png")])),
        MessageEntry(
            message=AssistantMessage(
                content=[
                    ThinkingPart("hmm", signature="sig"),
                    TextPart("reading"),
                    ToolCallPart(id="call_1", name="read", arguments='{"path": "a.py"}'),
                ],
                model="m1",
                stop="tool_use",
                usage=Usage(input=10, output=5, cache_read=2),
            )
        ),
        MessageEntry(message=ToolResultMessage(tool_call_id="call_1", name="read", content=[TextPart("x = 1\n")])),
        ToolCallEntry(
            wire_id="call_1",
            provider_id="call_1",
            name="read",
            title="Read a.py",
            kind="read",
            status="completed",
            locations=[Location(path="/work/proj/a.py", line=3)],
            raw_input={"path": "a.py", "limit": None},
            content_text="x = 1\n",
            diff_paths=["/work/proj/a.py"],
        ),
        PlanEntry(entries=[{"content": "step", "status": "pending", "priority": "high"}]),
        UsageEntry(
            model_id="m1",
            usage=Usage(input=10, output=5),
            cost=0.0012,
            purpose="turn",
            meter={"used": 15, "source": "reported"},
            billing={"total": 0.0012},
        ),
        UsageEntry(model_id="m1", usage=Usage(), cost=None, purpose="title"),
        ModelEntry(model_id="m2"),
        ModeEntry(mode_id="accept_edits"),
        ConfigEntry(config_id="thought_level", value="high"),
        DirectoriesEntry(additional_directories=["/work/lib"]),
        CompactionEntry(number=1, summary_path="handoff-1.md", kept_from_index=2, inventory_path="inventory-1.md"),
        ContextEditEntry(message_indices=[0, 2], placeholder="[pruned]", meter={"used": 3}),
        TitleEntry(title="Fix the bug"),
        TurnEntry(stop_reason="end_turn"),
    ]


def test_roundtrip_every_entry_type(store: SessionStore) -> None:
    header = _header(additional_directories=["/work/lib"])
    entries = every_entry_type()
    with store.create(header) as w:
        for e in entries:
            w.append(e)
    loaded = store.read(header.session_id)
    assert loaded.header == header
    assert loaded.header.format == FORMAT_VERSION
    assert loaded.entries == entries
    assert not loaded.torn_tail and loaded.skipped_lines == 0
    assert [type(m).__name__ for m in loaded.messages] == ["UserMessage", "AssistantMessage", "ToolResultMessage"]
    # Every line starts with its tag: listing relies on it.
    for line in store.path(header.session_id).read_bytes().splitlines():
        assert line.startswith(b'{"t":"')


def test_append_after_reopen(store: SessionStore) -> None:
    header = _header()
    with store.create(header) as w:
        w.append(_user("one"))
    with store.open_writer(header.session_id) as w:
        w.append(_user("two"))
    assert [first_text(m) for m in store.read(header.session_id).messages] == ["one", "two"]


def test_create_existing_and_open_missing(store: SessionStore) -> None:
    header = _header()
    store.create(header).close()
    with pytest.raises(SessionExists):
        store.create(header)
    with pytest.raises(SessionNotFound):
        store.open_writer(new_session_id())
    with pytest.raises(SessionNotFound):
        store.read(new_session_id())


def test_second_writer_is_refused(store: SessionStore) -> None:
    header = _header()
    with store.create(header):
        with pytest.raises(SessionBusy):
            store.open_writer(header.session_id)
    store.open_writer(header.session_id).close()  # free again once closed


def test_torn_last_line(store: SessionStore, caplog: pytest.LogCaptureFixture) -> None:
    header = _header()
    with store.create(header) as w:
        w.append(_user("one"))
        w.append(_user("two"))
    path = store.path(header.session_id)
    whole = msgspec.json.encode(_user("three"))
    with open(path, "ab") as f:
        f.write(whole[: len(whole) // 2])  # what a crash halfway through a write leaves
    with caplog.at_level(logging.WARNING):
        loaded = store.read(header.session_id)
    assert loaded.torn_tail
    assert [first_text(m) for m in loaded.messages] == ["one", "two"]
    assert any("torn" in r.getMessage() and str(path) in r.getMessage() for r in caplog.records)

    with store.open_writer(header.session_id) as w:
        w.append(_user("four"))
    assert path.read_bytes().endswith(b"\n")
    loaded = store.read(header.session_id)
    assert not loaded.torn_tail and loaded.skipped_lines == 0
    assert [first_text(m) for m in loaded.messages] == ["one", "two", "four"]


def test_failed_partial_write_is_cut_back(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:

    header = _header()
    real_write = os.write
    calls = []

    def full_disk(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, data[: len(data) // 2])  # a short write ...
        raise OSError(28, "No space left on device")  # ... then the disk is full

    with store.create(header) as w:
        w.append(_user("one"))
        monkeypatch.setattr("ama_acp.session.store.session_store.os.write", full_disk)
        with pytest.raises(OSError):
            w.append(_user("two"))
        monkeypatch.setattr("ama_acp.session.store.session_store.os.write", real_write)
        assert store.path(header.session_id).read_bytes().endswith(b"\n")
        w.append(_user("three"))
    loaded = store.read(header.session_id)
    assert [first_text(m) for m in loaded.messages] == ["one", "three"]
    assert not loaded.torn_tail and loaded.skipped_lines == 0


def test_corrupt_middle_line_is_skipped(store: SessionStore, caplog: pytest.LogCaptureFixture) -> None:
    header = _header()
    with store.create(header) as w:
        w.append(_user("one"))
    path = store.path(header.session_id)
    with open(path, "ab") as f:
        f.write(b'{"t":"msg","message":{"type":"user","content":[{"ty\n')  # garbage, but a complete line
        f.write(b"\x00\xff not json\n")
    with store.open_writer(header.session_id) as w:
        w.append(_user("two"))
    with caplog.at_level(logging.WARNING):
        loaded = store.read(header.session_id)
    assert [first_text(m) for m in loaded.messages] == ["one", "two"]
    assert loaded.skipped_lines == 2 and not loaded.torn_tail
    assert sum("corrupt" in r.getMessage() for r in caplog.records) == 2


def test_lines_across_read_chunks(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import ama_acp.session.store.reader as reader_module

    header = _header()
    entries = every_entry_type()
    with store.create(header) as w:
        for e in entries:
            w.append(e)
    path = store.path(header.session_id)
    with open(path, "ab") as f:
        f.write(b"garbage\n" + msgspec.json.encode(_user("torn"))[:20])
    for chunk in (1, 7, 64, 1000):  # lines shorter and longer than a chunk, and the header split too
        monkeypatch.setattr(reader_module, "_READ_CHUNK", chunk)
        loaded = store.read(header.session_id)
        assert loaded.header == header and loaded.entries == entries
        assert loaded.torn_tail and loaded.skipped_lines == 1


def test_unknown_entry_type_is_skipped(store: SessionStore, caplog: pytest.LogCaptureFixture) -> None:
    header = _header()
    with store.create(header) as w:
        w.append(_user("one"))
    with open(store.path(header.session_id), "ab") as f:
        f.write(b'{"t":"hologram","x":1}\n')
        f.write(b'{"t":"title","title":"T","new_field":[1,2]}\n')  # unknown fields are ignored
    with caplog.at_level(logging.INFO):
        loaded = store.read(header.session_id)
    assert loaded.skipped_lines == 1
    assert [type(e).__name__ for e in loaded.entries] == ["MessageEntry", "TitleEntry"]
    assert any("hologram" in r.getMessage() for r in caplog.records)


def test_newer_format_is_refused_clearly(store: SessionStore) -> None:
    sid = new_session_id()
    store.sessions_dir.mkdir(parents=True)
    line = msgspec.json.encode(_header(sid))
    newer = line.replace(f'"format":{FORMAT_VERSION}'.encode(), f'"format":{FORMAT_VERSION + 1}'.encode())
    assert newer != line
    store.path(sid).write_bytes(newer + b"\n" + b'{"t":"quantum","q":1}\n')
    with pytest.raises(SessionFormatError) as err:
        store.read(sid)
    message = str(err.value)
    assert f"newer ama (format {FORMAT_VERSION + 1})" in message and "upgrade ama" in message
    with pytest.raises(SessionFormatError):
        store.open_writer(sid)  # and never appended to


def test_not_a_session_file(store: SessionStore) -> None:
    sid = new_session_id()
    store.sessions_dir.mkdir(parents=True)
    store.path(sid).write_bytes(b'{"hello": 1}\n')
    with pytest.raises(SessionFormatError, match="not an ama session file"):
        store.read(sid)
    store.path(sid).write_bytes(b'{"t":"header","ses')  # crashed while being created
    with pytest.raises(SessionFormatError, match="incomplete"):
        store.read(sid)


def test_tool_content_is_clipped_to_4kb(store: SessionStore) -> None:
    header = _header()
    big = "é" * 5000  # 10,000 bytes in UTF-8
    with store.create(header) as w:
        w.append(_tool(content_text=big))
    (entry,) = store.read(header.session_id).entries
    assert isinstance(entry, ToolCallEntry)
    assert len(entry.content_text.encode()) <= REPLAY_TEXT_LIMIT
    assert big.startswith(entry.content_text) and len(entry.content_text) == REPLAY_TEXT_LIMIT // 2


def _make(store: SessionStore, cwd: str, mtime: float, title: str | None = None) -> str:
    header = _header(cwd=cwd)
    with store.create(header) as w:
        w.append(_user("hi"))
        if title:
            w.append(TitleEntry(title="draft"))
            w.append(_user("more"))
            w.append(TitleEntry(title=title))
            w.append(_user("after the title"))
    os.utime(store.path(header.session_id), (mtime, mtime))
    return header.session_id


def test_list_newest_first_with_cwd_filter_and_paging(store: SessionStore) -> None:
    t0 = 1_700_000_000
    a_ids = [_make(store, "/work/a", t0 + i, title=f"A{i}") for i in range(7)]
    b_ids = [_make(store, "/work/b", t0 + 100 + i) for i in range(3)]

    everything, cursor = store.list()
    assert cursor is None
    assert [s.session_id for s in everything] == list(reversed(b_ids)) + list(reversed(a_ids))

    pages, cursor, seen = 0, None, []
    while True:
        page, cursor = store.list(cwd="/work/a/", cursor=cursor, page_size=3)  # a trailing slash still matches
        pages += 1
        seen.extend(page)
        if cursor is None:
            break
    assert pages == 3
    assert [s.session_id for s in seen] == list(reversed(a_ids))
    assert [s.title for s in seen] == [f"A{i}" for i in reversed(range(7))]
    assert all(s.cwd == "/work/a" for s in seen)
    assert seen[0].updated_at.startswith("2023-11-14T22:13:26") and seen[0].updated_at.endswith("Z")
    assert store.list(cwd="/work/b")[0][0].title is None
    assert store.list(cwd="/nowhere") == ([], None)


def test_list_follows_appends_and_new_directories(store: SessionStore) -> None:
    sid = _make(store, "/work/a", 1_700_000_000, title="first")
    assert store.list()[0][0].title == "first"  # fills the index
    assert (store.sessions_dir / "index.json").exists()
    with store.open_writer(sid) as w:
        w.append(TitleEntry(title="second"))
        w.append(DirectoriesEntry(additional_directories=["/work/lib"]))
    (summary,) = store.list()[0]
    assert summary.title == "second" and summary.additional_directories == ["/work/lib"]
    # A corrupt index is only a cache.
    (store.sessions_dir / "index.json").write_bytes(b"{not json")
    assert store.list()[0][0].title == "second"


def test_list_invalid_cursor(store: SessionStore) -> None:
    _make(store, "/work/a", 1_700_000_000)
    for bad in ["nope", "!!!", "", "W10"]:  # "W10" is base64 of "[]"
        with pytest.raises(InvalidCursor):
            store.list(cursor=bad)


def test_list_of_missing_dir_is_empty(tmp_path: Path) -> None:
    assert SessionStore(tmp_path / "none").list() == ([], None)


def test_list_is_fast_for_a_thousand_sessions(store: SessionStore) -> None:
    for i in range(1000):
        _make(store, f"/work/{i % 10}", 1_700_000_000 + i, title=f"t{i}")
    start = time.perf_counter()
    page, cursor = store.list()  # cold: builds the index
    cold = time.perf_counter() - start
    start = time.perf_counter()
    store.list(cwd="/work/3")
    warm = time.perf_counter() - start
    assert len(page) == 50 and cursor is not None and page[0].title == "t999"
    assert cold < 1.0 and warm < 0.5, (cold, warm)


def test_delete(store: SessionStore) -> None:
    header = _header()
    store.create(header).close()
    folder = store.handoff_dir(header.session_id)
    folder.mkdir()
    (folder / "handoff-1.md").write_text("goal")
    store.delete(header.session_id)
    assert not store.path(header.session_id).exists() and not folder.exists()
    assert store.list() == ([], None)
    with pytest.raises(SessionNotFound):
        store.delete(header.session_id)
    with pytest.raises(SessionNotFound):
        store.read(header.session_id)


@pytest.mark.parametrize("bad", ["../x", "..", "a/b", "/etc/passwd", "x.jsonl", "", "a\x00b", "é", "a" * 200])
def test_id_validation(store: SessionStore, bad: str) -> None:
    for call in (store.read, store.delete, store.open_writer, store.path):
        with pytest.raises(InvalidSessionId):
            call(bad)
    with pytest.raises(SessionNotFound):  # InvalidSessionId is a SessionNotFound (and a ValueError)
        store.read(bad)
    with pytest.raises(ValueError):
        store.create(_header(bad))


def test_new_session_ids_are_unique_and_sortable() -> None:
    ids = [new_session_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    # An id made in a later millisecond sorts after: wait for the clock to reach one, not a fixed time.
    first_ms = int(ids[0][4:16], 16)
    poll_until(lambda: time.time_ns() // 1_000_000 > first_ms, 1.0, "the millisecond clock to move on")
    later = new_session_id()
    assert later[:16] > ids[0][:16] and later.startswith("ses_")


def test_secrets_from_the_environment_never_reach_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOO_API_KEY", "sk-verysecret123")
    monkeypatch.setenv("GITHUB_TOKEN", 'ghp_"quoted\\token')
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to be worth redacting
    store = SessionStore(tmp_path)
    header = _header(cwd="/work/sk-verysecret123")
    with store.create(header) as w:
        w.append(_user("my key is sk-verysecret123, ok?"))
        w.append(
            _tool(
                raw_input={"sk-verysecret123": 'ghp_"quoted\\token'},
                content_text='FOO_API_KEY=sk-verysecret123\nGITHUB_TOKEN=ghp_"quoted\\token abc',
            )
        )
    data = store.path(header.session_id).read_bytes()
    assert b"verysecret" not in data and b"quoted" not in data
    loaded = store.read(header.session_id)
    assert loaded.header.cwd == "/work/[redacted]"
    assert first_text(loaded.messages[0]) == "my key is [redacted], ok?"
    tool = loaded.entries[1]
    assert isinstance(tool, ToolCallEntry)
    assert tool.raw_input == {"[redacted]": "[redacted]"}
    assert tool.content_text == "FOO_API_KEY=[redacted]\nGITHUB_TOKEN=[redacted] abc"


_CHILD = textwrap.dedent(
    """
    import sys
    from ama_acp.conversation.messages import TextPart, UserMessage
    from ama_acp.session.store.entries import Header, MessageEntry
    from ama_acp.redact import Redactor
    from ama_acp.session.store.session_store import SessionStore

    data_dir, session_id, count, biggest = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    store = SessionStore(data_dir, redactor=Redactor(), fsync="never")
    w = store.create(Header(session_id=session_id, cwd="/work"))
    i = 0
    while count < 0 or i < count:
        # Some big lines: big writes are the ones a kill can cut short.
        n = (i * 7919) % biggest if i % 5 == 0 else i % 300
        w.append(MessageEntry(message=UserMessage(content=[TextPart(f"{i}:{n}:" + "x" * n)])))
        i += 1
    w.close()
    """
)


def _child(tmp_path: Path, session_id: str, count: int, biggest: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [sys.executable, "-c", _CHILD, str(tmp_path), session_id, str(count), str(biggest)]
    return subprocess.Popen(args, env=env)


def _check_complete(loaded: LoadedSession) -> list[int]:
    numbers = []
    for m in loaded.messages:
        i, n, rest = first_text(m).split(":", 2)
        assert rest == "x" * int(n)  # every decoded entry is whole
        numbers.append(int(i))
    return numbers


def test_sigkill_mid_write_then_load(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A real kill at an arbitrary moment of a writer going at full speed: whatever it left loads, every entry
    whole and in order, and the session goes on. Where the kill lands is chance (big lines make a cut line
    likely, not certain), so the torn-tail branch is asserted both ways here and made certain below."""
    store = SessionStore(tmp_path, redactor=Redactor())
    sid = new_session_id()
    proc = _child(tmp_path, sid, -1, 1 << 18)
    path = store.path(sid)
    try:
        # Kill once it has written a few MB (dozens of its big lines): it is mid-stream by then.
        poll_until(
            lambda: proc.poll() is not None or (path.exists() and path.stat().st_size > 4 << 20),
            20,
            "the writer to write 4 MB",
        )
        assert proc.poll() is None, "the writer ended before the kill"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    try:
        ends_whole = path.read_bytes()[-1:] == b"\n"
        with caplog.at_level(logging.WARNING):
            loaded = store.read(sid)
        numbers = _check_complete(loaded)
        assert numbers == list(range(len(numbers))) and len(numbers) > 10
        assert loaded.skipped_lines == 0
        # Both outcomes of the race are checked: a torn tail exactly when the file does not end in a newline,
        # and a log line exactly then.
        assert loaded.torn_tail == (not ends_whole)
        assert any("torn" in r.getMessage() for r in caplog.records) == loaded.torn_tail
        # Whatever the kill left, the session can go on.
        with store.open_writer(sid) as w:
            w.append(_user("0:0:"))
        again = store.read(sid)
        assert not again.torn_tail and len(again.messages) == len(numbers) + 1
    finally:
        path.unlink(missing_ok=True)  # it grows at disk speed


# A writer killed in the middle of one line, deterministically: the child runs the real SessionWriter, but its
# os.write for the last entry writes only the first KEEP bytes (what the kernel had taken when the kill came),
# says so on stdout and blocks until the parent SIGKILLs it, before the writer could cut the partial line off.
_CUT_CHILD = textwrap.dedent(
    """
    import os
    import sys
    from ama_acp.conversation.messages import TextPart, UserMessage
    from ama_acp.session.store.entries import Header, MessageEntry
    from ama_acp.session.store.session_store import SessionStore

    data_dir, session_id, keep = sys.argv[1], sys.argv[2], sys.argv[3]
    w = SessionStore(data_dir, fsync="never").create(Header(session_id=session_id, cwd="/work"))
    for i in range(3):
        w.append(MessageEntry(message=UserMessage(content=[TextPart(f"whole {i}")])))
    real_write = os.write

    def cut_short(fd, data):
        n = {"first": 1, "half": len(data) // 2, "all-but-newline": len(data) - 1}[keep]
        real_write(fd, bytes(data[:n]))
        sys.stdout.write(f"cut {n} of {len(data)}\\n")
        sys.stdout.flush()
        sys.stdin.buffer.read()  # blocks until the kill (the parent holds stdin open)
        raise SystemExit("not killed")

    os.write = cut_short
    w.append(MessageEntry(message=UserMessage(content=[TextPart("cut short " + "x" * 300)])))
    """
)


@pytest.mark.parametrize("keep", ["first", "half", "all-but-newline"])
def test_sigkill_mid_line_leaves_a_torn_tail_that_loads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, keep: str
) -> None:
    store = SessionStore(tmp_path, redactor=Redactor())
    sid = new_session_id()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CUT_CHILD, str(tmp_path), sid, keep],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        stdout = proc.stdout
        ready = poll_until(lambda: select.select([stdout], [], [], 0.05)[0], 20, "the child to cut its line")
        assert ready
        said = proc.stdout.readline().decode()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert said.startswith("cut "), said
    kept, total = int(said.split()[1]), int(said.split()[3])

    path = store.path(sid)
    raw = path.read_bytes()
    assert raw.count(b"\n") == 4  # the header and three whole entries
    assert len(raw) - (raw.rindex(b"\n") + 1) == kept < total  # then exactly the bytes the kill left
    with caplog.at_level(logging.WARNING):
        loaded = store.read(sid)
    assert loaded.torn_tail and loaded.skipped_lines == 0
    assert [first_text(m) for m in loaded.messages] == ["whole 0", "whole 1", "whole 2"]
    assert any("torn last line" in r.getMessage() and str(path) in r.getMessage() for r in caplog.records)

    caplog.clear()
    with caplog.at_level(logging.WARNING), store.open_writer(sid) as w:
        w.append(_user("after the crash"))
    assert any("cut off a torn last line" in r.getMessage() for r in caplog.records)
    again = store.read(sid)
    assert not again.torn_tail and again.skipped_lines == 0
    assert [first_text(m) for m in again.messages] == ["whole 0", "whole 1", "whole 2", "after the crash"]


def test_every_cut_of_the_last_line_is_a_torn_tail(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A crash can stop a line at any byte: cut a real file at every offset inside its last line (up to and
    including the whole line without its newline) and load each one."""
    store = SessionStore(tmp_path / "src")
    header = _header()
    with store.create(header) as w:
        w.append(_user("one"))
        w.append(_user("two"))
        w.append(MessageEntry(message=AssistantMessage(content=[TextPart('three "quoted" \\ é')])))
    whole = store.path(header.session_id).read_bytes()
    start = whole.rindex(b"\n", 0, len(whole) - 1) + 1  # first byte of the last line
    assert whole.endswith(b"\n") and len(whole) - start > 40
    cuts = SessionStore(tmp_path / "cut")
    target = cuts.path(header.session_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    for end in range(start + 1, len(whole)):
        target.write_bytes(whole[:end])
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            loaded = cuts.read(header.session_id)
        assert loaded.torn_tail, end
        assert loaded.skipped_lines == 0, end
        assert [first_text(m) for m in loaded.messages] == ["one", "two"], end
        assert any(f"torn last line at byte offset {start}" in r.getMessage() for r in caplog.records), end
    target.write_bytes(whole)
    assert not cuts.read(header.session_id).torn_tail


def test_two_processes_append_to_different_sessions(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, redactor=Redactor())
    sids = [new_session_id(), new_session_id()]
    procs = [_child(tmp_path, sid, 3000, 4000) for sid in sids]
    for p in procs:
        assert p.wait(timeout=60) == 0
    for sid in sids:
        loaded = store.read(sid)
        assert not loaded.torn_tail and loaded.skipped_lines == 0
        assert _check_complete(loaded) == list(range(3000))
    assert {s.session_id for s in store.list()[0]} == set(sids)


def test_prune_handoffs_removes_old_and_orphaned_folders(tmp_path):
    """docs/sessions.md: old handoff folders of other sessions are pruned after a retention period."""
    import os as _os
    import time as _time

    from ama_acp.session.store.entries import Header as _Header
    from ama_acp.session.store.session_store import SessionStore as _Store
    from ama_acp.session.store.session_store import new_session_id as _new_id

    store = _Store(tmp_path)
    ids = [_new_id() for _ in range(4)]
    for sid in ids[:3]:
        store.create(_Header(session_id=sid, cwd="/w")).close()
        (store.handoff_dir(sid) / "compaction-1").mkdir(parents=True)
    old = _time.time() - 40 * 86400
    for sid in (ids[0], ids[2]):  # the folder and the session file untouched for 40 days
        _os.utime(store.handoff_dir(sid), (old, old))
        _os.utime(store.path(sid), (old, old))
    # ids[0]: old: pruned; ids[2]: old, but the current session: kept
    (store.handoff_dir(ids[3]) / "compaction-1").mkdir(parents=True)  # no session file: pruned
    assert store.prune_handoffs(30, except_id=ids[2]) == 2
    assert not store.handoff_dir(ids[0]).exists() and not store.handoff_dir(ids[3]).exists()
    assert store.handoff_dir(ids[1]).exists() and store.handoff_dir(ids[2]).exists()


# --- a session file that cannot be made (issue 22, point 6): always a SessionWriteError, nothing left behind -----


def test_create_where_the_sessions_path_is_a_file_says_so(tmp_path: Path) -> None:
    from ama_acp.session.store.session_store import SessionWriteError

    (tmp_path / "sessions").write_text("a file\n", encoding="utf-8")
    store = SessionStore(tmp_path, redactor=Redactor())
    with pytest.raises(SessionWriteError) as caught:
        store.create(_header())
    assert caught.value.reason == f"{tmp_path / 'sessions'} is not a directory"
    assert "not saved" in str(caught.value)
    # The rest of the store answers as for a store with nothing in it.
    assert store.list() == ([], None)
    with pytest.raises(SessionNotFound):
        store.read(new_session_id())
    with pytest.raises(SessionNotFound):
        store.delete(new_session_id())
    assert not store.exists(new_session_id())


@pytest.mark.parametrize("fsync", ["turn", "never"])
def test_create_whose_header_cannot_be_written_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: FsyncPolicy
) -> None:
    import errno

    from ama_acp.session.store.session_store import SessionWriteError

    real_write = os.write

    def full_disk(fd: int, data: bytes) -> int:
        real_write(fd, data[:10])  # a short write, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    store = SessionStore(tmp_path, redactor=Redactor(), fsync=fsync)
    header = _header()
    monkeypatch.setattr("ama_acp.session.store.session_store.os.write", full_disk)
    with pytest.raises(SessionWriteError) as caught:
        store.create(header)
    monkeypatch.setattr("ama_acp.session.store.session_store.os.write", real_write)
    assert caught.value.errno == errno.ENOSPC and caught.value.reason == "the disk is full"
    assert not store.path(header.session_id).exists()
    store.create(_header()).close()  # the store itself is fine: the next session is saved


def test_create_whose_fsync_fails_is_a_write_error_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from ama_acp.session.store.session_store import SessionWriteError

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    store = SessionStore(tmp_path, redactor=Redactor(), fsync="turn")
    header = _header()
    monkeypatch.setattr("ama_acp.session.store.session_store.os.fsync", failing)
    with pytest.raises(SessionWriteError) as caught:
        store.create(header)
    assert caught.value.errno == errno.EIO and "flushed to disk" in caught.value.reason
    assert not store.path(header.session_id).exists()


def test_create_on_a_file_system_that_cannot_lock_is_a_write_error(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from ama_acp.session.store.session_store import SessionWriteError

    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    header = _header()
    monkeypatch.setattr("ama_acp.session.store.session_store.fcntl.flock", no_locks)
    with pytest.raises(SessionWriteError) as caught:
        store.create(header)
    assert "cannot be locked" in caught.value.reason
    assert not store.path(header.session_id).exists()


def test_a_writer_closed_after_a_failed_partial_write_cuts_the_partial_line(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:

    header = _header()
    real_write, real_truncate = os.write, os.ftruncate

    def short_then_full(fd: int, data: bytes) -> int:
        if len(data) > 5:
            return real_write(fd, data[:5])
        raise OSError(28, "No space left on device")

    def refuse(fd: int, length: int) -> None:
        raise OSError(5, "Input/output error")

    w = store.create(header)
    monkeypatch.setattr("ama_acp.session.store.session_store.os.write", short_then_full)
    monkeypatch.setattr("ama_acp.session.store.session_store.os.ftruncate", refuse)  # the cut at the failure fails too
    with pytest.raises(OSError):
        w.append(_user("lost"))
    monkeypatch.setattr("ama_acp.session.store.session_store.os.write", real_write)
    monkeypatch.setattr("ama_acp.session.store.session_store.os.ftruncate", real_truncate)
    w.close()  # the session gives up on the file: the partial line goes with the writer
    assert store.path(header.session_id).read_bytes().endswith(b"\n")
    assert not store.read(header.session_id).torn_tail


def test_a_long_line_goes_out_with_its_newline_uncopied_even_when_written_short(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line past a megabyte (a model's long reply) is written with its newline by writev, never copied whole
    to add it; a short write still ends in one whole line."""
    header = _header()
    real_writev = os.writev
    sizes: list[int] = []

    def short_first(fd: int, buffers: list[memoryview | bytes]) -> int:
        sizes.append(sum(len(b) for b in buffers))
        if len(sizes) == 1:
            return real_writev(fd, [buffers[0][:1000]])  # the kernel took only the first 1000 bytes
        return real_writev(fd, buffers)

    long = "x" * (3 * 1024 * 1024)
    with store.create(header) as w:
        monkeypatch.setattr("ama_acp.session.store.session_store.os.writev", short_first)
        w.append(_user(long))
        monkeypatch.setattr("ama_acp.session.store.session_store.os.writev", real_writev)
        w.append(_user("after"))
    assert len(sizes) == 2 and sizes[1] == sizes[0] - 1000
    loaded = store.read(header.session_id)
    assert [first_text(m) for m in loaded.messages] == [long, "after"]
    assert not loaded.torn_tail and loaded.skipped_lines == 0


# --- handoff retention ([compaction] retention_days) ---------------------------------------------------


def _aged_sessions(tmp_path: Path, days: dict[str, float]) -> tuple[SessionStore, dict[str, str]]:
    """A store with one closed session a name, its handoff folder and its file last touched `days` ago."""
    import os as _os
    import time as _time

    from ama_acp.session.store.entries import Header as _Header
    from ama_acp.session.store.session_store import SessionStore as _Store
    from ama_acp.session.store.session_store import new_session_id as _new_id

    store = _Store(tmp_path)
    ids = {}
    for name, age in days.items():
        sid = ids[name] = _new_id()
        store.create(_Header(session_id=sid, cwd="/w")).close()
        (store.handoff_dir(sid) / "compaction-1").mkdir(parents=True)
        (store.handoff_dir(sid) / "compaction-1" / "handoff.md").write_text("h")
        when = _time.time() - age * 86400
        _os.utime(store.handoff_dir(sid), (when, when))
        _os.utime(store.path(sid), (when, when))
    return store, ids


def test_retention_of_two_days_removes_older_folders_only(tmp_path):
    store, ids = _aged_sessions(tmp_path, {"fresh": 1, "old": 3, "older": 30, "current": 30})
    assert store.prune_handoffs(2, except_id=ids["current"]) == 2
    kept = {name for name, sid in ids.items() if store.handoff_dir(sid).exists()}
    assert kept == {"fresh", "current"}
    assert all(store.path(sid).exists() for sid in ids.values())  # the session files themselves stay


def test_retention_zero_turns_pruning_off(tmp_path):
    """Seed 003_: `retention_days = 0` keeps every folder, old, orphaned or not (it used to remove them all)."""
    store, ids = _aged_sessions(tmp_path, {"a": 0, "b": 40, "current": 0})
    orphan = store.handoff_dir(ids["b"])
    store.path(ids["b"]).unlink()
    assert store.prune_handoffs(0, except_id=ids["current"]) == 0
    assert all(store.handoff_dir(sid).exists() for sid in ids.values()) and orphan.exists()


def test_retention_touches_only_folders_named_as_ama_names_sessions(tmp_path):
    """Seed 003_: only session-id folders are pruned; `notes` is a valid id but no name ama gives a session."""
    import os as _os
    import time as _time

    store, ids = _aged_sessions(tmp_path, {"old": 30})
    old = _time.time() - 30 * 86400
    for name in ("notes", "ses_x", "ses_0123456789abcdef0123456"):
        (store.sessions_dir / name).mkdir()
        _os.utime(store.sessions_dir / name, (old, old))
    assert store.prune_handoffs(2) == 1 and not store.handoff_dir(ids["old"]).exists()
    assert all((store.sessions_dir / n).is_dir() for n in ("notes", "ses_x", "ses_0123456789abcdef0123456"))


def test_a_session_used_recently_keeps_an_old_handoff_folder(tmp_path):
    """The age is the session's: a session compacted long ago but used yesterday still needs its handoff."""
    import os as _os
    import time as _time

    store, ids = _aged_sessions(tmp_path, {"used": 10})
    yesterday = _time.time() - 86400
    _os.utime(store.path(ids["used"]), (yesterday, yesterday))
    assert store.prune_handoffs(2) == 0 and store.handoff_dir(ids["used"]).exists()


def test_a_session_open_for_writing_anywhere_keeps_its_folder(tmp_path):
    store, ids = _aged_sessions(tmp_path, {"open": 30, "closed": 30})
    writer = store.open_writer(ids["open"])  # the flock any ama process holds while a session is open
    try:
        assert store.prune_handoffs(2) == 1
        assert store.handoff_dir(ids["open"]).exists() and not store.handoff_dir(ids["closed"]).exists()
    finally:
        writer.close()
    writer = store.open_writer(ids["open"])  # the probe took no lock it kept
    writer.close()
    assert store.prune_handoffs(2) == 1


def test_retention_leaves_symlinks_files_and_other_names_alone(tmp_path):
    import os as _os

    store, ids = _aged_sessions(tmp_path, {"old": 30})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    from ama_acp.session.store.session_store import new_session_id as _new_id

    link = store.sessions_dir / _new_id()
    _os.symlink(outside, link)  # a valid session id naming a link: never followed, never removed
    (store.sessions_dir / "not.a.session").mkdir()  # a dot: no session id
    assert store.prune_handoffs(2) == 1
    assert (outside / "precious").exists() and link.is_symlink() and (store.sessions_dir / "not.a.session").exists()


def test_retention_without_a_sessions_folder_removes_nothing(tmp_path):
    from ama_acp.session.store.session_store import SessionStore as _Store

    assert _Store(tmp_path / "none").prune_handoffs(0) == 0


def test_retention_never_blocks_on_a_fifo_named_like_a_session_file(tmp_path):
    import threading

    store = SessionStore(tmp_path)
    store.sessions_dir.mkdir(parents=True)
    sid = "ses_" + "0" * 24
    os.mkfifo(store.path(sid))  # nobody writes it: opening it to read would block for good
    folder = store.sessions_dir / sid
    (folder / "compaction-1").mkdir(parents=True)
    old = time.time() - 10 * 86_400
    os.utime(folder, (old, old))
    done: list[int] = []
    worker = threading.Thread(target=lambda: done.append(store.prune_handoffs(2)), daemon=True)
    worker.start()
    worker.join(10)
    assert done, "prune_handoffs blocked on the FIFO"
