"""A streamed reply's text (ama_acp/agent/streamed_text.py): whatever the deltas — lone surrogates, NULs, astral
characters, empty ones — and wherever the folds fall, the part's string is exactly the deltas joined."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.agent import streamed_text
from ama_acp.agent.streamed_text import StreamedText

# Any code point, the lone surrogates a JSON `\ud800` escape decodes to included.
DELTA = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)


@given(deltas=st.lists(DELTA, max_size=40), fold=st.integers(1, 30))
def test_the_text_is_the_deltas_joined_wherever_they_are_folded(deltas: list[str], fold: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(streamed_text, "FOLD_CHARS", fold)
        text = StreamedText()
        for delta in deltas:
            text.add(delta)
        assert bool(text) == bool(deltas)  # an empty delta still makes a part, as a joined list did
        assert text.take() == "".join(deltas)
        assert not text and text.take() == ""  # taken: empty again


def test_a_long_text_is_held_folded_not_as_its_deltas() -> None:
    text = StreamedText()
    for _ in range(3 * streamed_text.FOLD_CHARS // 1000):
        text.add("é" * 1000)
    assert len(text._deltas) < streamed_text.FOLD_CHARS // 1000  # the rest went into the one buffer
    assert text.take() == "é" * (3 * streamed_text.FOLD_CHARS // 1000 * 1000)
