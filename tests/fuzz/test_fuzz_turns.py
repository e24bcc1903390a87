"""Whole turns with generated tool calls, line by line (RawAma, in-process unless AMA_TEST_PROCESSES=1): the
model (a strict HTTP model server) asks for any tool with any arguments, the person answers any way (reject,
cancel, a malformed answer, allow for calls that cannot harm), in any mode. The tool fuzzer (test_fuzz_tools.py) runs the tools alone; this one
runs them through the loop, the approver, the permission memory and the session file as ama does.

Invariants per example: the prompt answers exactly once with `end_turn` or `cancelled`; every tool call
shown gets a final status; the model server never saw a dangling tool call; ama lives; and (checked
by tests/conftest.py at the end) ama logged no traceback. AMA_FUZZ_EXAMPLES sets the count
(default 150 under the `ci` hypothesis profile, a quarter under `dev`).
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.test_fuzz_tools import TOOLS, calls
from tests.support.harness import Ama, local_config
from tests.support.hypothesis_profiles import examples
from tests.support.llm_server import LLMServer
from tests.support.raw import RawAma

EXAMPLES = int(os.environ.get("AMA_FUZZ_EXAMPLES") or examples(150))
KEY = {"LOCAL_TEST_KEY": "k" * 12}
# What the person may allow without harm: reads, searches and the fuzzer's harmless commands (their `cwd`
# may be anywhere; `true` in /etc changes nothing). Edits are never allowed here: they could land outside.
SAFE_TO_ALLOW = {"read", "search", "execute", "think", "fetch"}

answers = st.sampled_from(["allow_once", "allow_always", "reject_once", "reject_always", "cancelled", "junk"])


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("turns")
    ama = Ama(tmp)
    ws = ama.workspace
    (ws / "sub").mkdir()
    (ws / "a.txt").write_text("alpha\nbeta\n")
    (ws / "sub" / "b.py").write_text("print('b')\n")
    os.mkfifo(ws / "pipe")
    (ws / "zero").symlink_to("/dev/zero")
    # A name that is not UTF-8: listings and searches hand it on as the OS gives it (surrogate escapes).
    with open(os.path.join(os.fsencode(ws), b"bad-\xff.txt"), "wb") as fh:
        fh.write(b"alpha in a badly named file\n")
    (tmp / "outside").mkdir()
    (tmp / "outside" / "x").write_text("outside\n")
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url, window=1_000_000, tail="[compaction]\nenabled = false\n"))
        raw = RawAma(ama, env=KEY)
        raw.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        try:
            yield raw, llm, ama
        finally:
            raw.close()


def _answer(choice: str, kind: str) -> Any:
    if choice == "cancelled":
        return {"outcome": {"outcome": "cancelled"}}
    if choice == "junk":
        return {"outcome": "selected"}
    if choice.startswith("allow") and kind not in SAFE_TO_ALLOW:
        choice = "reject_once"
    return {"outcome": {"outcome": "selected", "optionId": choice}}


_ids = iter(range(1000, 10**9))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    batch=st.lists(calls, min_size=1, max_size=3),
    mode=st.sampled_from(["manual", "accept_edits", "plan", "read_only"]),
    choices=st.lists(answers, min_size=3, max_size=3),
)
def test_any_tool_call_in_any_mode_with_any_answer_keeps_the_session_usable(agent, batch, mode, choices):
    raw, llm, ama = agent
    # A session an example, closed after it, and the server's record cleared: thousands of examples must
    # not grow one conversation (every request resends it) or the recorded requests without bound.
    llm.clear()
    llm.requests.clear()
    new = raw.request(next(_ids), "session/new", {"cwd": str(ama.workspace), "mcpServers": []})
    sid = new["result"]["sessionId"]
    raw.request(next(_ids), "session/set_mode", {"sessionId": sid, "modeId": mode})
    tool_calls = [{"id": f"f{next(_ids)}", "name": name, "arguments": args} for name, args in batch]
    llm.enqueue({"tool_calls": tool_calls, "chunk_size": 1 << 20}, {"text": "done"})
    prompt_id = next(_ids)
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": prompt_id,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
        }
    )
    shown: set[str] = set()
    final: set[str] = set()
    asked = 0
    deadline = time.monotonic() + 60
    while True:
        msg = raw.recv(max(0.1, deadline - time.monotonic()))
        if msg.get("method") == "session/request_permission":
            kind = msg["params"]["toolCall"].get("kind", "other")
            answer = _answer(choices[min(asked, len(choices) - 1)], kind)
            asked += 1
            raw.send({"jsonrpc": "2.0", "id": msg["id"], "result": answer})
            continue
        if msg.get("method") == "session/update":
            update = msg["params"]["update"]
            if update["sessionUpdate"] == "tool_call":
                shown.add(update["toolCallId"])
            elif update["sessionUpdate"] == "tool_call_update" and update.get("status") in ("completed", "failed"):
                final.add(update["toolCallId"])
            continue
        if "method" not in msg and msg.get("id") == prompt_id:
            break
    assert "result" in msg, msg
    assert msg["result"]["stopReason"] in ("end_turn", "cancelled")
    assert shown <= final, f"tool calls left without a final status: {shown - final}"
    assert llm.rejections == [], llm.rejections[-1][1]
    assert raw.alive()
    assert all(name in TOOLS for name, _ in batch)
    assert "result" in raw.request(next(_ids), "session/close", {"sessionId": sid})
