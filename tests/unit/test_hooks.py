"""`[[hooks]]` entries decoded as hostile input (shaping/hooks.py), and one hook run for real with whatever bytes
it prints (shaping/hook_process.py, hook_points.py)."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.config import load_config
from ama_acp.shaping.hook_points import MAX_CONTEXT_CHARS, SessionHooks
from ama_acp.shaping.hook_process import MAX_STREAM_BYTES, run_hook
from ama_acp.shaping.hooks import EVENTS, KEYS, MAX_TIMEOUT, Hook, HookError, config_hooks, decode
from tests.support.hypothesis_profiles import examples

# What a TOML table can hold.
SCALARS = (
    st.text(max_size=40)
    | st.integers()
    | st.floats()
    | st.booleans()
    | st.datetimes()
    | st.dates()
    | st.times()
    | st.sampled_from([*EVENTS, "pre_tool ", "run_*", "[", "{a,", "**", "\0"])
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
)
ENTRIES = st.dictionaries(st.sampled_from([*KEYS, "name", "Event"]), VALUES, max_size=5) | VALUES


@given(ENTRIES)
@settings(max_examples=examples(500))
def test_the_decoder_raises_nothing_but_its_own_error(entry: object) -> None:
    try:
        hook = decode(entry, "here")
    except HookError as exc:
        assert str(exc)
        return
    assert hook.event in EVENTS and 0 < hook.timeout <= MAX_TIMEOUT
    assert hook.command if isinstance(hook.command, str) else hook.command[0]
    assert isinstance(hook.matches("run_command"), bool)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"event": "pre_tol", "command": "x"}, "event must be one of"),
        ({"event": "stop", "command": "x", "name": "n"}, "has no setting 'name'"),
        ({"event": "stop", "command": "x", "match": "*"}, "match is for the tool events"),
        ({"event": "pre_tool", "command": ""}, "command must be a shell line"),
        ({"event": "pre_tool", "command": []}, "or a program and its arguments"),
        ({"event": "pre_tool", "command": ["", "x"]}, "the first not empty"),
        ({"event": "pre_tool", "command": "x", "timeout": 0}, "timeout must be"),
        ({"event": "pre_tool", "command": "x", "timeout": 601}, "timeout must be"),
        ({"event": "pre_tool", "command": "x", "timeout": True}, "timeout must be"),
        ({"event": "pre_tool", "command": "x", "match": "a" * 300}, "match must be a glob"),
        ({"event": "pre_tool", "command": "x", "match": "{a," * 40 + "}" * 40}, "match: the glob nests"),
        ("pre_tool", "a hook is a table"),
    ],
)
def test_each_malformed_entry_says_what_is_wrong(entry: object, says: str) -> None:
    with pytest.raises(HookError) as caught:
        decode(entry)
    assert says in str(caught.value)


def test_a_match_is_a_glob_of_whole_tool_names() -> None:
    hook = decode({"event": "pre_tool", "command": ["check"], "match": "mcp__*"})
    assert hook.command == ("check",) and hook.timeout == 30
    assert hook.matches("mcp__git__status") and not hook.matches("run_command")
    assert decode({"event": "post_tool", "command": "x"}).matches("anything")  # no match: every tool


def test_bad_entries_are_reported_with_their_header_line_and_the_others_kept(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[[hooks]]\nevent = "stop"\ncommand = "true"\n\n# a comment\n[[hooks]]\nevent = "nope"\ncommand = "x"\n'
        '\n[[hooks]]  # the third\nevent = "pre_tool"\ncommand = ["a", "b"]\nmatch = "run_*"\ntimeout = 2.5\n'
    )
    loaded = config_hooks(load_config(str(config), str(tmp_path / "data"), env={}))
    assert [h.event for h in loaded.hooks] == ["stop", "pre_tool"]
    assert [h.where for h in loaded.hooks] == ["config.toml line 1", "config.toml line 10"]
    assert loaded.problems == [
        f"{config} (line 6): the hook is ignored: event must be one of " + ", ".join(EVENTS) + ", not 'nope'"
    ]


def test_a_config_s_hooks_are_decoded_once_not_at_every_session_s_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ama_acp import ownfiles

    config = tmp_path / "config.toml"
    config.write_text('[[hooks]]\nevent = "stop"\ncommand = "true"\n')
    cfg = load_config(str(config), str(tmp_path / "data"), env={})
    other = load_config(str(config), str(tmp_path / "data"), env={})  # the same file, another config object
    reads: list[Path] = []
    real = ownfiles.read_named

    def counted(path: Path, limit: int) -> bytes:
        reads.append(path)
        return real(path, limit)

    monkeypatch.setattr(ownfiles, "read_named", counted)
    first, second = config_hooks(cfg), config_hooks(cfg)
    assert first == second and [h.where for h in first.hooks] == ["config.toml line 1"]
    assert first.hooks is not second.hooks  # each session its own list
    assert reads == [config]  # the file read for its lines once
    config_hooks(other)  # another config: read for itself
    assert reads == [config, config]


def test_an_inline_array_names_the_entry_by_its_index(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('hooks = [{ event = "stop", command = "x" }, { event = "stop" }]\n')
    loaded = config_hooks(load_config(str(config), str(tmp_path / "data"), env={}))
    assert len(loaded.hooks) == 1 and loaded.problems[0].startswith(f"{config} (hooks[1]): the hook is ignored")


def test_a_toml_datetime_is_refused_like_any_wrong_type() -> None:
    with pytest.raises(HookError):
        decode({"event": "stop", "command": datetime.datetime(2026, 1, 1)})


def _printer(tmp_path: Path, data: bytes, code: int) -> Hook:
    out = tmp_path / "out.bin"
    out.write_bytes(data)
    return Hook("prompt_submit", f'cat "{out}"; cat "{out}" >&2; exit {code}', timeout=20)


@given(st.binary(max_size=4096) | st.sampled_from([b"\xff" * 70_000, "é".encode() * 40_000]))
@settings(max_examples=examples(30), deadline=None)
def test_any_bytes_a_hook_prints_come_back_as_bounded_text(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    tmp = tmp_path_factory.mktemp("hook")
    hook = _printer(tmp, data, 0)
    warned: list[str] = []

    async def warn(text: str) -> None:
        warned.append(text)

    async def main() -> None:
        ran = await run_hook(hook, {"event": "prompt_submit"}, str(tmp), {})
        assert ran.code == 0 and ran.stdout == ran.stderr
        kept = data[:MAX_STREAM_BYTES].decode("utf-8", "replace")
        assert ran.stdout.startswith(kept) and len(ran.stdout) <= len(kept) + 40
        submitted = await SessionHooks([hook], "s1", str(tmp), warn).prompt_submit("hi")
        assert submitted.blocked is None and not warned
        if submitted.context is not None:
            assert len(submitted.context) <= MAX_CONTEXT_CHARS + 100
            submitted.context.encode("utf-8")  # text the model can be sent

    anyio.run(main)


def test_a_hook_that_cannot_start_and_one_that_fails_are_warnings(tmp_path: Path) -> None:
    warned: list[str] = []

    async def warn(text: str) -> None:
        warned.append(text)

    async def main() -> None:
        hooks = SessionHooks(
            [
                Hook("stop", (str(tmp_path / "missing"),), where="c line 1"),
                Hook("stop", "echo broken >&2; exit 3", where="c line 4"),
                Hook("stop", (sys.executable, "-c", "raise SystemExit(2)"), where="c line 7"),  # 2 blocks nothing here
            ],
            "s1",
            str(tmp_path),
            warn,
        )
        await hooks.stop("end_turn")

    anyio.run(main)
    assert [w.split(" (")[1].split(")")[0] for w in warned] == ["c line 1", "c line 4", "c line 7"]
    assert "could not start" in warned[0] and warned[1].endswith("exited with status 3: broken")


def test_a_hook_gets_the_persons_environment_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("HOOK_TEST_PLAIN", "kept")
    seen = tmp_path / "env.txt"
    hook = Hook("stop", f'env > "{seen}"; cat > "{seen}.in"')

    async def main() -> None:
        ran = await run_hook(
            hook, {"event": "stop", "stop_reason": "end_turn"}, str(tmp_path), {"AMA_HOOK_EVENT": "stop"}
        )
        assert ran.code == 0

    anyio.run(main)
    env = seen.read_text()
    assert "HOOK_TEST_PLAIN=kept" in env and "AMA_HOOK_EVENT=stop" in env and "sk-should-not-leak" not in env
    assert (tmp_path / "env.txt.in").read_text() == '{"event": "stop", "stop_reason": "end_turn"}'


def test_what_a_hook_moved_out_of_its_group_ends_with_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    escape = f"import os, time\nif os.fork() == 0:\n    os.setsid()\n    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n    time.sleep(600)\n"
    hook = Hook("stop", (sys.executable, "-c", escape + "else:\n    time.sleep(600)\n"), timeout=1)

    async def main() -> None:
        ran = await run_hook(hook, {}, str(tmp_path), {})
        assert ran.code is None and ran.trouble == "was ended at its timeout (1 s)"

    anyio.run(main)
    state = Path(f"/proc/{pid_file.read_text()}/stat")
    assert not state.exists() or state.read_bytes().rsplit(b")", 1)[1].split()[0] == b"Z"  # gone, or a zombie
