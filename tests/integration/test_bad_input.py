"""Bad input gets a clear JSON-RPC error, loses nothing, and the server keeps serving (issue 2, point 2)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.harness import Ama, write_script
from tests.support.raw import RawAma


def serving(tmp_path: Path, process: bool = False) -> tuple[RawAma, Ama]:
    ama = Ama(tmp_path)
    raw = RawAma(ama, "--model", "scripted/demo", process=process)
    assert raw.request(1, "initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
    return raw, ama


@pytest.fixture
def server(tmp_path):
    """ama's server in-process (tests/support/raw.py); the tests of the process's own exit start one."""
    raw, ama = serving(tmp_path)
    yield raw, ama
    if raw.alive():
        raw.close()


def still_serving(raw: RawAma, req_id: int) -> None:
    assert raw.request(req_id, "initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1


def test_parse_error_has_null_id_and_server_keeps_serving(server):
    raw, _ = server
    raw.send_line(b'{"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {')
    err = raw.recv()
    assert err["id"] is None and err["error"]["code"] == -32700
    raw.send_line(b"\xff\xfe not utf-8")
    assert raw.recv()["error"]["code"] == -32700
    still_serving(raw, 2)


def test_invalid_request_object(server):
    raw, _ = server
    raw.send_line(b'{"jsonrpc": "1.0", "id": 7, "method": "initialize"}')
    assert raw.recv()["error"]["code"] == -32600
    raw.send_line(b'{"jsonrpc": "2.0", "id": 8, "method": 42}')
    assert raw.recv()["error"]["code"] == -32600
    still_serving(raw, 3)


def test_unknown_method_and_unknown_extension(server):
    raw, _ = server
    assert raw.request(9, "session/frobnicate", {})["error"]["code"] == -32601
    assert raw.request(10, "_other/thing", {})["error"]["code"] == -32601
    raw.send({"jsonrpc": "2.0", "method": "_other/notice", "params": {}})  # R16: ignored, no answer
    raw.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}})  # R114
    still_serving(raw, 4)


def test_invalid_params_name_the_field(server):
    raw, ama = server
    err = raw.request(11, "session/new", {"mcpServers": []})["error"]
    assert err["code"] == -32602 and "cwd" in err["message"]
    err = raw.request(12, "session/new", {"cwd": "relative/dir", "mcpServers": []})["error"]
    assert err["code"] == -32602 and "cwd" in err["message"] and "absolute" in err["message"]
    err = raw.request(13, "session/new", {"cwd": str(ama.workspace), "mcpServers": "x"})["error"]
    assert err["code"] == -32602 and "mcpServers" in err["message"]
    err = raw.request(14, "initialize", {"protocolVersion": "1"})["error"]
    assert err["code"] == -32602 and "protocolVersion" in err["message"]
    still_serving(raw, 5)


def test_unknown_session_is_resource_not_found(server):
    raw, _ = server
    err = raw.request(15, "session/prompt", {"sessionId": "ses_nope", "prompt": [{"type": "text", "text": "hi"}]})
    assert err["error"]["code"] == -32002 and "ses_nope" in err["error"]["message"]
    err = raw.request(16, "session/set_mode", {"sessionId": "ses_nope", "modeId": "manual"})
    assert err["error"]["code"] == -32002


def test_bad_mode_and_config_values(server):
    raw, ama = server
    sid = raw.request(17, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})["result"]["sessionId"]
    err = raw.request(18, "session/set_mode", {"sessionId": sid, "modeId": "yolo"})["error"]
    assert err["code"] == -32602 and "yolo" in err["message"]
    err = raw.request(19, "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "nope/x"})
    assert err["error"]["code"] == -32602
    err = raw.request(20, "session/set_config_option", {"sessionId": sid, "configId": "colour", "value": "red"})
    assert err["error"]["code"] == -32602 and "colour" in err["error"]["message"]


@pytest.mark.parametrize("size", [70 * 1024, 10 * 1024 * 1024])
def test_long_lines_work(tmp_path, size):
    """A 70 KiB and a 10 MiB prompt line are read whole (framing has no small line limit)."""
    ama = Ama(tmp_path)
    script = write_script(tmp_path / "echo.json", [{"text": "ok", "usage": {"input": 10, "output": 1}}])
    raw = RawAma(ama, "--model", "scripted/echo", env={"AMA_SCRIPT": str(script)})
    raw.request(1, "initialize", {"protocolVersion": 1})
    sid = raw.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})["result"]["sessionId"]
    big = "a" * size
    resp = raw.request(3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": big}]})
    assert resp["result"]["stopReason"] == "end_turn"
    assert raw.close() == 0


def test_second_prompt_on_busy_session_is_refused(tmp_path):
    ama = Ama(tmp_path)
    script = write_script(tmp_path / "slow.json", [{"text": "slow", "hang": 3}, {"text": "next"}])
    raw = RawAma(ama, "--model", "scripted/slow", env={"AMA_SCRIPT": str(script)})
    raw.request(1, "initialize", {"protocolVersion": 1})
    sid = raw.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})["result"]["sessionId"]
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "one"}]},
        }
    )
    err = raw.request(4, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "two"}]})
    assert err["error"]["code"] == -32010 and "already running" in err["error"]["message"]
    # $/cancel_request on the running prompt answers it with the cancelled stop reason (R25).
    raw.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 3}})
    assert raw.response(3, timeout=2)["result"]["stopReason"] == "cancelled"
    raw.close()


def test_stdin_eof_exits_cleanly_within_a_second(tmp_path):
    raw, _ = serving(tmp_path, process=True)  # the process's exit is what is tested
    start = time.monotonic()
    assert raw.close(timeout=3) == 0
    assert time.monotonic() - start < 1.0


def start_a_hanging_turn(tmp_path: Path) -> tuple[Ama, RawAma, str, dict[str, str]]:
    """An `ama --mode acp` process in the middle of streaming a reply that never finishes."""
    ama = Ama(tmp_path)
    env = {"AMA_SCRIPT": str(write_script(tmp_path / "slow.json", [{"text": "partial answer", "hang": 30}]))}
    raw = RawAma(ama, "--model", "scripted/slow", env=env, process=True)
    raw.request(1, "initialize", {"protocolVersion": 1})
    sid = raw.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})["result"]["sessionId"]
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "one"}]},
        }
    )
    while raw.recv().get("params", {}).get("update", {}).get("sessionUpdate") != "agent_message_chunk":
        pass
    return ama, raw, sid, env


def assert_loads_in_a_new_ama(ama: Ama, sid: str, env: dict[str, str]) -> None:
    """The session file the process left loads in a new ama (in-process: a load reads only the file)."""
    again = RawAma(ama, "--model", "scripted/slow", env=env)
    again.request(1, "initialize", {"protocolVersion": 1})
    loaded = again.request(2, "session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
    assert "result" in loaded
    again.close()


def test_stdin_eof_during_a_turn_exits_within_a_second_and_the_session_loads(tmp_path):
    ama, raw, sid, env = start_a_hanging_turn(tmp_path)
    start = time.monotonic()
    assert raw.close(timeout=3) == 0
    assert time.monotonic() - start < 1.0
    assert_loads_in_a_new_ama(ama, sid, env)


def test_sigterm_during_a_turn_exits_cleanly_and_the_session_loads(tmp_path):
    import signal

    ama, raw, sid, env = start_a_hanging_turn(tmp_path)
    raw.proc.send_signal(signal.SIGTERM)
    assert raw.proc.wait(3) == 0
    assert "Traceback" not in ama.stderr.read_text()
    assert_loads_in_a_new_ama(ama, sid, env)


def test_a_storm_of_junk_lines_never_kills_the_server(tmp_path):
    """Random bytes, wrong shapes and wrong types: every request-looking line gets an answer, nothing crashes."""
    import random

    rng = random.Random(1234)
    ama = Ama(tmp_path)
    raw = RawAma(ama, "--model", "scripted/demo")
    raw.request(1, "initialize", {"protocolVersion": 1})
    shapes: list[Callable[[], bytes]] = [
        lambda: bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 200))).replace(b"\n", b" "),
        lambda: (
            b'{"jsonrpc": "2.0", "id": %d, "method": "session/prompt", "params": %s}'
            % (rng.randrange(10**6), rng.choice([b"[]", b"null", b'{"sessionId": 5}', b'{"prompt": "x"}', b"7"]))
        ),
        lambda: b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "initialize"}',
        lambda: b"[" + b",".join([b'{"jsonrpc": "2.0", "method": "x"}'] * rng.randrange(0, 3)) + b"]",
        lambda: b'{"jsonrpc": "2.0", "result": {}, "id": 424242}',  # a response to nothing we asked
        lambda: b'{"jsonrpc": "2.0", "method": "session/new", "id": 9, "params": {"cwd": "/", "mcpServers": [1]}}',
    ]
    raw.validate = False  # the answers to junk ids are checked for shape below, not per method
    for _ in range(300):
        raw.send_line(rng.choice(shapes)())
    raw.send({"jsonrpc": "2.0", "id": 7777, "method": "initialize", "params": {"protocolVersion": 1}})
    answers = []
    while True:
        msg = raw.recv()
        if msg.get("id") == 7777:
            break
        answers.append(msg)
    assert all(m.get("jsonrpc") == "2.0" and ("error" in m) != ("result" in m) for m in answers)
    raw.validate = True
    assert raw.request(99999, "initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
    assert raw.alive()
    assert raw.close() == 0
