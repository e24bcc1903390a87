"""WireIds (session/turn/wire_ids.py): a session never hands out a toolCallId twice, whatever ids the provider
sends and whatever the session file already used."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ama_acp.session.turn.wire_ids import WireIds

# Provider ids from a small alphabet, so repeats and ids shaped like renames (`a#2`, `a#2#2`) are frequent.
IDS = st.text(alphabet="ab#2", min_size=1, max_size=5)


def test_first_use_keeps_the_provider_id_and_repeats_get_the_first_free_suffix() -> None:
    ids = WireIds()
    assert [ids.allocate("dup") for _ in range(3)] == ["dup", "dup#2", "dup#3"]
    assert ids.allocate("dup#2") == "dup#2#2"  # shaped like a rename, and that rename is taken


def test_ids_read_back_from_the_file_are_never_handed_out_again() -> None:
    ids = WireIds(["call_0", "call_0#2"])
    assert ids.allocate("call_0") == "call_0#3"
    assert ids.allocate("call_1") == "call_1"


@given(st.lists(IDS, max_size=60), st.lists(IDS, max_size=60))
def test_allocation_is_unique_across_history(stored: list[str], provider_ids: list[str]) -> None:
    ids = WireIds(stored)
    handed = [ids.allocate(p) for p in provider_ids]
    assert len(set(handed)) == len(handed)
    assert not set(handed) & set(stored)
    for provider_id, wire_id in zip(provider_ids, handed, strict=True):
        assert wire_id == provider_id or wire_id.startswith(provider_id + "#")
