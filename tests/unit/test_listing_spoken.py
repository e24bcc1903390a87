"""The listing's `spoken` flag (issue 25: session/list shows only sessions someone spoke in): a whole `msg` or
`command` line in the file, found the same however the reads cut it, and remembered by the index."""

from __future__ import annotations

from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp.conversation.messages import TextPart, UserMessage
from ama_acp.session.store.entries import CommandEntry, MessageEntry, ModelEntry, TitleEntry
from ama_acp.session.store.listing import scan_chunks
from tests.support.hypothesis_profiles import examples

CAP = 200

_line = st.one_of(
    st.builds(
        lambda t: msgspec.json.encode(MessageEntry(message=UserMessage(content=[TextPart(t)]))), st.text(max_size=30)
    ),
    st.builds(lambda t: msgspec.json.encode(CommandEntry(text=t)), st.text(max_size=30)),
    st.builds(lambda t: msgspec.json.encode(TitleEntry(title=t)), st.text(max_size=30)),
    st.builds(lambda t: msgspec.json.encode(ModelEntry(model_id=t)), st.text(max_size=30)),
    st.builds(lambda n: b'{"t":"msg",' + b"x" * n, st.integers(0, 3 * CAP)),  # a message line past the cap: a line
    st.just(b'{"t":"msg"'),  # not the marker
    st.binary(max_size=40).filter(lambda b: b"\n" not in b),
)


def _cuts(data: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False)]


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_line, max_size=10),
    tail=st.binary(max_size=30),
    points=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_spoken_is_the_same_however_the_file_is_cut(lines: list[bytes], tail: bytes, points: list[int]) -> None:
    data = b"".join(line + b"\n" for line in lines) + tail.replace(b"\n", b"")
    # Every line before the tail is whole; the tail (no newline) never counts.
    want = any(line.startswith((b'{"t":"msg",', b'{"t":"command",')) for line in lines)
    assert scan_chunks(_cuts(data, points), CAP).spoken is want


def test_a_torn_message_line_is_not_spoken() -> None:
    """A prompt's line cut short by a crash (no newline) is no line: the session was not spoken in yet."""
    assert scan_chunks([b'{"t":"model","model_id":"m","at":"x"}\n{"t":"msg","message":'], CAP).spoken is False


def test_additional_directories_take_the_same_spelling_as_the_cwd(tmp_path: Path) -> None:
    """`/x/proj/` beside the cwd `/x/proj` is the cwd again, not a second root; `/x/other/` is `/x/other`."""
    from ama_acp.config import Config
    from ama_acp.session.manager import SessionManager
    from tests.support.inprocess import ScriptedPeer

    (tmp_path / "proj").mkdir()
    (tmp_path / "other").mkdir()
    manager = SessionManager(
        Config(data_dir=str(tmp_path / "data")), peer=ScriptedPeer(), default_model="scripted/test"
    )
    cwd = str(tmp_path / "proj")
    got = manager.check_dirs(cwd, [cwd + "/", str(tmp_path / "other") + "/", str(tmp_path / "other")])
    assert got == [str(tmp_path / "other")]


def test_a_session_opened_without_session_new_takes_the_normal_spelling_too(tmp_path: Path) -> None:
    """`ama -p` builds its session with `SessionManager.new_session`: `/x/proj/` is stored, and lives, as `/x/proj`."""
    from ama_acp.session.store.session_store import SessionStore
    from tests.support.inprocess import make_manager

    (tmp_path / "proj").mkdir()
    manager, _peer = make_manager(tmp_path, [{"text": "ok"}])
    session = manager.new_session(str(tmp_path / "proj") + "/", None, [])
    assert session.cwd == str(tmp_path / "proj")
    header = SessionStore(str(tmp_path / "data")).read(session.id).header
    assert header.cwd == str(tmp_path / "proj")
