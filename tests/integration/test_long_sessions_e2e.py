"""Long sessions over real pipes (issue 10, docs/sessions.md "Compaction"): compaction that always shrinks, on
windows from 8k to 1M; reloads after any number of compactions that send exactly the request the live session
would have sent; a handoff and an inventory that survive whole; the compaction hold across a reload.

The model is `SizedLLM`, a real HTTP server whose replies follow the conversation: a person's prompt gets a
`read_file` call, a tool result gets a short answer, a handoff request gets a handoff. Its usage figures are
measured from each request body (a quarter token a byte, times a window-dependent scale, so small texts stand
for a large context), so they grow like a real session's and shrink after a compaction.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.support.harness import Ama, agent_text, kinds, local_config, run_ama, usage_updates
from tests.support.json_values import session_id
from tests.support.llm_server import LLMServer, RecordedRequest

pytestmark = pytest.mark.anyio
ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
HANDOFF_ASK = "about to be replaced by a handoff"


def is_handoff(req: RecordedRequest) -> bool:
    messages = (req.body or {}).get("messages") or []
    return bool(messages) and HANDOFF_ASK in json.dumps(messages[-1])


class SizedLLM(LLMServer):
    """Replies chosen by the request, usage measured from it (see the module docstring)."""

    def __init__(self, scale: int = 1, handoff: str | None = None) -> None:
        super().__init__()
        self.scale = scale
        self.handoff = handoff
        self.reported: list[int] = []  # the context figures it reported (input + output)
        self.fail_handoffs = 0  # answer this many handoff requests with HTTP 500
        self._last: RecordedRequest | None = None
        self._n = 0

    def _record(self, req: RecordedRequest) -> None:
        super()._record(req)
        self._last = req

    def _next(self) -> dict[str, Any] | None:
        queued = super()._next()
        if queued is not None:
            return queued
        req = self._last
        assert req is not None and isinstance(req.body, dict)
        self._n += 1
        size = len(json.dumps(req.body)) // 4 * self.scale
        usage = {"input": size, "output": 20}
        last = req.body["messages"][-1]
        if is_handoff(req):
            if self.fail_handoffs:
                self.fail_handoffs -= 1
                return {"status": 500}
            text = self.handoff or (
                f"## 1. Goal and current state\nHandoff {self._n}: keep reading the files.\n"
                "## 8. The few files to re-read first\n- `f1.txt`\n"
            )
            return {"text": text, "usage": usage}
        self.reported.append(size + 20)
        if last.get("role") == "tool":
            return {"text": f"done {self._n}", "usage": usage}
        text = json.dumps(last.get("content"))
        path = text.split("read ", 1)[1].split(" ", 1)[0].strip('\\"') if "read " in text else "f1.txt"
        return {
            "text": "reading",
            "usage": usage,
            "tool_calls": [{"id": f"call{self._n}", "name": "read_file", "arguments": {"path": path}}],
        }

    def handoffs(self) -> int:
        return sum(1 for r in self.requests if is_handoff(r))


def configure(ama: Ama, url: str, window: int, keep: int | None = None) -> None:
    keep_line = f"keep_tokens = {keep}\n" if keep is not None else ""
    tail = f"price = {{ input = 1.0, output = 2.0 }}\n[compaction]\n{keep_line}"
    ama.config.write_text(local_config(url, window=window, tail=tail))


async def open_session(conn: AgentProcess, ama: Ama) -> tuple[str, int]:
    """A new session and its prefix figure (system prompt + tools, the first usage_update)."""
    await conn.initialize()
    sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
    return sid, usage_updates(conn, sid)[0]["used"]


async def load(conn: AgentProcess, ama: Ama, sid: str) -> None:
    await conn.initialize()
    await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))


def ask(n: int, chars: int) -> str:
    """A prompt that reads file n, padded to `chars`: the person's words are never pruned, so the context
    grows until only a compaction helps (tool results alone would be pruned first, at pruneAt)."""
    pad = "".join(f"Context note {k} for this step. " for k in range(chars // 30 + 1))
    return f"read f{n}.txt please. " + pad[:chars]


def write_files(ama: Ama, count: int, chars: int) -> None:
    for i in range(1, count + 1):
        line = f"file {i}: some content of a long file, line "
        text = "".join(f"{line}{k}\n" for k in range(chars // (len(line) + 4) + 1))
        (ama.workspace / f"f{i}.txt").write_text(text[:chars])


def compaction_entries(ama: Ama, sid: str) -> list[dict[str, Any]]:
    lines = (ama.data / "sessions" / f"{sid}.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("t") == "compaction"]


def assert_no_loop(llm: LLMServer) -> None:
    """No compaction before consecutive requests: a handoff request is never next to another one, and each is
    followed by the request it made room for."""
    flags = [is_handoff(r) for r in llm.requests]
    assert not any(a and b for a, b in zip(flags, flags[1:], strict=False)), flags


def assert_measured(conn: AgentProcess, sid: str, llm: SizedLLM) -> None:
    """Every figure is the provider's (+ trailing estimate) or an estimate: never an invented one."""
    for u in usage_updates(conn, sid):
        ama = u["_meta"]["ama"]
        assert ama["source"] in ("prefix", "usage", "estimate"), u
        if ama["source"] == "usage":
            assert ama["usageTokens"] in llm.reported, (u, llm.reported)
            assert u["used"] == ama["usageTokens"] + ama["trailingTokens"], u
        if "cost" in u:  # every request is priced here
            assert u["cost"]["amount"] >= 0 and u["cost"]["currency"] == "USD"


def body_of(req: RecordedRequest) -> dict[str, Any]:
    assert isinstance(req.body, dict)
    return {"messages": req.body["messages"], "tools": req.body.get("tools")}


async def live_next_request(ama: Ama, llm: LLMServer, sid: str, conn: AgentProcess) -> tuple[Path, dict[str, Any]]:
    """Snapshot the data (the session as a load will find it), then the next turn's first request, live."""
    snapshot = ama.tmp / "snapshot"
    shutil.copytree(ama.data, snapshot, ignore=shutil.ignore_patterns("*.sock"))  # a live process's hand-over socket
    n = len(llm.requests)
    await conn.prompt(sid, "read f1.txt once more", timeout=30)
    assert not is_handoff(llm.requests[n])
    return snapshot, body_of(llm.requests[n])


async def loaded_next_request_equals(ama: Ama, llm: LLMServer, sid: str, snapshot: Path, live: dict[str, Any]) -> None:
    """The same turn from a fresh process that loaded the snapshot: the same request (messages with the system
    prompt, and tools)."""
    shutil.rmtree(ama.data)
    shutil.copytree(snapshot, ama.data)
    async with run_ama(ama, env=ENV) as conn:
        await load(conn, ama, sid)
        n = len(llm.requests)
        await conn.prompt(sid, "read f1.txt once more", timeout=30)
        assert not is_handoff(llm.requests[n])
        assert body_of(llm.requests[n]) == live


# --- the window matrix ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("window", [8_192, 32_768, 128_000, 200_000, 1_000_000])
async def test_a_long_session_compacts_twice_without_a_loop_a_corrupt_reload_or_an_invented_figure(tmp_path, window):
    ama = Ama(tmp_path)
    scale = max(1, window // 32_768)
    auto = window - min(16_384, window // 2)
    with SizedLLM(scale) as llm:
        configure(ama, llm.openai_url, window)  # default keep_tokens (20,000): more than 8k/32k's autoCompactAt
        async with run_ama(ama, env=ENV) as conn:
            sid, prefix = await open_session(conn, ama)
            chars = max(2_000, (auto // scale - prefix) * 4 // 3)  # three turns reach autoCompactAt
            write_files(ama, 12, 1_000)
            turns = 0
            while llm.handoffs() < 2:
                turns += 1
                assert turns <= 12, f"never compacted twice: {agent_text(conn, sid)}"
                result = await conn.prompt(sid, ask(turns, chars), timeout=30)
                assert result["stopReason"] == "end_turn"
            assert_no_loop(llm)
            assert len(compaction_entries(ama, sid)) == llm.handoffs() == 2
            assert all(e["kept_from_index"] >= 0 for e in compaction_entries(ama, sid))
            assert "Compacted the conversation (automatically)" in agent_text(conn, sid)
            assert_measured(conn, sid, llm)
            snapshot, live = await live_next_request(ama, llm, sid, conn)
        await loaded_next_request_equals(ama, llm, sid, snapshot, live)
        assert_no_loop(llm)


# --- any number of compactions reload exactly -----------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 5])
async def test_after_n_compactions_a_load_sends_the_request_the_live_session_sent(tmp_path, count):
    """Automatic and /compact alternate; the second is a /compact right after an automatic one (the case that
    stored kept_from_index -1 and reloaded the wrong context)."""
    ama = Ama(tmp_path)
    with SizedLLM() as llm:
        configure(ama, llm.openai_url, 32_768)
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=True)) as conn:
            sid, prefix = await open_session(conn, ama)
            chars = (16_384 - prefix) * 4 // 3
            write_files(ama, 40, 1_000)
            turns = 0
            for k in range(1, count + 1):
                if k % 2 == 1:  # automatic: read files until it happens
                    while llm.handoffs() < k:
                        turns += 1
                        assert turns <= 40
                        await conn.prompt(sid, ask(turns, chars), timeout=30)
                else:  # /compact after one more turn
                    turns += 1
                    await conn.prompt(sid, ask(turns, chars), timeout=30)
                    await conn.prompt(sid, "/compact", timeout=30)
                    assert llm.handoffs() == k, conn.updates_for(sid, "compaction_update")
            entries = compaction_entries(ama, sid)
            assert [e["number"] for e in entries] == list(range(1, count + 1))
            assert all(e["kept_from_index"] >= 0 for e in entries)
            assert_no_loop(llm)
            snapshot, live = await live_next_request(ama, llm, sid, conn)
        await loaded_next_request_equals(ama, llm, sid, snapshot, live)


# --- /compact with too little to compact ----------------------------------------------------------------------


async def test_slash_compact_with_nothing_to_compact_makes_no_request_and_says_so(tmp_path):
    ama = Ama(tmp_path)
    with SizedLLM() as llm:
        configure(ama, llm.openai_url, 32_768)
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=True)) as conn:
            sid, _ = await open_session(conn, ama)
            await conn.prompt(sid, "/compact", timeout=10)
            (update,) = conn.updates_for(sid, "compaction_update")
            assert update["status"] == "failed" and "nothing to compact" in update["error"]
            write_files(ama, 1, 400)
            await conn.prompt(sid, "read f1.txt please", timeout=10)
            n = len(llm.requests)
            await conn.prompt(sid, "/compact", timeout=10)  # a small session: freeing 20 % is impossible
            assert len(llm.requests) == n  # no model request
            last = conn.updates_for(sid, "compaction_update")[-1]
            assert last["status"] == "failed" and "Nothing was changed" in last["error"]
        assert not compaction_entries(ama, sid)


# --- the handoff and the inventory survive ---------------------------------------------------------------------


async def test_the_full_handoff_and_inventory_are_on_disk_and_the_model_gets_a_marked_copy(tmp_path):
    ama = Ama(tmp_path)
    first = "FIRST-REQUEST " + "w" * 3_000  # a long first message: in every inventory, across compactions
    handoff = "## 1. Goal\n" + "".join(f"handoff line {i} " + "h" * 60 + "\n" for i in range(500))  # ~37k chars
    handoff += "## 8. The few files to re-read first\n- `f2.txt`\n- `notes/plan.md`\n"
    with SizedLLM(handoff=handoff) as llm:
        configure(ama, llm.openai_url, 32_768)
        llm.enqueue(
            {"text": "run it", "tool_calls": [{"id": "r1", "name": "run_command", "arguments": {"command": "false"}}]},
            {"text": "it failed"},
        )
        async with run_ama(ama, env=ENV) as conn:
            sid, prefix = await open_session(conn, ama)
            chars = (16_384 - prefix) * 4 // 3
            write_files(ama, 8, 1_000)
            await conn.prompt(sid, first, timeout=30)
            turns = 0
            while llm.handoffs() < 2:
                turns += 1
                assert turns <= 8
                await conn.prompt(sid, ask(turns, chars), timeout=30)
        folder = ama.data / "sessions" / sid
        assert (folder / "compaction-2" / "handoff.md").read_text() == handoff.strip()  # whole, not 24,000
        inventory = (folder / "compaction-2" / "inventory.md").read_text()
        assert first in inventory  # the first request, from before the current context
        assert f"- previous handoff: {folder / 'compaction-1' / 'handoff.md'}" in inventory
        assert f"- session: {sid}" in inventory and "## Tools used" in inventory
        assert "run_command `false`" in inventory.split("## Tool errors", 1)[1]
        after = [r for r in llm.requests if not is_handoff(r)][-1]
        context = json.dumps(after.body["messages"], ensure_ascii=False)
        assert "[+" in context and " chars]" in context  # the model's copy is clipped, visibly
        assert "Re-read these files before you continue: `f2.txt`, `notes/plan.md`." in context
        assert str(folder / "compaction-2" / "inventory.md") in context


# --- the hold survives a reload --------------------------------------------------------------------------------


async def test_a_failed_compaction_holds_automatic_compaction_across_a_reload_until_slash_compact(tmp_path):
    ama = Ama(tmp_path)
    with SizedLLM() as llm:
        configure(ama, llm.openai_url, 32_768)
        llm.fail_handoffs = 1
        async with run_ama(ama, env=ENV) as conn:
            sid, prefix = await open_session(conn, ama)
            chars = (16_384 - prefix) * 4 // 3
            write_files(ama, 8, 1_000)
            turns = 0
            while llm.handoffs() < 1:
                turns += 1
                assert turns <= 8
                await conn.prompt(sid, ask(turns, chars), timeout=30)
            assert "Compaction failed" in agent_text(conn, sid)
            assert "autoCompactAt" not in usage_updates(conn, sid)[-1]["_meta"]["ama"]
        async with run_ama(ama, env=ENV) as conn:
            await load(conn, ama, sid)
            assert "autoCompactAt" not in usage_updates(conn, sid)[-1]["_meta"]["ama"]  # still held
            await conn.prompt(sid, ask(turns + 1, chars), timeout=30)
            assert llm.handoffs() == 1  # not retried before every request after the load
            await conn.prompt(sid, "/compact", timeout=30)  # releases the hold, and compacts
            assert llm.handoffs() == 2 and compaction_entries(ama, sid)
            assert "autoCompactAt" in usage_updates(conn, sid)[-1]["_meta"]["ama"]
        lines = (ama.data / "sessions" / f"{sid}.jsonl").read_text().splitlines()
        holds = [e["held"] for e in map(json.loads, lines) if e.get("t") == "compaction_hold"]
        assert holds == [True, False]
