"""A client that closes stdin right after `session/new` (as `acpx sessions new` does) still gets the session's
three opening updates, the `usage_update` included (issue 41 point 3; docs/rules.md E4; rpc/peer.py
`end_grace`): the end of input gives the requests read before it time to answer and to send what follows the
answer, instead of cancelling them mid-announcement.

A real `ama --mode acp` subprocess on real pipes: initialize and session/new written at once, stdin closed,
stdout read to its end; every line validated against the pinned schema. Five times over: the updates must
come every time, not most times.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from ama_conformance.schema.validate import WireRecorder, load_validator
from tests.support.harness import Ama, clean_env

OPENING = ["available_commands_update", "config_option_update", "usage_update"]


def open_then_eof(ama: Ama, tmp: Path) -> tuple[list[Any], float]:
    """What ama wrote, when initialize and session/new reach it with the end of its input; and how long it took
    to exit after that."""
    sent = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(ama.workspace), "mcpServers": []}},
    ]
    started = time.monotonic()
    done = subprocess.run(
        ama.command(),
        input="".join(json.dumps(m) + "\n" for m in sent).encode(),  # written, then stdin closed at once
        capture_output=True,
        env=clean_env(tmp),
        cwd=ama.workspace,
        timeout=60,
        check=False,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    recorder = WireRecorder(load_validator())
    for message in sent:
        recorder.sent(message)
    lines = done.stdout.splitlines(keepends=True)
    for line in lines:
        recorder.received(line)
    recorder.assert_clean()
    return [json.loads(line) for line in lines], took


def test_the_opening_updates_survive_stdin_closing_right_after_session_new(tmp_path: Path) -> None:
    for attempt in range(5):
        ama = Ama(tmp_path / f"try{attempt}")
        received, _ = open_then_eof(ama, tmp_path / f"try{attempt}")
        answers = {m["id"]: m for m in received if "id" in m}
        assert set(answers) == {1, 2} and all("result" in a for a in answers.values()), received
        sid = answers[2]["result"]["sessionId"]
        updates = [m["params"] for m in received if m.get("method") == "session/update"]
        kinds = [u["update"]["sessionUpdate"] for u in updates if u["sessionId"] == sid]
        assert kinds == OPENING, f"try {attempt}: {kinds}"
        usage = updates[-1]["update"]
        assert usage["size"] > 0 and usage["cost"] == {"amount": 0.0, "currency": "USD"}
