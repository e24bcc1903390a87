"""Session files are regular files, read with bounds (issue 23, point 3; docs/sessions.md "Odd files in the
sessions folder").

Whatever sits under a session's name — a FIFO, a link to /dev/zero, a symlink loop, a directory, a device,
a socket — read, open_writer, list and delete answer at once. Each operation runs under a wall-clock guard
in a forked child with a memory limit, so a regression fails instead of hanging the suite or reading
/dev/zero until the machine runs out of memory. A line past the cap is skipped as damaged without being held;
the scanners are linear and give the same result however the file is cut; a session open in one process
cannot be deleted by another; a writer notices its file gone.
"""

from __future__ import annotations

import logging
import os
import pickle
import resource
import select
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp.conversation.messages import TextPart, UserMessage
from ama_acp.redact import Redactor
from ama_acp.rpc.framing import MAX_LINE as WIRE_MAX_LINE
from ama_acp.session.store import listing
from ama_acp.session.store import reader as reader_mod
from ama_acp.session.store import writer as writer_mod
from ama_acp.session.store.entries import DirectoriesEntry, Header, MessageEntry, TitleEntry, TurnEntry
from ama_acp.session.store.files import first_line
from ama_acp.session.store.listing import scan_chunks
from ama_acp.session.store.reader import decode_session
from ama_acp.session.store.session_store import (
    MAX_LINE_BYTES,
    NotASessionFile,
    SessionBusy,
    SessionFormatError,
    SessionNotFound,
    SessionStore,
    SessionWriteError,
    new_session_id,
)
from tests.support.conversation import first_text
from tests.support.hypothesis_profiles import examples

REPO = Path(__file__).resolve().parents[2]
GUARD_SECONDS = 10.0  # each operation takes milliseconds; a blocked or endless one is killed after this
T = TypeVar("T")
CHILD_MEMORY = 512 << 20  # address space a child may add: reading /dev/zero would pass it within a second


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path, redactor=Redactor(), fsync="never")


def _header(cwd: str = "/work/proj", **kw: Any) -> Header:
    return Header(session_id=new_session_id(), cwd=cwd, **kw)


def _user(text: str) -> MessageEntry:
    return MessageEntry(message=UserMessage(content=[TextPart(text)]))


# --- the guard ----------------------------------------------------------------------------------------------


def guarded(fn: Callable[[], object]) -> tuple[str, object]:
    """Run `fn` in a forked child: ("ok", its result) or ("error", (type name, str, kind)). Fails the test if
    it has not answered within GUARD_SECONDS (the child is killed), and the child cannot grow by more than
    CHILD_MEMORY (a read of /dev/zero ends in MemoryError, not in the machine swapping)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(r)
            pages = int(Path("/proc/self/statm").read_text().split()[0])
            limit = pages * os.sysconf("SC_PAGE_SIZE") + CHILD_MEMORY
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            try:
                out: tuple[str, object] = ("ok", fn())
            except BaseException as exc:  # reported to the parent, whatever it is
                out = ("error", (type(exc).__name__, str(exc), getattr(exc, "kind", None)))
            try:
                data = pickle.dumps(out)
            except Exception as exc:
                data = pickle.dumps(("error", ("Unpicklable", repr(exc), None)))
            with os.fdopen(w, "wb") as f:
                f.write(data)
        finally:
            os._exit(0)
    os.close(w)
    chunks: list[bytes] = []
    deadline = time.monotonic() + GUARD_SECONDS
    try:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([r], [], [], max(left, 0))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f"the operation did not answer within {GUARD_SECONDS} s (it blocks or never ends)")
            chunk = os.read(r, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    assert chunks, "the child died without an answer"
    result: tuple[str, object] = pickle.loads(b"".join(chunks))
    return result


def raised(outcome: tuple[str, object]) -> tuple[str, str, str | None]:
    """The (type name, message, kind) of a guarded call the test expects to have raised."""
    status, detail = outcome
    assert status == "error" and isinstance(detail, tuple), outcome
    name, message, kind = detail
    assert isinstance(name, str) and isinstance(message, str) and (kind is None or isinstance(kind, str)), detail
    return name, message, kind


def in_thread(fn: Callable[[], T], timeout: float = GUARD_SECONDS) -> T:
    """`fn` in this process (so caplog sees its log), failing the test if it has not returned in time."""
    returned: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            returned.append(fn())
        except BaseException as exc:
            failed.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        pytest.fail(f"did not return within {timeout} s")
    if failed:
        raise failed[0]
    return returned[0]


# --- every kind of entry under a session's name -------------------------------------------------------------


def _fifo(path: Path, tmp: Path) -> None:
    os.mkfifo(path)


def _link_to_dev_zero(path: Path, tmp: Path) -> None:
    path.symlink_to("/dev/zero")


def _link_to_dev_null(path: Path, tmp: Path) -> None:
    path.symlink_to("/dev/null")


def _link_loop(path: Path, tmp: Path) -> None:
    path.symlink_to(path.name)  # points at itself: ELOOP wherever it is followed


def _link_to_a_file(path: Path, tmp: Path) -> None:
    target = tmp / "elsewhere.jsonl"
    target.write_text('{"t":"header","session_id":"x","cwd":"/","format":1}\n')
    path.symlink_to(target)


def _dangling_link(path: Path, tmp: Path) -> None:
    path.symlink_to(tmp / "nothing-here")


def _directory(path: Path, tmp: Path) -> None:
    path.mkdir()
    (path / "keep.txt").write_text("someone's data")


def _char_device(path: Path, tmp: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mknod of a device needs root")
    dev = os.stat("/dev/zero").st_rdev
    os.mknod(path, 0o600 | stat.S_IFCHR, dev)  # /dev/zero's own device numbers: reading it never ends


def _socket(path: Path, tmp: Path) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(str(path))
    except OSError as exc:  # a path too long for sun_path
        pytest.skip(f"cannot bind a unix socket here: {exc}")
    finally:
        s.close()


KINDS: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "fifo": (_fifo, "FIFO"),
    "link-to-dev-zero": (_link_to_dev_zero, "symbolic link"),
    "link-to-dev-null": (_link_to_dev_null, "symbolic link"),
    "link-loop": (_link_loop, "symbolic link"),
    "link-to-a-file": (_link_to_a_file, "symbolic link"),
    "dangling-link": (_dangling_link, "symbolic link"),
    "directory": (_directory, "directory"),
    "char-device": (_char_device, "character device"),
    "socket": (_socket, "socket"),
}


@pytest.fixture(params=sorted(KINDS))
def odd(request: pytest.FixtureRequest, store: SessionStore, tmp_path: Path) -> tuple[str, Path, str]:
    """A session id whose name is taken by one odd kind of entry, beside two real sessions."""
    make, words = KINDS[request.param]
    for cwd in ("/a", "/b"):
        store.create(_header(cwd=cwd)).close()
    sid = "ses_odd_" + request.param.replace("-", "_")
    path = store.path(sid)
    make(path, tmp_path)
    return sid, path, words


def test_read_answers_at_once_naming_the_kind(store: SessionStore, odd: tuple[str, Path, str]) -> None:
    sid, path, words = odd
    name, message, kind = raised(guarded(lambda: store.read(sid)))
    assert name == "NotASessionFile", message
    assert kind is not None and words in kind and words in message and str(path) in message


def test_open_writer_answers_at_once_naming_the_kind(store: SessionStore, odd: tuple[str, Path, str]) -> None:
    sid, _, words = odd
    name, message, kind = raised(guarded(lambda: store.open_writer(sid)))
    assert name == "NotASessionFile", message
    assert kind is not None and words in kind


def test_list_skips_it_and_logs_it_once(
    store: SessionStore, odd: tuple[str, Path, str], caplog: pytest.LogCaptureFixture
) -> None:
    sid, path, words = odd
    caplog.set_level(logging.WARNING, logger="ama_acp.session.store.listing")
    for _ in range(3):
        page, cursor = in_thread(lambda: store.list())
        assert sorted(s.cwd for s in page) == ["/a", "/b"] and cursor is None
    told = [r for r in caplog.records if str(path) in r.getMessage()]
    assert len(told) == 1 and words in told[0].getMessage(), [r.getMessage() for r in caplog.records]
    # A fresh store (another process) reads the index: still not logged again until the entry changes.
    caplog.clear()
    fresh = SessionStore(store.sessions_dir.parent, redactor=Redactor())
    assert len(in_thread(lambda: fresh.list()[0])) == 2
    assert not [r for r in caplog.records if str(path) in r.getMessage()]


def test_delete_removes_the_name_never_what_it_names(
    store: SessionStore, odd: tuple[str, Path, str], tmp_path: Path
) -> None:
    sid, path, words = odd
    folder = store.handoff_dir(sid)
    folder.mkdir()
    status, detail = outcome = guarded(lambda: store.delete(sid))
    if words == "directory":  # not ama's to remove: it may hold anything
        name, message, _ = raised(outcome)
        assert name == "NotASessionFile" and "directory" in message
        assert (path / "keep.txt").read_text() == "someone's data" and folder.is_dir()
        return
    assert status == "ok", detail
    assert not os.path.lexists(path) and not folder.exists()
    if sid.endswith("link_to_a_file"):
        assert (tmp_path / "elsewhere.jsonl").read_text().startswith('{"t":"header"')  # the target stays
    assert len(store.list()[0]) == 2


def test_delete_of_a_handoff_folder_that_is_a_link_removes_the_link_only(store: SessionStore, tmp_path: Path) -> None:
    header = _header()
    store.create(header).close()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("x")
    store.handoff_dir(header.session_id).symlink_to(outside)
    store.delete(header.session_id)
    assert (outside / "precious").read_text() == "x"
    assert not os.path.lexists(store.handoff_dir(header.session_id))


@pytest.mark.parametrize("make", [_fifo, _link_to_dev_zero, _link_loop, _directory], ids=lambda f: f.__name__)
def test_an_odd_index_file_never_blocks_a_listing(
    store: SessionStore, tmp_path: Path, make: Callable[[Path, Path], None]
) -> None:
    store.create(_header()).close()
    store.sessions_dir.joinpath(listing.INDEX_NAME).unlink(missing_ok=True)
    make(store.sessions_dir / listing.INDEX_NAME, tmp_path)
    status, result = guarded(lambda: [s.cwd for s in store.list()[0]])
    assert (status, result) == ("ok", ["/work/proj"])


# --- long lines ---------------------------------------------------------------------------------------------


def test_the_cap_holds_whatever_the_wire_accepts() -> None:
    """A prompt as long as ACP's line cap is stored as one line of about that size, and must load back."""
    assert MAX_LINE_BYTES > WIRE_MAX_LINE


def _session_bytes(*lines: bytes) -> bytes:
    header = msgspec.json.encode(_header())
    return b"\n".join((header, *lines)) + b"\n"


def test_a_line_past_the_cap_is_skipped_as_damaged_and_never_held(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cap = 1 << 20
    before = msgspec.json.encode(_user("before"))
    huge = msgspec.json.encode(_user("x" * (24 << 20)))  # 24 MiB: a valid entry, but past this cap
    after = msgspec.json.encode(_user("after"))
    data = _session_bytes(before, huge, after)
    chunk = 1 << 20
    caplog.set_level(logging.WARNING, logger="ama_acp.session.store.reader")
    tracemalloc.start()
    try:
        loaded = decode_session((data[i : i + chunk] for i in range(0, len(data), chunk)), tmp_path / "f", cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [first_text(m) for m in loaded.messages] == ["before", "after"]
    assert loaded.skipped_lines == 1 and not loaded.torn_tail
    assert peak < 6 * chunk, f"peak {peak} bytes: the long line was held"
    assert any("longer than" in r.getMessage() for r in caplog.records)
    # An overlong first line is no header; an overlong torn tail is a torn tail.
    with pytest.raises(SessionFormatError, match="first line is longer"):
        decode_session([b"{" * (3 * cap)], tmp_path / "f", cap)
    torn = decode_session([_session_bytes(before), b"y" * (3 * cap)], tmp_path / "f", cap)
    assert torn.torn_tail and len(torn.messages) == 1


def test_the_listing_skips_a_title_past_the_cap(tmp_path: Path) -> None:
    good = msgspec.json.encode(TitleEntry(title="good"))
    long = msgspec.json.encode(TitleEntry(title="z" * 5000))
    scan = scan_chunks([good + b"\n" + long + b"\n"], max_line=1000)
    assert scan.title is not None and scan.title.title == "good"


def test_the_writer_refuses_a_line_that_would_never_read_back(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_mod, "MAX_LINE_BYTES", 4096)
    with store.create(_header()) as writer:
        writer.append(_user("fits"))
        with pytest.raises(SessionWriteError, match="longer than the 4096"):
            writer.append(_user("x" * 5000))


def _one_long_line_session(store: SessionStore, size: int) -> str:
    """A session whose one message line is `size` bytes, then a title and a turn."""
    header = _header()
    with store.create(header) as writer:
        writer.append(_user("x" * size))
        writer.append(TitleEntry(title="after the long line"))
        writer.append(TurnEntry(stop_reason="end_turn"))
    return header.session_id


def test_one_fifty_megabyte_line_lists_and_loads_in_linear_time(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing scanner used to copy the whole line seen so far at every chunk (quadratic): a 200 MB line
    blocked for 13 s. Small chunks magnify any such copy (50 MB in 64 KiB chunks would copy ~20 GB); a
    linear scan takes well under a second even on a loaded machine, so the bound below is generous."""
    monkeypatch.setattr(listing, "_CHUNK", 1 << 16)
    monkeypatch.setattr(reader_mod, "_READ_CHUNK", 1 << 16)
    sid = _one_long_line_session(store, 50_000_000)
    started = time.perf_counter()
    page, _ = in_thread(lambda: store.list())
    listed = time.perf_counter() - started
    assert page[0].title == "after the long line"
    started = time.perf_counter()
    loaded = in_thread(lambda: store.read(sid))
    read = time.perf_counter() - started
    assert len(first_text(loaded.messages[0])) == 50_000_000
    assert listed < 4.0 and read < 4.0, (listed, read)


def test_a_fifty_megabyte_header_line_is_read_in_linear_time(store: SessionStore, tmp_path: Path) -> None:
    """open_writer's header read used to grow a bytes object 64 KiB at a time (quadratic)."""
    header = _header(cwd="/w" + "d" * 50_000_000)
    store.create(header).close()
    started = time.perf_counter()
    in_thread(lambda: store.open_writer(header.session_id).close())
    took = time.perf_counter() - started
    assert took < 4.0, took
    path = tmp_path / "line"
    path.write_bytes(b"a" * 50_000_000 + b"\nrest")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert first_line(fd, 60_000_000) == b"a" * 50_000_000
        assert first_line(fd, 1000) is None  # longer than the limit
    finally:
        os.close(fd)


# --- the scanners give the same result however the file is cut ---------------------------------------------

CAP = 200  # small, so that lines past it are cheap to make

_line = st.one_of(
    st.builds(lambda t: msgspec.json.encode(_user(t)), st.text(max_size=30)),
    st.builds(lambda t: msgspec.json.encode(TitleEntry(title=t)), st.text(max_size=30)),
    st.builds(
        lambda d: msgspec.json.encode(DirectoriesEntry(additional_directories=d)),
        st.lists(st.text(max_size=8), max_size=3),
    ),
    st.builds(
        lambda t: b'{"t":"title","title":' + t.encode().replace(b"\n", b"")[:20], st.text(max_size=10)
    ),  # corrupt title
    st.builds(lambda t: b'{"t":"dirs",' + t, st.binary(max_size=10).filter(lambda b: b"\n" not in b)),  # corrupt dirs
    st.builds(lambda t: msgspec.json.encode(TitleEntry(title="L" * t)), st.integers(CAP, CAP + 50)),  # past the cap
    st.builds(lambda n: b"q" * n, st.integers(0, 3 * CAP)),  # blank, junk, junk past the cap
    st.binary(max_size=40).filter(lambda b: b"\n" not in b),
)


def _cuts(data: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False)]


def _reference_scan(data: bytes) -> tuple[str | None, list[str] | None, int]:
    """Line by line, the obvious way: the last title and dirs lines within the cap that decode."""
    title = dirs = None
    end = data.rfind(b"\n") + 1
    for line in data[:end].split(b"\n")[:-1]:
        if len(line) > CAP:
            continue
        try:
            if line.startswith(b'{"t":"title",'):
                title = msgspec.json.decode(line, type=TitleEntry).title
            elif line.startswith(b'{"t":"dirs",'):
                dirs = list(msgspec.json.decode(line, type=DirectoriesEntry).additional_directories)
        except msgspec.DecodeError:
            pass
    return title, dirs, end


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_line, max_size=12),
    tail=st.binary(max_size=30),
    points=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_the_listing_scanner_is_the_same_however_the_file_is_cut(
    lines: list[bytes], tail: bytes, points: list[int]
) -> None:
    data = b"".join(line + b"\n" for line in lines) + tail.replace(b"\n", b"")
    scan = scan_chunks(_cuts(data, points), CAP)
    got = (scan.title.title if scan.title else None, list(scan.dirs.additional_directories) if scan.dirs else None)
    title, dirs, end = _reference_scan(data)
    assert got == (title, dirs) and scan.consumed == end


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_line, max_size=12),
    tail=st.binary(max_size=30),
    points=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_the_reader_is_the_same_however_the_file_is_cut(lines: list[bytes], tail: bytes, points: list[int]) -> None:
    data = _session_bytes(*lines) + tail.replace(b"\n", b"")
    whole = decode_session([data], Path("f"), CAP)
    cut = decode_session(_cuts(data, points), Path("f"), CAP)
    assert msgspec.json.encode(cut) == msgspec.json.encode(whole)
    decodable = [line for line in lines if line and len(line) <= CAP and _decodes(line)]
    assert len(whole.entries) == len(decodable)
    assert whole.skipped_lines == sum(1 for line in lines if line) - len(decodable)


def _decodes(line: bytes) -> bool:
    try:
        reader_mod._entry_decoder.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return False
    return True


# --- one process's open session cannot be deleted by another -----------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys
    from ama_acp.redact import Redactor
    from ama_acp.session.store.entries import Header
    from ama_acp.session.store.session_store import SessionStore
    store = SessionStore(sys.argv[1], redactor=Redactor(), fsync="never")
    writer = store.create(Header(session_id=sys.argv[2], cwd="/p"))
    print("ready", flush=True)
    sys.stdin.read()  # until the test closes our stdin
    writer.close()
    """
)


def test_a_session_open_in_another_process_is_not_deleted(store: SessionStore, tmp_path: Path) -> None:
    sid = new_session_id()
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path), sid],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        folder = store.handoff_dir(sid)
        folder.mkdir()
        with pytest.raises(SessionBusy) as busy:
            store.delete(sid)
        assert busy.value.pid == child.pid and f"pid {child.pid}" in str(busy.value)
        assert "another ama process" in str(busy.value)
        assert store.path(sid).is_file() and folder.is_dir()  # nothing removed
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    store.delete(sid)  # closed there: now it goes
    assert not store.path(sid).exists()


def test_a_writer_of_another_store_in_this_process_also_holds_the_session(store: SessionStore, tmp_path: Path) -> None:
    """flock is per open file description: a second store (its own descriptor) is refused like a process."""
    header = _header()
    other = SessionStore(tmp_path, redactor=Redactor(), fsync="never")
    with other.create(header):
        with pytest.raises(SessionBusy) as busy:
            store.delete(header.session_id)
        assert busy.value.pid == os.getpid() and "this process" in str(busy.value)
        assert store.path(header.session_id).is_file()
    store.delete(header.session_id)


# --- a writer notices its file gone ------------------------------------------------------------------------


def test_a_writer_notices_its_file_deleted_at_the_next_turn(store: SessionStore) -> None:
    header = _header()
    writer = store.create(header)
    writer.append(_user("one"))
    writer.append(TurnEntry(stop_reason="end_turn"))
    os.unlink(store.path(header.session_id))
    with pytest.raises(SessionWriteError, match="deleted by another program"):
        writer.append(_user("two"))
    writer.close()


def test_a_writer_notices_its_file_replaced(store: SessionStore) -> None:
    header = _header()
    writer = store.create(header)
    writer.append(TurnEntry(stop_reason="end_turn"))
    path = store.path(header.session_id)
    os.unlink(path)
    path.write_text("another file\n")
    with pytest.raises(SessionWriteError, match="replaced it"):
        writer.append(_user("two"))
    writer.close()


def test_a_writer_checks_within_a_bounded_number_of_appends(store: SessionStore) -> None:
    """A turn without end (thousands of tool calls) still finds out, after at most CHECK_EVERY appends."""
    header = _header()
    writer = store.create(header)
    writer.append(_user("first"))
    os.unlink(store.path(header.session_id))
    with pytest.raises(SessionWriteError, match="deleted"):
        for _ in range(writer.CHECK_EVERY + 1):
            writer.append(_user("more"))
    writer.close()


def test_open_writer_after_a_delete_is_not_found(store: SessionStore) -> None:
    header = _header()
    store.create(header).close()
    store.delete(header.session_id)
    with pytest.raises(SessionNotFound):
        store.open_writer(header.session_id)
    with pytest.raises(NotASessionFile):  # and a directory put in its place is named as such
        store.path(header.session_id).mkdir()
        store.read(header.session_id)
