"""Property-based fuzzing of the JSON-RPC boundary, line by line (RawAma: ama's server in-process behind byte
pipes; AMA_TEST_PROCESSES=1 makes it the real process over OS pipes).

Each test starts ONE `ama --mode acp --model scripted/demo` and feeds it hypothesis-generated batches
of messages, one surface per test: (a) every ACP method's params, random and near-valid; (b) responses and
notifications sent to ama; (c) raw byte lines. After each batch a sentinel request is sent and the answers
are collected until everything owed has arrived, checking:

- every request (a method and a string/int64 id; ids are unique over the whole test) gets exactly one
  response with that id; a line that deserves an error without a usable id gets exactly one with id null;
  notifications and responses get nothing — an answer nobody is owed fails the example that receives it;
- every line ama writes is valid JSON-RPC and, where RawAma knows the method, valid against the schema;
- ama stays alive, and after the examples a normal session/new + session/prompt turn works.

`AMA_FUZZ_EXAMPLES` sets the number of examples per test (default 300 under the `ci` hypothesis profile, a
quarter under `dev`: tests/support/hypothesis_profiles.py; at 300 the file runs in about 30 s on 2 cores).
Hypothesis prints the failing example and how to reproduce it.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import queue
import time
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp.rpc.dispatch import MAX_DEPTH
from tests.support.harness import Ama
from tests.support.hypothesis_profiles import examples
from tests.support.raw import RawAma

EXAMPLES = int(os.environ.get("AMA_FUZZ_EXAMPLES") or examples(300))
STEP = 15.0  # seconds to wait for what an example is owed; it takes milliseconds
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
INT64 = (-(2**63), 2**63 - 1)

# --- values ----------------------------------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
valid_ids = st.integers(*INT64) | st.text(max_size=12)
any_ids = json_values | st.integers()
UNKNOWN_SESSION = st.sampled_from(["ses_nope", "", "ses_" + "x" * 40]) | st.text(max_size=16)
text_block = st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=20)})


@st.composite
def _mutated(draw: st.DrawFn, valid: st.SearchStrategy[dict[str, Any]]) -> Any:
    params = dict(draw(valid))
    how = draw(st.sampled_from(["keep", "delete", "retype", "add"]))
    if how == "delete" and params:
        params.pop(draw(st.sampled_from(sorted(params))))
    elif how == "retype" and params:
        params[draw(st.sampled_from(sorted(params)))] = draw(json_values)
    elif how == "add":
        params[draw(st.text(max_size=10))] = draw(json_values)
    return params


def near_valid(valid: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """Valid params, or the same with one field deleted, retyped or added. (The composite is defined once, at
    import: hypothesis reads a composite function's source each time one is defined.)"""
    return _mutated(valid)


def cwds(workspace: str) -> st.SearchStrategy[str]:
    """Never an absolute path outside the test's tmp dir: a session there could write files."""
    relative = st.text(max_size=12).filter(lambda s: not s.startswith("/"))
    return st.sampled_from([workspace, workspace + "/missing", workspace + "/../ws"]) | relative


def method_params(workspace: str, real_sid: str) -> dict[str, st.SearchStrategy[Any]]:
    sid = UNKNOWN_SESSION
    safe_sid = UNKNOWN_SESSION | st.just(real_sid)  # only methods that cannot start a turn or end the session
    mcp: st.SearchStrategy[list[Any]] = st.lists(json_values, max_size=2) | st.just([])
    return {
        "initialize": st.fixed_dictionaries(
            {"protocolVersion": st.integers(0, 3) | json_values},
            optional={"clientCapabilities": json_values, "clientInfo": json_values},
        ),
        "authenticate": st.fixed_dictionaries({"methodId": st.text(max_size=10)}),
        "session/new": st.fixed_dictionaries({"cwd": cwds(workspace), "mcpServers": mcp}),
        "session/load": st.fixed_dictionaries({"sessionId": sid, "cwd": cwds(workspace), "mcpServers": mcp}),
        "session/resume": st.fixed_dictionaries({"sessionId": sid, "cwd": cwds(workspace)}),
        "session/list": st.fixed_dictionaries({}, optional={"cwd": cwds(workspace), "cursor": st.text(max_size=10)}),
        "session/close": st.fixed_dictionaries({"sessionId": sid}),
        "session/delete": st.fixed_dictionaries({"sessionId": sid}),
        "session/prompt": st.fixed_dictionaries({"sessionId": sid, "prompt": st.lists(text_block | json_values)}),
        "session/cancel": st.fixed_dictionaries({"sessionId": safe_sid}),
        "session/set_mode": st.fixed_dictionaries(
            {"sessionId": safe_sid, "modeId": st.sampled_from(["manual", "read_only", "yolo"])}
        ),
        "session/set_config_option": st.fixed_dictionaries(
            {
                "sessionId": safe_sid,
                "configId": st.sampled_from(["mode", "thought_level", "colour"]),
                "value": st.text(max_size=10) | st.booleans(),
            }
        ),
        "_ama/session_stats": st.fixed_dictionaries({"sessionId": safe_sid}),
        "$/cancel_request": st.fixed_dictionaries({"requestId": any_ids}),
    }


@functools.lru_cache(maxsize=8)
def method_strategies(workspace: str, real_sid: str) -> tuple[st.SearchStrategy[str], dict[str, Any]]:
    """The method strategy and each known method's params strategy, built once per test (its workspace and
    session) rather than once per example: the same strategies, so the same examples."""
    table = method_params(workspace, real_sid)
    params = {method: near_valid(shape) | json_values for method, shape in table.items()}
    return st.sampled_from(sorted(table)) | st.text(max_size=10), params


# --- what each line is owed ------------------------------------------------------------------------------------


def deeper_than(value: Any, limit: int) -> bool:
    """Whether a decoded value nests more than `limit` levels of arrays and objects (the walk stops at the first
    container past the limit: the deep lines nest up to 200,000)."""
    stack = [(value, 1)]
    while stack:
        item, d = stack.pop()
        if isinstance(item, (dict, list)):
            if d > limit:
                return True
            stack.extend((c, d + 1) for c in (item.values() if isinstance(item, dict) else item))
    return False


def is_id(value: Any) -> bool:
    return type(value) is str or (type(value) is int and INT64[0] <= value <= INT64[1])


def owed(value: Any) -> Any:
    """What ama owes a decoded message: an id (a response with it), NULL (an error with id null) or None."""
    if not isinstance(value, dict):
        return NULL
    if "method" not in value:
        return None if ("id" in value or "result" in value or "error" in value) else NULL
    if "id" not in value:
        return None  # a notification, however broken
    if value["id"] is None or not is_id(value["id"]):
        return NULL
    return ("id", value["id"])


def owed_line(line: bytes) -> Any:
    body = line[:-1] if line.endswith(b"\r") else line
    if not body.strip():
        return None  # blank lines are skipped
    try:
        value = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return NULL
    except RecursionError:
        return UNSURE
    return UNSURE if deeper_than(value, MAX_DEPTH) else owed(value)


NULL = "null"
UNSURE = "unsure"  # deep lines: an answer with the id or with null, or none for a notification, but at most one


class Wire:
    """One ama process under fuzz: sends batches and checks that exactly what is owed comes back."""

    def __init__(self, raw: RawAma) -> None:
        self.raw = raw
        self.ids = itertools.count(1_000_000)
        self.sent_ids: set[Any] = set()
        self.unsure = 0  # answers deep lines may still be owed, carried over: each gets at most one

    def fresh_id(self, draw_id: Any) -> Any:
        """Ids unique over the whole test: an int of ours, or the drawn string made unique."""
        n = next(self.ids)
        return f"{draw_id}#{n}" if isinstance(draw_id, str) else n

    def exchange(self, lines: list[bytes]) -> None:
        wanted: dict[Any, int] = {}
        nulls = 0
        for line in lines:
            due = owed_line(line)
            if isinstance(due, tuple):
                key = (type(due[1]).__name__, due[1])
                assert key not in self.sent_ids, "the generator reused an id"
                self.sent_ids.add(key)
                wanted[key] = 0
            elif due == NULL:
                nulls += 1
            elif due == UNSURE:
                self.unsure += 1
            self.raw.send_line(line)
        sentinel = next(self.ids)
        self.raw.send({"jsonrpc": "2.0", "id": sentinel, "method": "initialize", "params": {"protocolVersion": 1}})
        wanted[("int", sentinel)] = 0
        got_nulls = 0
        deadline = time.monotonic() + STEP
        while any(v == 0 for v in wanted.values()) or got_nulls < nulls:
            try:
                msg = self.raw.recv(max(0.05, deadline - time.monotonic()))
            except queue.Empty:
                missing = [k for k, v in wanted.items() if v == 0]
                raise AssertionError(f"no answer within {STEP}s to {missing}; nulls {got_nulls}/{nulls}") from None
            assert msg.get("jsonrpc") == "2.0"
            if "method" in msg:
                assert msg["method"] != "$/cancel_request", msg
                continue  # a notification or request of ama's (session updates of a real session)
            assert ("result" in msg) != ("error" in msg), msg
            rid = msg["id"]
            if rid is None:
                assert "error" in msg, msg
                if got_nulls < nulls:
                    got_nulls += 1
                else:
                    assert self.unsure > 0, f"an error with id null nobody was owed: {msg}"
                    self.unsure -= 1
                continue
            key = (type(rid).__name__, rid)
            if key not in wanted:
                assert self.unsure > 0 and key not in self.sent_ids, f"an answer nobody was owed: {msg}"
                self.unsure -= 1
                continue
            assert wanted[key] == 0, f"a second answer to {rid!r}: {msg}"
            wanted[key] = 1
        assert self.raw.alive()


@pytest.fixture
def wire(tmp_path):
    ama = Ama(tmp_path)
    raw = RawAma(ama, "--model", "scripted/demo")
    assert raw.request(1, "initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
    sid = raw.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})["result"]["sessionId"]
    yield Wire(raw), ama, sid
    # After everything: a normal turn in the same process still works (capabilities reset: a generated
    # initialize may have advertised fs or terminal, which this raw client does not serve).
    assert raw.alive()
    assert raw.request("final-init", "initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
    new = raw.request("final-new", "session/new", {"cwd": str(ama.workspace), "mcpServers": []})
    prompt = {"sessionId": new["result"]["sessionId"], "prompt": [{"type": "text", "text": "fix the bug"}]}
    raw.send({"jsonrpc": "2.0", "id": "final-prompt", "method": "session/prompt", "params": prompt})
    assert raw.response("final-prompt", timeout=60)["result"]["stopReason"] == "end_turn"
    assert raw.close() == 0
    logs = ama.stderr.read_text(encoding="utf-8", errors="replace") + ama.log_text()
    assert "UNEXPECTED" not in logs and "Traceback" not in logs


def encode(value: Any) -> bytes:
    return json.dumps(value, allow_nan=False).encode()


# --- (a) every method's params ------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_fuzz_method_params(wire, data):
    w, ama, sid = wire
    methods, table = method_strategies(str(ama.workspace), sid)
    lines = []
    for _ in range(data.draw(st.integers(1, 6), label="batch")):
        method = data.draw(methods, label="method")
        params = data.draw(table.get(method, json_values), label="params")
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if data.draw(st.booleans(), label="has params") is False:
            del msg["params"]
        if data.draw(st.integers(0, 9), label="notification") > 0:
            msg["id"] = w.fresh_id(data.draw(valid_ids, label="id"))
        lines.append(encode(msg))
    w.exchange(lines)


# --- (b) responses and notifications sent to ama -------------------------------------------------------------

responses = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0") | json_values, "id": any_ids},
    optional={
        "result": json_values,
        "error": json_values | st.fixed_dictionaries({"code": any_ids, "message": any_ids}),
    },
)
notifications = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "method": st.text(max_size=12) | st.sampled_from(["$/cancel_request", "_x/y"])},
    optional={"params": json_values},
)


@FUZZ
@given(batch=st.lists(responses | notifications, min_size=1, max_size=8))
def test_fuzz_responses_and_notifications(wire, batch):
    w, _, _ = wire
    w.exchange([encode(m) for m in batch])


# --- (c) raw byte lines ------------------------------------------------------------------------------------------


def _no_newline(b: bytes) -> bytes:
    return b.replace(b"\n", b" ")


@st.composite
def truncated(draw: st.DrawFn) -> bytes:
    msg = {"jsonrpc": "2.0", "id": draw(valid_ids), "method": "initialize", "params": draw(json_values)}
    text = encode(msg)
    return text[: draw(st.integers(0, max(0, len(text) - 1)))]


@st.composite
def deep(draw: st.DrawFn) -> bytes:
    n = draw(st.sampled_from([MAX_DEPTH + 1, 500, 999, 1000, 5000, 200_000]))
    opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}"), (b"[1,", b"]")]))
    inner = opener * n + b"0" + closer * n
    return draw(
        st.sampled_from(
            [
                inner,
                b'{"jsonrpc":"2.0","id":%d,"method":"session/new","params":%s}' % (draw(st.integers(0, 10**9)), inner),
                b'{"jsonrpc":"2.0","method":"session/cancel","params":%s}' % inner,
                b'{"jsonrpc":"2.0","id":5,"result":%s}' % inner,
            ]
        )
    )


numbers = st.sampled_from([b"1e400", b"-1e400", b"1" * 400, b"-" + b"9" * 5000, b"1.5e-400", b"0.1" + b"1" * 50])
constants = st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"nan", b"undefined"])


@st.composite
def with_odd_value(draw: st.DrawFn) -> bytes:
    value = draw(numbers | constants)
    where = draw(st.sampled_from(["id", "params", "result"]))
    if where == "id":
        return b'{"jsonrpc":"2.0","id":%s,"method":"initialize","params":{"protocolVersion":1}}' % value
    if where == "params":
        return b'{"jsonrpc":"2.0","id":"odd","method":"initialize","params":{"protocolVersion":%s}}' % value
    return b'{"jsonrpc":"2.0","id":3,"result":%s}' % value


raw_lines = (
    st.binary(max_size=60).map(_no_newline)
    | truncated()
    | deep()
    | with_odd_value()
    | st.sampled_from([b"\xff\xfe", b'{"a":"\xc3\x28"}', b'"\xed\xa0\x80"', b"\xef\xbb\xbf{}", b"{}\r", b"[]", b"   "])
)


@FUZZ
@given(data=st.data())
def test_fuzz_raw_lines(wire, data):
    w, _, _ = wire
    lines = []
    for _ in range(data.draw(st.integers(1, 5), label="batch")):
        line = data.draw(raw_lines, label="line")
        if b'"id":"odd"' in line:  # ids must stay unique over the test
            line = line.replace(b'"id":"odd"', b'"id":"odd#%d"' % next(w.ids))
        if line.startswith(b'{"jsonrpc":"2.0","id":') and b'"method":"session/new"' in line:
            req_id = next(w.ids)
            w.raw.methods[req_id] = "session/new"  # too deep for RawAma to read the id itself
            line = b'{"jsonrpc":"2.0","id":%d' % req_id + line[line.index(b',"method"') :]
        lines.append(line)
    w.exchange(lines)
