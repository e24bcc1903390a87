"""`/model` on a real in-process session (session/commands.py `model_command`): it shows the current model
and the choices, switches to a known id (the meter takes the new window, options then usage are sent, the
switch is persisted), and refuses an unknown or hostile id with a message, changing nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from ama_acp.config import ModelEntry
from ama_acp.session.live import Session
from ama_acp.session.manager import SessionManager
from ama_acp.session.store import entries as en
from ama_acp.session.store.session_store import read_session
from tests.support.inprocess import ScriptedPeer, make_manager, prompt, reload, workspace

MODELS = [
    ModelEntry(id="scripted/test", context_window=100_000, max_output=1_000, name="Test model"),
    ModelEntry(id="scripted/other", context_window=50_000, max_output=2_000, name="Other model"),
]


def setup(tmp_path: Path) -> tuple[SessionManager, ScriptedPeer]:
    return make_manager(tmp_path, [{"text": "hi"}], models=MODELS)


def run_model_command(tmp_path: Path, argument: str) -> tuple[Session, ScriptedPeer, list[dict[str, Any]], str]:
    """A session that had one turn, then `/model <argument>`; the updates the command caused and its stop."""
    manager, peer = setup(tmp_path)
    ws = workspace(tmp_path)

    async def main() -> tuple[Session, list[dict[str, Any]], str]:
        session = manager.new_session(str(ws), None, [])
        await prompt(session, "hello")
        mark = len(peer.updates)
        stop = await prompt(session, f"/model {argument}".rstrip())
        caused = peer.updates[mark:]
        await manager.close(session.id)
        return session, caused, stop

    session, caused, stop = anyio.run(main)
    return session, peer, caused, stop


def said(updates: list[dict[str, Any]]) -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")


def model_entries(session: Session) -> list[str]:
    loaded = read_session(session.rt.store.path(session.id))
    return [e.model_id for e in loaded.entries if isinstance(e, en.ModelEntry)]


def test_model_without_an_argument_shows_the_current_model_and_the_choices(tmp_path):
    session, _, caused, stop = run_model_command(tmp_path, "")
    assert stop == "end_turn"
    text = said(caused)
    assert text.startswith("Current model: `scripted/test`")
    assert "- `scripted/test` — Test model" in text and "- `scripted/other` — Other model" in text
    assert "Switch with `/model <id>`." in text
    assert session.model_id == "scripted/test"
    assert not [u for u in caused if u["sessionUpdate"] == "config_option_update"]


def test_model_with_a_known_id_switches_the_model_the_window_and_tells_the_client(tmp_path):
    session, _, caused, stop = run_model_command(tmp_path, "scripted/other")
    assert stop == "end_turn"
    assert session.model_id == "scripted/other"
    assert session.ctx.figures().window == 50_000
    assert session.host.build_request().model == "other" and session.host.build_request().max_output == 2_000
    kinds = [u["sessionUpdate"] for u in caused]
    assert "config_option_update" in kinds and "usage_update" in kinds
    assert kinds.index("config_option_update") < kinds.index("usage_update")  # E3: options first
    (options,) = [u for u in caused if u["sessionUpdate"] == "config_option_update"]
    (model_option,) = [o for o in options["configOptions"] if o["id"] == "model"]
    assert model_option["currentValue"] == "scripted/other"
    sizes = [u["size"] for u in caused if u["sessionUpdate"] == "usage_update"]
    assert sizes[0] == 50_000  # the meter now measures against the new model's window
    assert "Model switched to `scripted/other`." in said(caused)
    assert model_entries(session) == ["scripted/test", "scripted/other"]


def test_a_switched_model_survives_a_reload(tmp_path):
    session, _, _, _ = run_model_command(tmp_path, "scripted/other")

    async def again() -> Session:
        manager2, _ = setup(tmp_path)
        return await reload(manager2, session.id, tmp_path / "ws")

    loaded = anyio.run(again)
    assert loaded.model_id == "scripted/other" and loaded.ctx.figures().window == 50_000


def test_model_with_the_current_id_changes_nothing(tmp_path):
    session, _, caused, _ = run_model_command(tmp_path, "scripted/test")
    assert session.model_id == "scripted/test"
    assert model_entries(session) == ["scripted/test"]
    assert not [u for u in caused if u["sessionUpdate"] == "config_option_update"]


@pytest.mark.parametrize(
    "argument",
    [
        "nope/none",
        "no-slash-at-all",
        "x" * 100_000,
        "evil\x1b[2J\x07\x00model",
        "scripted/other\nrm -rf /",
        "\u202escripted/other",
    ],
    ids=["unknown", "not-provider-slash-model", "100k-chars", "control-chars", "newline", "bidi"],
)
def test_model_with_an_unknown_or_hostile_id_says_so_and_changes_nothing(tmp_path, argument):
    session, _, caused, stop = run_model_command(tmp_path, argument)
    assert stop == "end_turn"
    assert session.model_id == "scripted/test" and session.ctx.figures().window == 100_000
    assert model_entries(session) == ["scripted/test"]
    kinds = [u["sessionUpdate"] for u in caused]
    assert "config_option_update" not in kinds
    text = said(caused)
    assert "unknown model" in text.lower()
    # the person sees the id escaped, not interpreted: no raw control character reaches the editor
    assert not any(ch in text for ch in "\x1b\x07\x00\n\u202e")


def test_model_with_an_unknown_id_answers_in_a_persons_words_and_clips_the_id(tmp_path):
    _, _, caused, _ = run_model_command(tmp_path, "x" * 100_000)
    text = said(caused)
    assert not text.startswith("Invalid params") and "value:" not in text
    assert len(text) < 1_000
