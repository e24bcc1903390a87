"""Mutated real session files always load: read_session + restore raise nothing but a clean SessionFormatError
(for an unreadable or newer header), and the restored context pairs every tool call with a result.

Real files: the bundled demo conversation (tool calls, usage with meter and billing state, a plan, a slash
command) written by ama itself, plus one with a compaction and a prune. Mutations: byte flips, truncation at
any byte, line deletion, duplication, reordering, and fields retyped or set to odd numbers.
`AMA_FUZZ_EXAMPLES` sets the count (default 200 under the `ci` hypothesis profile, a quarter under `dev`).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp.config import Config
from ama_acp.conversation.messages import (
    AssistantMessage,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.redact import Redactor
from ama_acp.rpc.dispatch import JSONValue
from ama_acp.rpc.peer import Params
from ama_acp.session import options
from ama_acp.session.live import Session
from ama_acp.session.manager import SessionManager
from ama_acp.session.options import SessionSetup
from ama_acp.session.restore import replay_updates, restore
from ama_acp.session.store import entries as en
from ama_acp.session.store.session_store import SessionFormatError, SessionStore, read_session
from ama_acp.wire import types as w
from tests.support.conversation import paired_everywhere
from tests.support.hypothesis_profiles import examples

EXAMPLES = int(os.environ.get("AMA_FUZZ_EXAMPLES") or examples(200))


class Peer:
    async def notify(self, method: str, params: Params) -> None:
        return None

    async def request(self, method: str, params: Params, timeout: float | None = None) -> JSONValue:
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


def _demo_file(root: Path) -> bytes:
    (root / "ws").mkdir(parents=True, exist_ok=True)
    manager = SessionManager(Config(data_dir=str(root / "demo")), Peer(), default_model="scripted/demo")

    async def main() -> str:
        session = manager.new_session(str(root / "ws"), None, [])
        await session.prompt([w.TextContent(text="the tests fail, fix them")])
        await session.prompt([w.TextContent(text="/context")])
        await manager.close(session.id)
        return session.id

    sid = anyio.run(main)
    return manager.store.path(sid).read_bytes()


def _compacted_file(root: Path) -> bytes:
    store = SessionStore(root / "built", redactor=Redactor(), fsync="never")
    folder = store.handoff_dir("ses_built") / "compaction-1"
    folder.mkdir(parents=True)
    (folder / "handoff.md").write_text("what came before")
    meter = {"source": "usage", "usage_tokens": 900, "trailing_tokens": 10, "message_count": 3}
    billing = {"totals": {"requests": 1, "input": 800, "output": 20}, "cost": 0.01}
    with store.create(en.Header(session_id="ses_built", cwd=str(root / "ws"))) as wr:
        wr.append(en.MessageEntry(message=UserMessage([TextPart("one")])))
        wr.append(en.MessageEntry(message=AssistantMessage([TextPart("a"), ToolCallPart("c1", "grep", '{"p":1}')])))
        wr.append(en.MessageEntry(message=ToolResultMessage("c1", "grep", [TextPart("x" * 300)])))
        wr.append(
            en.UsageEntry(model_id="scripted/demo", usage=Usage(input=800, output=20), meter=meter, billing=billing)
        )
        wr.append(en.ContextEditEntry(message_indices=[2], placeholder="[pruned]", meter=meter))
        wr.append(
            en.CompactionEntry(
                number=1,
                summary_path="compaction-1/handoff.md",
                kept_from_index=1,
                meter=meter,
                handoff_chars=4_000,
                inventory_chars=2_000,
            )
        )
        # The entries issue 10 and 11 added: a hold, a reminder's record, the MCP servers' record.
        wr.append(en.CompactionHoldEntry(held=True, reason="refused"))
        wr.append(en.PromptEntry(mode_id="read_only", additional_directories=[str(root)]))
        wr.append(en.McpServersEntry(servers=[{"name": "files", "transport": "stdio", "command": "srv"}]))
        wr.append(
            en.MessageEntry(message=AssistantMessage([ToolCallPart("c2", "run_command", '{"command":"sleep 9"}')]))
        )
    return store.path("ses_built").read_bytes()


@pytest.fixture(scope="module")
def real_files() -> list[bytes]:
    with tempfile.TemporaryDirectory() as tmp:
        return [_demo_file(Path(tmp)), _compacted_file(Path(tmp))]


ODD = [0, -1, 2**63, -(2**63) - 1, 10**40, 1.5, -0.0, 1e308, "7", None, True, [], {}, "", "x" * 50]


def _retype(value: object, draw: st.DrawFn) -> object:
    """Replace one field somewhere in a decoded line with an odd value."""
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        if draw(st.booleans()):
            return {**value, key: draw(st.sampled_from(ODD))}
        return {**value, key: _retype(value[key], draw)}
    if isinstance(value, list) and value:
        i = draw(st.integers(0, len(value) - 1))
        return [*value[:i], _retype(value[i], draw), *value[i + 1 :]]
    return draw(st.sampled_from(ODD))


@st.composite
def mutated(draw: st.DrawFn, files: list[bytes]) -> bytes:
    data = draw(st.sampled_from(files))
    for _ in range(draw(st.integers(1, 3))):
        lines = data.split(b"\n")
        kind = draw(st.sampled_from(["flip", "truncate", "delete", "duplicate", "reorder", "retype"]))
        if kind == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data = data[:i] + bytes([data[i] ^ (1 << draw(st.integers(0, 7)))]) + data[i + 1 :]
        elif kind == "truncate":
            data = data[: draw(st.integers(0, len(data)))]
        elif kind == "delete" and len(lines) > 1:
            i = draw(st.integers(1, len(lines) - 1))  # the header too, sometimes: via flips and truncation
            data = b"\n".join(lines[:i] + lines[i + 1 :])
        elif kind == "duplicate" and len(lines) > 1:
            i = draw(st.integers(0, len(lines) - 1))
            data = b"\n".join(lines[: i + 1] + [lines[i]] + lines[i + 1 :])
        elif kind == "reorder" and len(lines) > 2:
            i, j = draw(st.integers(1, len(lines) - 1)), draw(st.integers(1, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            data = b"\n".join(lines)
        elif kind == "retype" and len(lines) > 1:
            i = draw(st.integers(0, len(lines) - 1))
            try:
                value = json.loads(lines[i])
            except ValueError:
                continue
            lines[i] = json.dumps(_retype(value, draw)).encode()
            data = b"\n".join(lines)
    return data


_encoder = msgspec.json.Encoder()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SessionManager]:
    """The folder the mutated files are written to and the manager their sessions are restored with, made once
    for the module: hypothesis' examples run inside one test call, without a function fixture of their own."""
    work = tmp_path_factory.mktemp("fuzz-sessions")
    return work, SessionManager(Config(data_dir=str(work / "data")), Peer(), default_model="scripted/demo")


def test_the_base_files_load_cleanly(real_files, world):
    work, _ = world
    for data in real_files:
        path = work / "base.jsonl"
        path.write_bytes(data)
        loaded = read_session(path)
        assert loaded.skipped_lines == 0 and not loaded.torn_tail


def test_mutated_session_files_always_load_and_pair_every_call(real_files, world):
    work, manager = world

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(mutated(real_files))
    def check(data: bytes) -> None:
        path = work / "sessions" / "ses_fuzz.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        try:
            loaded = read_session(path)
        except SessionFormatError:
            return  # an unreadable or newer header: the one clean refusal
        setup = SessionSetup("ses_fuzz", str(work), [], "manual", "scripted/demo")
        restored = restore(loaded, work / "sessions" / "ses_fuzz", setup, manager.tool)
        session = Session(manager, restored.setup, restored)
        loaded.entries.extend(restored.repair)
        assert paired_everywhere(session.conversation.messages)
        figures = session.ctx.figures()
        assert figures.used is None or figures.used >= 0
        session.host.build_request()
        for update in replay_updates(loaded):
            _encoder.encode(update)
        session.config_options()
        options.mode_state(session.mode)

    check()
