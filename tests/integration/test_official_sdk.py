"""ama driven by a client the project did not write: the official ACP Python SDK (`agent-client-protocol`).

The SDK's `spawn_agent_process` starts ama and its `ClientSideConnection` speaks ACP to it; the test only
implements the SDK's `Client` interface (session updates, permissions, fs reads). The model is a real
HTTP server on 127.0.0.1 (`tests/support/llm_server.py`) speaking the OpenAI and the Anthropic dialect.

Every line ama writes is also checked against the pinned official schema. The SDK parses the lines it
reads and never shows them, so ama is started through a small tee (`_TEE`, written to the test's tmp
dir): the wrapper runs ama with its stdout on a pipe and copies each line both to its own stdout (the SDK)
and to a file. ama's stdin is the wrapper's stdin (the SDK's pipe, inherited), so closing it ends ama, ama's
stdout reaches EOF and the wrapper exits with ama's status. What the SDK client sends is observed through
the SDK's own stream observers. At the end both sides go through `WireRecorder` and must be clean.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ama_conformance.schema.validate import WireRecorder, load_validator
from tests.support.harness import Ama, clean_env
from tests.support.llm_server import LLMServer

# The official SDK is a pinned test dependency (pyproject `test` extra: agent-client-protocol==0.12.1). It is
# imported where it is used (its pydantic models cost ~1 s of CPU to import, in every process that collects
# the suite), plainly, so that a missing SDK fails these tests loudly instead of skipping them.
if TYPE_CHECKING:
    from acp import Client
    from acp.schema import ReadTextFileResponse, RequestPermissionResponse

pytestmark = pytest.mark.anyio


def sdk_client(client: object) -> Client:
    """A test's client as the SDK's `Client`. It implements only the methods its test needs: the SDK answers any
    other with method-not-found (acp/router.py, `_resolve_handler`), though its `Client` protocol lists them all."""
    return client  # type: ignore[return-value]  # the protocol is wider than what spawn_agent_process calls


PROVIDERS = ["openai", "anthropic"]
WINDOW = 100_000
PRICE = {"input": 1.0, "output": 2.0, "cache_read": 0.1, "cache_write": 1.25}  # USD per million tokens
API_KEY = "test-key-123"
STEP_TIMEOUT = 8.0  # seconds for any one protocol step; the tests themselves take far less

_TEE = r"""
import signal, subprocess, sys

log_path, err_path, *cmd = sys.argv[1:]
with open(err_path, "ab") as err, open(log_path, "ab") as log:
    # stdin is inherited: the client's pipe goes straight to ama, and its EOF ends ama.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    sys.stdin.close()
    out = sys.stdout.buffer
    for line in iter(proc.stdout.readline, b""):
        log.write(line)
        log.flush()
        try:
            out.write(line)
            out.flush()
        except BrokenPipeError:
            pass  # the client stopped reading; keep recording until ama ends
    sys.exit(proc.wait())
"""


# --------------------------------------------------------------------------------------------------
# The SDK client
# --------------------------------------------------------------------------------------------------


class RecordingClient:
    """An editor, as far as the SDK's `Client` interface goes: records updates, allows once, reads disk."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, dict[str, Any]]] = []
        self.permission_requests: list[dict[str, Any]] = []
        self.reads: list[str] = []
        self.changed = asyncio.Event()

    # -- what the agent may call

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update.model_dump(mode="json", by_alias=True, exclude_none=True)))
        self.changed.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        self.permission_requests.append({"toolCall": tool_call.model_dump(mode="json", by_alias=True)})
        for option in options:
            if option.kind == "allow_once":
                return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option.option_id))
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        from acp.schema import ReadTextFileResponse

        self.reads.append(path)
        text = await asyncio.to_thread(Path(path).read_text, encoding="utf-8")
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = (line or 1) - 1
            text = "".join(lines[start : start + limit] if limit is not None else lines[start:])
        return ReadTextFileResponse(content=text)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        pass

    # -- for the test

    def of(self, session_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [u for s, u in self.updates if s == session_id and (kind is None or u["sessionUpdate"] == kind)]

    async def wait_for(self, predicate: Callable[[], Any], what: str, timeout: float = STEP_TIMEOUT) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            result = predicate()
            if result:
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                kinds = [u["sessionUpdate"] for _, u in self.updates]
                raise AssertionError(f"timed out waiting for {what}; updates so far: {kinds}")
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), min(remaining, 0.2))
            except TimeoutError:
                pass


# --------------------------------------------------------------------------------------------------
# Running ama through the SDK, with the tee
# --------------------------------------------------------------------------------------------------


@dataclass
class Wire:
    """What crossed the pipes of one ama process."""

    stdout_log: Path
    sent: list[dict[str, Any]] = field(default_factory=list)

    def lines(self) -> list[bytes]:
        return self.stdout_log.read_bytes().splitlines(keepends=True) if self.stdout_log.exists() else []

    def received(self) -> list[dict[str, Any]]:
        """The complete lines so far (while ama runs, the tee may be halfway through writing the last one)."""
        return [json.loads(line) for line in self.lines() if line.endswith(b"\n")]

    def check(self) -> None:
        recorder = WireRecorder(load_validator())
        for msg in self.sent:  # ids are unique per connection, so feeding the client's side first is exact
            recorder.sent(msg)
        raw = self.lines()
        assert raw, "ama wrote nothing"
        assert raw[-1].endswith(b"\n"), f"ama's last line is unterminated: {raw[-1][:200]!r}"
        for line in raw:
            recorder.received(line)
        recorder.assert_clean()
        assert len(recorder.messages) == len(raw)
        assert {"initialize"} <= set(recorder.request_methods.values()), recorder.request_methods


def write_config(ama: Ama, server: LLMServer, kind: str) -> None:
    base_url = server.openai_url if kind == "openai" else server.anthropic_url
    price = ", ".join(f"{k} = {v}" for k, v in PRICE.items())
    ama.config.write_text(
        f"""model = "local/test-model"

[providers.local]
kind = "{kind}"
base_url = "{base_url}"
api_key_env = "LOCAL_TEST_KEY"

[[models]]
id = "local/test-model"
context_window = {WINDOW}
max_output = 4096
price = {{ {price} }}
reasoning = true
""",
        encoding="utf-8",
    )


@asynccontextmanager
async def sdk_ama(ama: Ama, name: str) -> AsyncIterator[tuple[Any, RecordingClient, Wire, Any]]:
    """ama under the SDK's `spawn_agent_process`, behind the tee; checks the whole wire when it closes."""
    from acp import spawn_agent_process
    from acp.connection import StreamDirection, StreamEvent

    tee = ama.tmp / "tee.py"
    tee.write_text(_TEE, encoding="utf-8")
    wire = Wire(ama.tmp / f"{name}.stdout.jsonl")
    stderr = ama.tmp / f"{name}.stderr.log"
    client = RecordingClient()

    def observe(event: StreamEvent) -> None:
        if event.direction == StreamDirection.OUTGOING:
            wire.sent.append(event.message)

    env = clean_env(ama.tmp, {"LOCAL_TEST_KEY": API_KEY, "PYTHONUNBUFFERED": "1"})
    async with spawn_agent_process(
        sdk_client(client),
        sys.executable,
        str(tee),
        str(wire.stdout_log),
        str(stderr),
        *ama.command(),
        env=env,
        cwd=ama.workspace,
        transport_kwargs={"stderr": asyncio.subprocess.DEVNULL, "shutdown_timeout": 5.0},
        observers=[observe],
    ) as (conn, process):
        try:
            yield conn, client, wire, process
        except BaseException:
            if stderr.exists():
                sys.stderr.write(f"--- ama stderr ({name}) ---\n{stderr.read_text(errors='replace')[-4000:]}\n")
            raise
    assert process.returncode == 0, (
        f"ama (behind the tee) did not exit cleanly when its stdin closed: {process.returncode}"
    )
    wire.check()


async def step(awaitable: Any, what: str, timeout: float = STEP_TIMEOUT) -> Any:
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except TimeoutError:
        raise AssertionError(f"{what}: no answer within {timeout} s") from None


async def poll(predicate: Callable[[], Any], what: str, timeout: float = STEP_TIMEOUT) -> None:
    """Wait for something another thread does (the model server records requests in its own threads)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def open_session(conn: Any, client: RecordingClient, ama: Ama) -> str:
    from acp import PROTOCOL_VERSION
    from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

    init = await step(
        conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True)),
            client_info=Implementation(name="acp-python-sdk-test", version="0"),
        ),
        "initialize",
    )
    assert init.protocol_version == 1
    assert init.agent_info is not None and init.agent_info.name == "ama"
    assert init.agent_capabilities is not None and init.agent_capabilities.load_session is True

    new = await step(conn.new_session(cwd=str(ama.workspace.resolve()), mcp_servers=[]), "session/new")
    sid = new.session_id
    assert isinstance(sid, str) and sid
    await client.wait_for(lambda: client.of(sid, "usage_update"), "the usage_update after session/new")
    return sid


# --------------------------------------------------------------------------------------------------
# The scripted conversation
# --------------------------------------------------------------------------------------------------

THINKING = "The user wants the notes; I should read notes.txt first."
TEXT_A = "Let me read the file."
TEXT_B = "The notes say: alpha, beta, gamma."
FILE_BODY = "alpha\nbeta\ngamma\n"
USAGE_A = {"input": 1200, "output": 50, "cache_read": 300}
USAGE_B = {"input": 1400, "output": 20}
CALL_ID = "call_read_1"


def reply_a(path: str) -> dict[str, Any]:
    return {
        "thinking": THINKING,
        "signature": "sig-test-abc123",
        "text": TEXT_A,
        "tool_calls": [{"id": CALL_ID, "name": "read_file", "arguments": {"path": path}}],
        "usage": USAGE_A,
    }


def reply_b() -> dict[str, Any]:
    return {"text": TEXT_B, "usage": USAGE_B}


def context_total(kind: str, usage: dict[str, int]) -> int:
    """ama's Usage total (docs/rules.md U7) for a reply the server rendered from `usage`."""
    inp, out = usage.get("input", 0), usage.get("output", 0)
    cache_read, cache_write = usage.get("cache_read", 0), usage.get("cache_write", 0)
    if kind == "openai":
        # llm_server reports prompt_tokens = input + cache_read and total_tokens = prompt + completion;
        # ama takes total_tokens as reported (cache writes do not exist in this dialect).
        prompt_tokens = inp + cache_read
        return prompt_tokens + out
    return inp + out + cache_read + cache_write


def request_cost(usage: dict[str, int]) -> float:
    """USD for one request; ama's `input` is the uncached input in both dialects."""
    return (
        usage.get("input", 0) * PRICE["input"]
        + usage.get("output", 0) * PRICE["output"]
        + usage.get("cache_read", 0) * PRICE["cache_read"]
        + usage.get("cache_write", 0) * PRICE["cache_write"]
    ) / 1_000_000


def chunk_text(updates: list[dict[str, Any]], kind: str) -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


def tool_text(update: dict[str, Any]) -> str:
    parts = []
    for item in update.get("content") or []:
        inner = item.get("content") if item.get("type") == "content" else None
        if isinstance(inner, dict) and inner.get("type") == "text":
            parts.append(inner["text"])
    return "\n".join(parts)


async def run_read_turn(conn: Any, client: RecordingClient, sid: str, server: LLMServer) -> Any:
    from acp import text_block

    result = await step(
        conn.prompt(session_id=sid, prompt=[text_block("What do the notes say?")]), "session/prompt", timeout=15
    )
    assert server.pending == 0, "ama did not make both model requests"
    return result


# --------------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_prompt_with_tool_call_through_official_sdk(tmp_path: Path, kind: str) -> None:
    ama = Ama(tmp_path)
    notes = ama.workspace / "notes.txt"
    notes.write_text(FILE_BODY, encoding="utf-8")
    with LLMServer() as server:
        write_config(ama, server, kind)
        server.enqueue(reply_a(str(notes)), reply_b())
        async with sdk_ama(ama, "first") as (conn, client, wire, _process):
            sid = await open_session(conn, client, ama)

            opening = client.of(sid, "usage_update")
            assert len(opening) == 1, opening
            assert opening[0]["_meta"]["ama"]["source"] == "prefix"
            assert opening[0]["size"] == WINDOW
            assert opening[0]["used"] > 0, "a new session is never at 0 (U10)"
            mark = len(client.of(sid))

            result = await run_read_turn(conn, client, sid, server)
            assert result.stop_reason == "end_turn"
            turn = client.of(sid)[mark:]

    # --- the turn's billed usage in the prompt result (unstable field; the SDK parses it)
    assert result.usage is not None
    assert result.usage.input_tokens == USAGE_A["input"] + USAGE_B["input"]
    assert result.usage.output_tokens == USAGE_A["output"] + USAGE_B["output"]
    assert result.usage.cached_read_tokens == USAGE_A["cache_read"]
    assert result.usage.total_tokens == context_total(kind, USAGE_A) + context_total(kind, USAGE_B)

    # --- what the SDK client saw during the turn
    kinds = [u["sessionUpdate"] for u in turn]
    assert chunk_text(turn, "agent_thought_chunk") == THINKING, kinds
    assert chunk_text(turn, "agent_message_chunk") == TEXT_A + TEXT_B, kinds

    starts = [u for u in turn if u["sessionUpdate"] == "tool_call"]
    assert len(starts) == 1, kinds
    start = starts[0]
    tool_id = start["toolCallId"]
    assert start["kind"] == "read"
    assert "notes.txt" in start["title"]
    progress = [u for u in turn if u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == tool_id]
    statuses = [u.get("status") for u in progress if u.get("status")]
    assert statuses == ["in_progress", "completed"], statuses
    assert kinds.index("tool_call") < turn.index(progress[0])
    final = next(u for u in progress if u.get("status") == "completed")
    done_text = tool_text(final)
    for line in FILE_BODY.splitlines():
        assert line in done_text, f"{line!r} not in the completed tool call's content: {final}"
    assert client.reads == [str(notes)], "ama should read through fs/read_text_file, which the client advertised"
    assert not client.permission_requests, "a read inside the workspace needs no permission in manual mode"

    # --- usage_update: after reply (a), then after reply (b); cost covers both requests
    usage = [u for u in turn if u["sessionUpdate"] == "usage_update"]
    first_total, second_total = context_total(kind, USAGE_A), context_total(kind, USAGE_B)
    assert first_total == 1550 and second_total == 1420
    useds = [u["used"] for u in usage]
    # E1 after each model response; E2 at the turn's end repeats the second and is deduplicated (D1).
    assert useds == [first_total, second_total], useds
    after_a = usage[0]
    assert after_a["_meta"]["ama"]["source"] == "usage"
    assert after_a["cost"] == {"amount": pytest.approx(request_cost(USAGE_A), abs=1e-9), "currency": "USD"}
    tool_done_at = turn.index(final)
    assert turn.index(after_a) < tool_done_at, "the usage_update for reply (a) comes when it completes (E1)"
    last = usage[-1]
    assert last["used"] == second_total, useds
    assert last["size"] == WINDOW
    assert last["_meta"]["ama"]["source"] == "usage"
    expected_cost = request_cost(USAGE_A) + request_cost(USAGE_B)
    assert expected_cost == pytest.approx(0.00277)
    assert last["cost"]["currency"] == "USD"
    assert last["cost"]["amount"] == pytest.approx(expected_cost, abs=1e-9)
    assert all(u["size"] == WINDOW for u in usage)

    # --- the second model request carried the tool result (and Anthropic's signed thinking)
    assert len(server.requests) == 2
    body = server.requests[1].body
    if kind == "openai":
        messages = body["messages"]
        assistant = [m for m in messages if m["role"] == "assistant"][-1]
        assert [c["id"] for c in assistant["tool_calls"]] == [CALL_ID]
        tool_msgs = [m for m in messages if m["role"] == "tool"]
        assert len(tool_msgs) == 1 and tool_msgs[0]["tool_call_id"] == CALL_ID
        content = tool_msgs[0]["content"]
        content = content if isinstance(content, str) else json.dumps(content)
        assert all(line in content for line in FILE_BODY.splitlines()), content
    else:
        messages = body["messages"]
        assistant = [m for m in messages if m["role"] == "assistant"][-1]
        blocks = assistant["content"]
        thinking = [b for b in blocks if b["type"] == "thinking"]
        assert thinking == [{"type": "thinking", "thinking": THINKING, "signature": "sig-test-abc123"}], blocks
        assert blocks.index(thinking[0]) == 0, "the thinking block must come first"
        uses = [b for b in blocks if b["type"] == "tool_use"]
        assert [(u["id"], u["name"], u["input"]) for u in uses] == [(CALL_ID, "read_file", {"path": str(notes)})]
        results = [
            b
            for m in messages
            if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
        assert len(results) == 1 and results[0]["tool_use_id"] == CALL_ID
        content = results[0]["content"]
        content = content if isinstance(content, str) else json.dumps(content)
        assert all(line in content for line in FILE_BODY.splitlines()), content
    for request in server.requests:
        if kind == "openai":
            assert request.headers.get("authorization") == f"Bearer {API_KEY}"
        else:
            assert request.headers.get("x-api-key") == API_KEY


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_cancel_through_official_sdk(tmp_path: Path, kind: str) -> None:
    from acp import text_block

    ama = Ama(tmp_path)
    with LLMServer() as server:
        write_config(ama, server, kind)
        server.enqueue({"hang": 30})
        async with sdk_ama(ama, "cancel") as (conn, client, wire, _process):
            sid = await open_session(conn, client, ama)
            prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("Take your time.")]))
            await poll(lambda: server.requests, "ama's request to the model")
            assert not prompt.done()
            started = time.monotonic()
            await conn.cancel(session_id=sid)
            result = await step(prompt, "session/prompt after session/cancel", timeout=3.0)
            elapsed = time.monotonic() - started
            assert result.stop_reason == "cancelled"
            assert elapsed < 2.5, f"the prompt took {elapsed:.2f} s to end after session/cancel"
            assert any(m.get("method") == "session/cancel" for m in wire.sent)


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_load_session_through_official_sdk(tmp_path: Path, kind: str) -> None:
    from acp import PROTOCOL_VERSION
    from acp.schema import ClientCapabilities

    ama = Ama(tmp_path)
    notes = ama.workspace / "notes.txt"
    notes.write_text(FILE_BODY, encoding="utf-8")
    with LLMServer() as server:
        write_config(ama, server, kind)
        server.enqueue(reply_a(str(notes)), reply_b())
        async with sdk_ama(ama, "first") as (conn, client, _wire, _process):
            sid = await open_session(conn, client, ama)
            result = await run_read_turn(conn, client, sid, server)
            assert result.stop_reason == "end_turn"
            last_before = client.of(sid, "usage_update")[-1]
            first_tool = client.of(sid, "tool_call")[0]

        # A second process over the same data directory.
        async with sdk_ama(ama, "second") as (conn, client, wire, _process):
            init = await step(
                conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()),
                "initialize",
            )
            assert init.agent_capabilities.load_session is True
            loaded = await step(
                conn.load_session(cwd=str(ama.workspace.resolve()), session_id=sid, mcp_servers=[]), "session/load"
            )
            assert loaded is not None
            # The replay is what ama wrote before its answer to session/load (the SDK hides that order).
            load_id = next(m["id"] for m in wire.sent if m.get("method") == "session/load")
            replay_done = 0
            for msg in wire.received():
                if msg.get("id") == load_id and "method" not in msg:
                    break
                if msg.get("method") == "session/update" and msg["params"]["sessionId"] == sid:
                    replay_done += 1
            await client.wait_for(
                lambda: any(u["sessionUpdate"] == "usage_update" for u in client.of(sid)[replay_done:]),
                "the usage_update after session/load",
            )
            # A round trip instead of a quiet period: ama writes everything on one ordered stream, so whatever it
            # sent for the load (replay, answer, then commands, options, the meter) is on the wire before it
            # answers this request; then wait until the SDK has handed each of those updates to the client.
            await step(conn.list_sessions(cwd=str(ama.workspace.resolve())), "session/list (a barrier)")
            on_wire = sum(
                1 for m in wire.received() if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
            )
            await client.wait_for(lambda: len(client.of(sid)) >= on_wire, "every update ama wrote before the barrier")
            updates = client.of(sid)
            assert len(updates) == on_wire, "the client saw updates the wire did not carry"
        assert len(server.requests) == 2, "loading a session must not call the model"

    replay = updates[:replay_done]
    kinds = [u["sessionUpdate"] for u in replay]
    for expected in ("user_message_chunk", "agent_message_chunk", "tool_call"):
        assert expected in kinds, f"{expected} missing from the replay: {kinds}"
    assert kinds.index("user_message_chunk") < kinds.index("tool_call")
    assert chunk_text(replay, "user_message_chunk") == "What do the notes say?"
    assert chunk_text(replay, "agent_message_chunk") == TEXT_A + TEXT_B
    replayed_tool = next(u for u in replay if u["sessionUpdate"] == "tool_call")
    assert replayed_tool["toolCallId"] == first_tool["toolCallId"]
    assert replayed_tool["kind"] == "read" and "notes.txt" in replayed_tool["title"]
    completed = [
        u for u in replay if u["sessionUpdate"] in ("tool_call", "tool_call_update") and u.get("status") == "completed"
    ]
    assert completed and all(line in tool_text(completed[-1]) for line in FILE_BODY.splitlines()), completed

    after = [u for u in updates if u["sessionUpdate"] == "usage_update"]
    assert after, kinds
    assert after[-1] == last_before, f"after load: {after[-1]}\nbefore close: {last_before}"
