"""A plan's entries come from the model (todo_write) and from session files: values outside ACP's enumerations
become the safe ones instead of a schema-invalid `plan` update."""

from __future__ import annotations

from ama_acp.session.editor.updates import plan_update
from ama_acp.session.restore import _plan  # the session-file side of the same rule


def test_a_plan_entry_outside_the_enumerations_is_sent_as_pending_and_medium() -> None:
    plan = plan_update([{"content": "x", "status": "bogus", "priority": "urgent"}, {"content": "y"}])
    assert [(e.status, e.priority) for e in plan.entries] == [("pending", "medium"), ("pending", "medium")]
    good = plan_update([{"content": "z", "status": "completed", "priority": "high"}])
    assert [(e.status, e.priority) for e in good.entries] == [("completed", "high")]


def test_a_damaged_stored_plan_keeps_what_can_be_read() -> None:
    stored = [
        {"content": "ok", "status": "in_progress", "priority": "low"},
        {"content": "bad values", "status": 3, "priority": None},
        {"status": "pending"},  # no content: not an entry
        "not an object",
    ]
    assert _plan(stored) == [
        {"content": "ok", "status": "in_progress", "priority": "low"},
        {"content": "bad values", "status": "pending", "priority": "medium"},
    ]
    assert _plan({"not": "a list"}) == []
