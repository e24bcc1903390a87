"""The permission-cancelled path (session/editor/approval.py, docs/protocol.md "Cancellation", R113) on a real
in-process session whose client peer answers `session/request_permission` as each test scripts it.

The promise: a call the person did not allow never runs and still gets its result; a `cancelled` answer, or
a `session/cancel` while the request is open, ends the turn `cancelled` (the request is waited for up to
CANCEL_GRACE, and even a late "Allow" runs nothing); a request that fails is a refusal with its reason and
the turn goes on.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from ama_acp.agent.loop import CANCELLED_FOR_MODEL, CANCELLED_FOR_PERSON
from ama_acp.conversation.messages import AssistantMessage, Message, ToolResultMessage
from ama_acp.rpc.errors import ClientError
from ama_acp.session.editor import approval
from ama_acp.session.editor.approval import REJECTED_FOR_MODEL, REJECTED_FOR_PERSON
from ama_acp.session.live import Session
from tests.support.conversation import paired_everywhere
from tests.support.inprocess import CANCELLED, SELECTED_ALLOW_ONCE, ScriptedPeer, make_manager, prompt, workspace

# The model asks to write a file (an edit: Manual mode asks the person), then would say "after".
REPLIES: list[dict[str, Any]] = [
    {
        "text": "Writing.",
        "tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "new.txt", "content": "hi"}}],
    },
    {"text": "after"},
]


class Turn:
    """One prompt turn of a fresh session; what it left behind."""

    def __init__(self, session: Session, peer: ScriptedPeer, stop: str, target: Path) -> None:
        self.session, self.peer, self.stop, self.target = session, peer, stop, target

    @property
    def messages(self) -> list[Message]:
        return self.session.conversation.messages

    def result(self) -> ToolResultMessage:
        (only,) = [m for m in self.messages if isinstance(m, ToolResultMessage)]
        return only

    def final_status(self) -> dict[str, Any]:
        updates = [u for u in self.peer.of("tool_call_update") if u.get("status") in ("completed", "failed")]
        (only,) = updates
        return only

    def model_requests(self) -> int:
        return sum(1 for m in self.messages if isinstance(m, AssistantMessage))

    def asked(self) -> int:
        return sum(1 for method, _ in self.peer.requests if method == "session/request_permission")


def run(tmp_path: Path, peer: ScriptedPeer, while_asking: Any = None) -> Turn:
    """Prompt once; `while_asking(session)` runs once the permission request is open."""
    manager, _ = make_manager(tmp_path, REPLIES, peer=peer)
    ws = workspace(tmp_path)
    asking = anyio.Event()
    answer = peer.answer

    async def tracked(method: str, params: Any) -> Any:
        asking.set()
        return await answer(method, params)

    peer.answer = tracked

    async def main() -> Turn:
        session = manager.new_session(str(ws), None, [])
        stops: list[str] = []

        async def turn() -> None:
            stops.append(await prompt(session, "write new.txt"))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(turn)
                if while_asking is not None:
                    await asking.wait()
                    await while_asking(session)
        await manager.close(session.id)
        return Turn(session, peer, stops[0], ws / "new.txt")

    return anyio.run(main)


def answering(value: Any = None, exc: BaseException | None = None) -> ScriptedPeer:
    async def answer(method: str, params: Any) -> Any:
        if exc is not None:
            raise exc
        return value

    return ScriptedPeer(answer)


def assert_not_run_and_cancelled(turn: Turn) -> None:
    assert turn.stop == "cancelled"
    assert not turn.target.exists()  # the call never ran
    assert turn.result().is_error and turn.result().text == CANCELLED_FOR_MODEL
    status = turn.final_status()
    assert status["status"] == "failed" and CANCELLED_FOR_PERSON in str(status["content"])
    assert turn.model_requests() == 1  # the turn ended: the model was not asked again
    assert paired_everywhere(turn.messages)


def test_allow_once_runs_the_call(tmp_path):  # the control: the same set-up, allowed, does write
    turn = run(tmp_path, answering(SELECTED_ALLOW_ONCE))
    assert turn.stop == "end_turn" and turn.target.read_text() == "hi"
    assert turn.asked() == 1 and turn.model_requests() == 2


def test_a_cancelled_answer_without_session_cancel_does_not_run_the_call_and_ends_the_turn_cancelled(tmp_path):
    turn = run(tmp_path, answering(CANCELLED))
    assert turn.asked() == 1
    assert_not_run_and_cancelled(turn)
    assert turn.session.cancelled


def test_a_rejection_does_not_run_the_call_and_the_turn_goes_on(tmp_path):
    turn = run(tmp_path, answering({"outcome": {"outcome": "selected", "optionId": "reject_once"}}))
    assert turn.stop == "end_turn" and not turn.target.exists()
    assert turn.result().text == REJECTED_FOR_MODEL
    assert REJECTED_FOR_PERSON in str(turn.final_status()["content"])
    assert turn.model_requests() == 2


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (ClientError(-32603, "Internal error", {"details": "dialog crashed"}), "dialog crashed"),
        (ConnectionResetError("the client went away"), "the client went away"),
    ],
    ids=["client-error", "connection-lost"],
)
def test_a_failed_permission_request_is_a_refusal_with_its_reason_and_the_turn_goes_on(tmp_path, exc, reason):
    turn = run(tmp_path, answering(exc=exc))
    assert turn.stop == "end_turn" and not turn.target.exists()
    result = turn.result()
    assert result.is_error and "Permission could not be asked" in result.text and reason in result.text
    status = turn.final_status()
    assert status["status"] == "failed" and "the permission request failed" in str(status["content"])
    assert turn.model_requests() == 2 and paired_everywhere(turn.messages)


def test_a_malformed_answer_is_a_refusal_not_an_allow(tmp_path):
    turn = run(tmp_path, answering({"outcome": {"outcome": "selected", "optionId": "allow_everything"}}))
    assert turn.stop == "end_turn" and not turn.target.exists()
    assert "not understood" in turn.result().text


class Gate:
    """A client that holds the permission request open until the test has cancelled the turn, then answers
    with `late` (or never, when `late` is None)."""

    def __init__(self, late: Any) -> None:
        self.late = late
        self.release = anyio.Event()
        self.peer = ScriptedPeer(self.answer)

    async def answer(self, method: str, params: Any) -> Any:
        await self.release.wait()
        if self.late is None:
            await anyio.sleep_forever()
        return self.late

    async def cancel_then_release(self, session: Session) -> None:
        session.cancel()  # what session/cancel does
        self.release.set()


@pytest.mark.parametrize("late", [CANCELLED, SELECTED_ALLOW_ONCE], ids=["answered-cancelled", "late-allow"])
def test_session_cancel_while_asking_waits_for_the_answer_and_runs_nothing(tmp_path, late):
    gate = Gate(late)
    turn = run(tmp_path, gate.peer, gate.cancel_then_release)
    assert_not_run_and_cancelled(turn)


def test_session_cancel_while_asking_a_client_that_never_answers_ends_after_the_grace(tmp_path, monkeypatch):
    monkeypatch.setattr(approval, "CANCEL_GRACE", 0.2)
    gate = Gate(None)
    began = time.monotonic()
    turn = run(tmp_path, gate.peer, gate.cancel_then_release)
    waited = time.monotonic() - began
    assert_not_run_and_cancelled(turn)
    assert 0.2 <= waited < 3  # the grace was waited out, and no more (the default would be 1 s)
