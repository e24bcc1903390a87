"""A turn's stop reason reaches the wire only if it is one of ACP's: anything else (a bug in a command or the
loop) is answered `end_turn` and logged, never written as a schema-invalid prompt response."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from tests.support.inprocess import make_manager, prompt, workspace


@pytest.mark.allow_traceback  # the bug is logged at ERROR, as ama logs every bug of its own
def test_a_stop_reason_outside_acps_is_answered_end_turn_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager, _ = make_manager(tmp_path, [{"text": "hi"}])

    async def broken(session, arg):  # a command that returns what no ACP client can read
        return "finished-ish"

    manager.commands.add("broken", "a test command", None, broken)

    async def main() -> tuple[str, str]:
        session = manager.new_session(str(workspace(tmp_path)), None, [])
        stops = (await prompt(session, "/broken"), await prompt(session, "hello"))
        await manager.close(session.id)
        return stops

    with caplog.at_level(logging.ERROR, logger="ama_acp.session.live"):
        assert anyio.run(main) == ("end_turn", "end_turn")
    assert any("finished-ish" in r.getMessage() for r in caplog.records)
