"""A session whose file cannot be written (disk full) goes on in memory and says so in the log."""

from __future__ import annotations

import errno
import logging

import anyio
import msgspec

from ama_acp.config import Config
from ama_acp.session.manager import SessionManager
from ama_acp.wire import types as w


class Peer:
    def __init__(self) -> None:
        self.updates: list[dict] = []

    async def notify(self, method: str, params: object) -> None:
        self.updates.append(msgspec.to_builtins(params)["update"])

    async def request(self, method: str, params: object, timeout: float | None = None) -> object:
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


class FullDisk:
    def __init__(self) -> None:
        self.calls = 0

    def append(self, entry: object) -> None:
        self.calls += 1
        raise OSError(errno.ENOSPC, "No space left on device")

    def close(self) -> None:
        pass


def test_write_error_ends_persistence_not_the_turn(tmp_path, caplog):
    (tmp_path / "ws").mkdir()
    peer = Peer()
    manager = SessionManager(Config(data_dir=str(tmp_path / "data")), peer, default_model="scripted/demo")

    async def main() -> str:
        session = manager.new_session(str(tmp_path / "ws"), None, [])
        disk = session.writer = FullDisk()
        result = await session.prompt([w.TextContent(text="hello")])
        assert disk.calls == 1  # the first failure stops further writes
        assert session.writer is None
        return result.stop_reason

    with caplog.at_level(logging.ERROR):
        assert anyio.run(main) == "end_turn"
    assert "No space left on device" in caplog.text and "will not survive a restart" in caplog.text
    assert any(u["sessionUpdate"] == "agent_message_chunk" for u in peer.updates)
