"""A real SessionManager and Session in the test process, with the scripted model and a client peer whose
answers to ama's requests a test scripts.

The session is the product's own (tools, permissions, store, meter); only the peer is the test's: it
records every `session/update` (as JSON-ready dicts, the way the wire carries them) and every request ama
makes to the client, and answers each request with what the test's `answer` returns or raises.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import msgspec

from ama_acp.config import CompactionConfig, Config, ModelEntry
from ama_acp.rpc.dispatch import JSONObject, JSONValue, after_response
from ama_acp.rpc.peer import Params
from ama_acp.session.lifecycle import Lifecycle
from ama_acp.session.live import Session
from ama_acp.session.manager import SessionManager
from ama_acp.wire import types as w

Answer = Callable[[str, Any], Awaitable[JSONValue]]

SELECTED_ALLOW_ONCE: JSONObject = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
CANCELLED: JSONObject = {"outcome": {"outcome": "cancelled"}}


async def allow_once(method: str, params: Any) -> JSONValue:
    return SELECTED_ALLOW_ONCE


class ScriptedPeer:
    """The client side of the connection, as the session manager sees it (`notify`, `request`)."""

    def __init__(self, answer: Answer = allow_once) -> None:
        self.answer = answer
        self.updates: list[dict[str, Any]] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []

    async def notify(self, method: str, params: Params) -> None:
        # The real peer's write takes a lock first, a checkpoint: a cancelled turn stops at the next update
        # it sends, before anything is written. Without one here the turn would run on to its end in tests.
        await anyio.lowlevel.checkpoint()
        self.updates.append(msgspec.to_builtins(params)["update"])

    async def request(self, method: str, params: Params, timeout: float | None = None) -> JSONValue:
        self.requests.append((method, msgspec.to_builtins(params)))
        return await self.answer(method, params)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [u for u in self.updates if u["sessionUpdate"] == kind]

    def agent_text(self) -> str:
        return "".join(u["content"]["text"] for u in self.of("agent_message_chunk"))


def write_script(folder: Path, replies: list[dict[str, Any]], name: str = "test") -> Path:
    """A scripted-model script (providers/scripted.py documents the reply fields)."""
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"reply": replies}), encoding="utf-8")
    return path


def make_manager(
    tmp_path: Path,
    replies: list[dict[str, Any]],
    *,
    peer: ScriptedPeer | None = None,
    mode: str = "manual",
    keep_tokens: int = 20_000,
    models: list[ModelEntry] | None = None,
    model: str = "scripted/test",
) -> tuple[SessionManager, ScriptedPeer]:
    """A manager whose default model `scripted/test` plays `replies`; data under tmp_path/data."""
    script = write_script(tmp_path, replies)
    config = Config(
        data_dir=str(tmp_path / "data"),
        mode=mode,
        scripts={"test": str(script)},
        compaction=CompactionConfig(keep_tokens=keep_tokens),
        models=models or [],
    )
    peer = peer or ScriptedPeer()
    return SessionManager(config, peer, default_model=model), peer


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return ws


async def prompt(session: Session, text: str) -> str:
    response = await session.prompt([w.TextContent(text=text)])
    return response.stop_reason


async def reload(manager: SessionManager, session_id: str, cwd: Path) -> Session:
    """session/load through the product's Lifecycle, with the deferred work run as the RPC peer would."""
    life = Lifecycle(manager)
    after: list[Callable[[], Awaitable[None]]] = []
    token = after_response.set(after)
    try:
        await life.load(w.LoadSessionRequest(session_id=session_id, cwd=str(cwd), mcp_servers=[]))
    finally:
        after_response.reset(token)
    for run in after:
        await run()
    return manager.sessions[session_id]
